// Self-contained SVG charts for the simulator's figures (Borg §5): CDFs across
// cells (Fig. 4, 5b, 9, 10), experiment curves (Fig. 7) and grouped bars with
// min/max whiskers over seeds (Fig. 5a, 6). The SVG is written by this code,
// with no external dependencies; the same input always gives the same bytes.
//
// Every chart has a title, a legend row under it, axis lines with ticks on
// round values, axis labels, and the Okabe–Ito colour-blind-safe palette
// (lines past the palette also get dash patterns).
//
//   LineChart c;
//   c.title = "Compaction";
//   c.x = {.label = "Compacted size (% of original)", .format = TickFormat::kFraction};
//   c.y = {.label = "Cells", .min = 0, .max = 1, .format = TickFormat::kFraction};
//   c.series.push_back(CdfSeries("15 cells", sizes, ranges));
//   HERD_RETURN_IF_ERROR(WriteSvg("out/fig4.svg", c.Render()));
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"

namespace herd::sim::report {

using Point = std::pair<double, double>;
// An inclusive [lo, hi] range drawn as a whisker; NaN ends mean "none".
using Range = std::pair<double, double>;

// How tick labels (and bar value labels) print a value.
enum class TickFormat {
  kNumber,    // 1500 -> "1500", 25000 -> "25k", 0.25 -> "0.25"
  kFraction,  // values are fractions: 0.25 -> "25%"
  kPercent,   // values are already percentages: 25 -> "25%"
};

struct Axis {
  std::string label;
  // Fixed ends; when unset the end is a round tick just past the data.
  std::optional<double> min;
  std::optional<double> max;
  TickFormat format = TickFormat::kNumber;
  // Automatic ranges reach 0 (bars always do).
  bool include_zero = false;
};

// A labelled dashed line across the plot at x = value (vertical) or
// y = value (horizontal).
struct ReferenceLine {
  enum class Along { kX, kY };
  Along along = Along::kX;
  double value = 0;
  std::string label;
};

struct LineSeries {
  std::string name;
  std::vector<Point> points;  // drawn in order; a NaN coordinate breaks the line
  bool step = false;          // hold y until the next x (a CDF), else straight segments
  bool markers = false;       // a dot at each point
  // Optional whiskers, one per point when set: x_ranges horizontal (e.g. a
  // CDF of cells where each cell's value has a min..max over trials),
  // y_ranges vertical.
  std::vector<Range> x_ranges;
  std::vector<Range> y_ranges;
};

struct LineChart {
  std::string title;
  Axis x;
  Axis y;
  std::vector<LineSeries> series;
  std::vector<ReferenceLine> references;
  int width = 720;
  int height = 420;

  std::string Render() const;
};

struct BarSeries {
  std::string name;
  std::vector<double> values;  // one per category; NaN = no bar
  std::vector<Range> ranges;   // optional whiskers, one per category when set
};

// Categories along x, one bar per series in each category group.
struct BarChart {
  std::string title;
  std::string x_label;
  Axis y;
  std::vector<std::string> categories;
  std::vector<BarSeries> series;
  // Horizontal lines (Along::kY only); their labels go in the legend.
  std::vector<ReferenceLine> references;
  bool value_labels = false;  // print each value above its bar
  int value_precision = 0;    // decimals of value labels
  int width = 720;
  int height = 420;

  std::string Render() const;
};

// The empirical CDF of `values` (NaNs dropped): sorted distinct values v with
// the fraction of values <= v, preceded by (min, 0) so a step line rises from
// the axis. Empty input gives an empty vector.
std::vector<Point> Cdf(std::vector<double> values);

// A step series plotting Cdf(values). When `ranges` is given (one per value,
// e.g. the min..max over trials of the value shown), each point gets its
// value's range as a horizontal whisker.
LineSeries CdfSeries(std::string name, std::vector<double> values, std::vector<Range> ranges = {});

// Round tick values covering [lo, hi]: steps of 1, 2 or 5 x 10^k giving about
// `target` intervals. With extend, the ticks reach past the data to a round
// value (0..973 -> 0, 200, ..., 1000); without, they stay inside [lo, hi].
std::vector<double> NiceTicks(double lo, double hi, int target = 5, bool extend = true);

// The label of a tick (or value) `v` on an axis whose ticks are `step` apart.
std::string FormatTick(double v, double step, TickFormat format);

// Escapes & < > " ' for XML text and attribute values.
std::string XmlEscape(const std::string& s);

// Writes an SVG document to `path`, creating its directory.
absl::Status WriteSvg(const std::string& path, const std::string& svg);

}  // namespace herd::sim::report
