#include "sim/report/canvas.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace herd::sim::report::internal {
namespace {

constexpr const char* kPalette[] = {"#0072B2", "#E69F00", "#009E73", "#D55E00",
                                    "#CC79A7", "#56B4E9", "#000000", "#999999"};
constexpr size_t kPaletteSize = sizeof(kPalette) / sizeof(kPalette[0]);
constexpr const char* kDashes[] = {"", "7 4", "2 3"};

constexpr double kLegendSwatch = 22;  // line or box width in the legend
constexpr double kLegendGap = 18;     // between items
constexpr double kLegendRow = 18;
constexpr double kTickLength = 5;

std::string Attr(const std::string& name, const std::string& value) {
  return absl::StrCat(" ", name, "=\"", XmlEscape(value), "\"");
}

std::string Attr(const std::string& name, double value) { return absl::StrCat(" ", name, "=\"", Coord(value), "\""); }

}  // namespace

std::string Coord(double v) {
  if (!std::isfinite(v)) return "0";
  std::string s = absl::StrFormat("%.2f", v);
  while (s.back() == '0') s.pop_back();
  if (s.back() == '.') s.pop_back();
  if (s == "-0") s = "0";
  return s;
}

double TextWidth(const std::string& s, double size) {
  double em = 0;
  for (unsigned char c : s) {
    if ((c & 0xC0) == 0x80) continue;  // UTF-8 continuation byte
    if (std::string_view("iIjl.,:;'|!").find(c) != std::string_view::npos) {
      em += 0.3;
    } else if (std::string_view("ftr() -").find(c) != std::string_view::npos) {
      em += 0.4;
    } else if (std::string_view("mwMW%@").find(c) != std::string_view::npos) {
      em += 0.9;
    } else if (c >= 'A' && c <= 'Z') {
      em += 0.7;
    } else {
      em += 0.6;
    }
  }
  return em * size;
}

const char* Color(size_t i) { return kPalette[i % kPaletteSize]; }

const char* Dash(size_t i) { return kDashes[(i / kPaletteSize) % 3]; }

std::string FormatValue(double v, int precision, TickFormat format) {
  precision = std::clamp(precision, 0, 9);
  std::string s;
  switch (format) {
    case TickFormat::kNumber:
      s = absl::StrFormat("%.*f", precision, v);
      break;
    case TickFormat::kFraction:
      s = absl::StrFormat("%.*f%%", precision, v * 100);
      break;
    case TickFormat::kPercent:
      s = absl::StrFormat("%.*f%%", precision, v);
      break;
  }
  if (s[0] == '-' && s.find_first_not_of("-0.%") == std::string::npos) s.erase(0, 1);
  return s;
}

ResolvedAxis ResolveAxis(const Axis& axis, double data_lo, double data_hi, int target) {
  if (!std::isfinite(data_lo) || !std::isfinite(data_hi) || data_lo > data_hi) {
    data_lo = 0;
    data_hi = 1;
  }
  if (axis.include_zero) {
    data_lo = std::min(data_lo, 0.0);
    data_hi = std::max(data_hi, 0.0);
  }
  double lo = axis.min.value_or(data_lo);
  double hi = axis.max.value_or(data_hi);
  if (axis.min && !axis.max && hi <= lo) hi = lo + 1;
  if (axis.max && !axis.min && lo >= hi) lo = hi - 1;
  if (hi < lo) std::swap(lo, hi);
  ResolvedAxis r;
  const bool both_fixed = axis.min.has_value() && axis.max.has_value();
  r.ticks = NiceTicks(lo, hi, target, /*extend=*/!both_fixed);
  r.step = r.ticks.size() >= 2 ? r.ticks[1] - r.ticks[0] : 1;
  if (both_fixed) {
    r.lo = lo;
    r.hi = hi;
  } else {
    // Extended ticks; a fixed end cuts them.
    r.lo = axis.min ? lo : std::min(lo, r.ticks.front());
    r.hi = axis.max ? hi : std::max(hi, r.ticks.back());
    std::erase_if(r.ticks, [&](double t) { return t < r.lo - 1e-9 * r.step || t > r.hi + 1e-9 * r.step; });
  }
  if (r.hi <= r.lo) r.hi = r.lo + 1;
  for (double t : r.ticks) r.labels.push_back(FormatTick(t, r.step, axis.format));
  return r;
}

