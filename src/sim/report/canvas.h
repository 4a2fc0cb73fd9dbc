// Internal drawing helpers shared by the charts of svg.h: number formatting
// for coordinates, text width estimates, the palette, axis resolution, chart
// layout (title, legend, plot area) and a small SVG element writer.
#pragma once

#include <string>
#include <vector>

#include "sim/report/svg.h"

namespace herd::sim::report::internal {

inline constexpr const char* kFontFamily = "DejaVu Sans, Helvetica, Arial, sans-serif";
inline constexpr double kTickFont = 11;
inline constexpr double kLabelFont = 13;
inline constexpr double kTitleFont = 16;
inline constexpr double kLegendFont = 12;
inline constexpr const char* kInk = "#333333";   // axes, labels
inline constexpr const char* kGrid = "#e6e6e6";  // grid lines
inline constexpr const char* kRefInk = "#555555";

// A coordinate with at most 2 decimals and no trailing zeros ("12.5", "-3").
std::string Coord(double v);

// An estimate of the rendered width of `s` in a sans-serif font of `size` px.
double TextWidth(const std::string& s, double size);

// Series colour i (Okabe–Ito, cycling) and the dash pattern of line i: solid
// for the first pass through the palette, then dashed, then dotted.
const char* Color(size_t i);
const char* Dash(size_t i);

// A value label with `precision` decimals in `format`.
std::string FormatValue(double v, int precision, TickFormat format);

// An axis resolved against its data: the drawn range and its ticks.
struct ResolvedAxis {
  double lo = 0;
  double hi = 1;
  double step = 0.2;
  std::vector<double> ticks;
  std::vector<std::string> labels;  // one per tick
};
ResolvedAxis ResolveAxis(const Axis& axis, double data_lo, double data_hi, int target);

struct Box {
  double left = 0, top = 0, right = 0, bottom = 0;
  double width() const { return right - left; }
  double height() const { return bottom - top; }
};

struct LegendItem {
  std::string name;
  std::string color;
  std::string dash;     // for lines
  bool box = false;     // a filled square (bars) instead of a line
  bool marker = false;  // a dot on the line
};

struct TextStyle {
  double size = kTickFont;
  const char* anchor = "start";  // "start", "middle" or "end"
  const char* fill = kInk;
  bool bold = false;
  double rotate = 0;  // degrees about the anchor point
  bool halo = false;  // a white outline, for labels that may cross lines or bars
};

// Writes SVG elements into a string; attribute values and text are escaped.
class SvgWriter {
 public:
  // Opens the document: root element, title for accessibility, white background.
  SvgWriter(int width, int height, const std::string& title);

  void Line(double x1, double y1, double x2, double y2, const std::string& stroke, double width,
            const std::string& dash = "");
  void Rect(double x, double y, double w, double h, const std::string& fill);
  void Circle(double cx, double cy, double r, const std::string& fill);
  // A path of straight runs; `d` is already built from Coord values.
  void Path(const std::string& d, const std::string& stroke, double width, const std::string& dash,
            const std::string& clip_id);
  // Text with its baseline at y, anchored at x.
  void Text(double x, double y, const std::string& text, const TextStyle& style);
  void ClipRect(const std::string& id, const Box& box);
  void OpenGroup(const std::string& css_class);
  void CloseGroup();

  // Closes the document and returns it.
  std::string Finish();

 private:
  std::string out_;
};

// The chart frame around the plot area: title on top, then the legend rows,
// then the plot with the y tick labels and label to its left and
// `x_band` pixels below it for x tick labels (plus the x label, if any).
class Frame {
 public:
  Frame(int width, int height, const std::string& title, const std::vector<LegendItem>& legend,
        const ResolvedAxis& y, const std::string& y_label, double x_band, const std::string& x_label);

  const Box& plot() const { return plot_; }
  double Y(double v) const;  // data y -> pixel y

  // Title, legend, horizontal grid, y axis with ticks and label, x axis line,
  // x label. Series are drawn after this.
  void Draw(SvgWriter& svg) const;

 private:
  int width_, height_;
  std::string title_;
  std::vector<LegendItem> legend_;
  ResolvedAxis y_;
  std::string y_label_;
  std::string x_label_;
  Box plot_;
  std::vector<std::pair<double, double>> legend_at_;  // (x, baseline y) of each item
};

}  // namespace herd::sim::report::internal