SvgWriter::SvgWriter(int width, int height, const std::string& title) {
  absl::StrAppend(&out_, "<svg xmlns=\"http://www.w3.org/2000/svg\"", Attr("width", width), Attr("height", height),
                  " viewBox=\"0 0 ", width, " ", height, "\"", Attr("font-family", kFontFamily), ">\n");
  absl::StrAppend(&out_, "<title>", XmlEscape(title), "</title>\n");
  Rect(0, 0, width, height, "#ffffff");
}

void SvgWriter::Line(double x1, double y1, double x2, double y2, const std::string& stroke, double width,
                     const std::string& dash) {
  absl::StrAppend(&out_, "<line", Attr("x1", x1), Attr("y1", y1), Attr("x2", x2), Attr("y2", y2),
                  Attr("stroke", stroke), Attr("stroke-width", width));
  if (!dash.empty()) out_ += Attr("stroke-dasharray", dash);
  out_ += "/>\n";
}

void SvgWriter::Rect(double x, double y, double w, double h, const std::string& fill) {
  absl::StrAppend(&out_, "<rect", Attr("x", x), Attr("y", y), Attr("width", std::max(w, 0.0)),
                  Attr("height", std::max(h, 0.0)), Attr("fill", fill), "/>\n");
}

void SvgWriter::Circle(double cx, double cy, double r, const std::string& fill) {
  absl::StrAppend(&out_, "<circle", Attr("cx", cx), Attr("cy", cy), Attr("r", r), Attr("fill", fill),
                  " stroke=\"#ffffff\" stroke-width=\"1\"/>\n");
}

void SvgWriter::Path(const std::string& d, const std::string& stroke, double width, const std::string& dash,
                     const std::string& clip_id) {
  absl::StrAppend(&out_, "<path", Attr("d", d), " fill=\"none\"", Attr("stroke", stroke), Attr("stroke-width", width),
                  " stroke-linejoin=\"round\" stroke-linecap=\"butt\"");
  if (!dash.empty()) out_ += Attr("stroke-dasharray", dash);
  if (!clip_id.empty()) out_ += Attr("clip-path", absl::StrCat("url(#", clip_id, ")"));
  out_ += "/>\n";
}

void SvgWriter::Text(double x, double y, const std::string& text, const TextStyle& style) {
  absl::StrAppend(&out_, "<text", Attr("x", x), Attr("y", y), Attr("font-size", style.size),
                  Attr("text-anchor", style.anchor), Attr("fill", style.fill));
  if (style.bold) out_ += " font-weight=\"bold\"";
  if (style.halo) out_ += " stroke=\"#ffffff\" stroke-width=\"3\" stroke-linejoin=\"round\" paint-order=\"stroke\"";
  if (style.rotate != 0) {
    out_ += Attr("transform", absl::StrCat("rotate(", Coord(style.rotate), " ", Coord(x), " ", Coord(y), ")"));
  }
  absl::StrAppend(&out_, ">", XmlEscape(text), "</text>\n");
}

void SvgWriter::ClipRect(const std::string& id, const Box& box) {
  absl::StrAppend(&out_, "<defs><clipPath", Attr("id", id), "><rect", Attr("x", box.left), Attr("y", box.top),
                  Attr("width", box.width()), Attr("height", box.height()), "/></clipPath></defs>\n");
}

void SvgWriter::OpenGroup(const std::string& css_class) { absl::StrAppend(&out_, "<g", Attr("class", css_class), ">\n"); }

void SvgWriter::CloseGroup() { out_ += "</g>\n"; }

std::string SvgWriter::Finish() {
  out_ += "</svg>\n";
  return std::move(out_);
}

Frame::Frame(int width, int height, const std::string& title, const std::vector<LegendItem>& legend,
             const ResolvedAxis& y, const std::string& y_label, double x_band, const std::string& x_label)
    : width_(width), height_(height), title_(title), legend_(legend), y_(y), y_label_(y_label), x_label_(x_label) {
  double tick_w = 0;
  for (const auto& l : y_.labels) tick_w = std::max(tick_w, TextWidth(l, kTickFont));
  plot_.left = 12 + (y_label_.empty() ? 0 : kLabelFont + 8) + tick_w + kTickLength + 4;
  plot_.right = width_ - 24;
  double top = title_.empty() ? 12 : 14 + kTitleFont + 8;
  // Legend rows, wrapped at the plot's width and starting at its left edge.
  double x = plot_.left;
  double row_y = top + kLegendFont;
  bool any = false;
  for (const auto& item : legend_) {
    const double w = kLegendSwatch + 6 + TextWidth(item.name, kLegendFont);
    if (any && x + w > plot_.right) {
      x = plot_.left;
      row_y += kLegendRow;
    }
    legend_at_.emplace_back(x, row_y);
    x += w + kLegendGap;
    any = true;
  }
  plot_.top = any ? row_y + 14 : top + 6;
  plot_.bottom = height_ - 10 - x_band - (x_label_.empty() ? 0 : kLabelFont + 6);
  if (plot_.bottom < plot_.top + 40) plot_.bottom = plot_.top + 40;  // absurd sizes: still draw something
}

double Frame::Y(double v) const { return plot_.bottom - (v - y_.lo) / (y_.hi - y_.lo) * plot_.height(); }

void Frame::Draw(SvgWriter& svg) const {
  if (!title_.empty()) svg.Text(width_ / 2.0, 14 + kTitleFont - 2, title_, {.size = kTitleFont, .anchor = "middle", .bold = true});
  svg.OpenGroup("legend");
  for (size_t i = 0; i < legend_.size(); ++i) {
    const auto& item = legend_[i];
    const auto [x, y] = legend_at_[i];
    const double mid = y - kLegendFont * 0.35;
    if (item.box) {
      svg.Rect(x + 5, mid - 6, 12, 12, item.color);
    } else {
      svg.Line(x, mid, x + kLegendSwatch, mid, item.color, 2.5, item.dash);
      if (item.marker) svg.Circle(x + kLegendSwatch / 2, mid, 3, item.color);
    }
    svg.Text(x + kLegendSwatch + 6, y, item.name, {.size = kLegendFont});
  }
  svg.CloseGroup();
  svg.OpenGroup("y-axis");
  for (size_t i = 0; i < y_.ticks.size(); ++i) {
    const double py = Y(y_.ticks[i]);
    if (std::abs(py - plot_.bottom) > 0.5) svg.Line(plot_.left, py, plot_.right, py, kGrid, 1);
    svg.Line(plot_.left - kTickLength, py, plot_.left, py, kInk, 1);
    svg.Text(plot_.left - kTickLength - 3, py + kTickFont * 0.35, y_.labels[i], {.anchor = "end"});
  }
  svg.Line(plot_.left, plot_.top, plot_.left, plot_.bottom, kInk, 1);
  if (!y_label_.empty()) {
    const double x = 12 + kLabelFont - 2;
    svg.Text(x, (plot_.top + plot_.bottom) / 2, y_label_, {.size = kLabelFont, .anchor = "middle", .rotate = -90});
  }
  svg.CloseGroup();
  svg.Line(plot_.left, plot_.bottom, plot_.right, plot_.bottom, kInk, 1);
  if (!x_label_.empty()) {
    svg.Text((plot_.left + plot_.right) / 2, height_ - 10 - 3, x_label_, {.size = kLabelFont, .anchor = "middle"});
  }
}

}  // namespace herd::sim::report::internal
