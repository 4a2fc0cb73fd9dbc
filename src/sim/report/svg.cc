#include "sim/report/svg.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numbers>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/check.h"
#include "sim/report/canvas.h"
#include "sim/report/table.h"

namespace herd::sim::report {
namespace {

using internal::Box;
using internal::Coord;
using internal::Frame;
using internal::LegendItem;
using internal::ResolvedAxis;
using internal::SvgWriter;

constexpr double kXBand = 5 + internal::kTickFont + 8;  // tick + label under the plot

// A clip-path id derived from the content, so that several charts inlined in
// one HTML page do not share ids and the output stays deterministic.
std::string ClipId(const std::string& title, size_t n) {
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : title) h = (h ^ c) * 1099511628211ULL;
  h = (h ^ n) * 1099511628211ULL;
  return absl::StrFormat("herd-clip-%08x", static_cast<uint32_t>(h ^ (h >> 32)));
}

struct Extent {
  double lo = INFINITY;
  double hi = -INFINITY;
  void Add(double v) {
    if (!std::isfinite(v)) return;
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
};

void DrawReference(SvgWriter& svg, const Box& plot, bool vertical, double pos, const std::string& label) {
  if (vertical) {
    if (pos < plot.left - 0.5 || pos > plot.right + 0.5) return;
    svg.Line(pos, plot.top, pos, plot.bottom, internal::kRefInk, 1.2, "5 4");
    const bool room_right = pos + 6 + internal::TextWidth(label, internal::kTickFont) < plot.right;
    if (!label.empty()) {
      svg.Text(room_right ? pos + 4 : pos - 4, plot.top + internal::kTickFont + 2, label,
               {.anchor = room_right ? "start" : "end", .fill = internal::kRefInk, .halo = true});
    }
  } else {
    if (pos < plot.top - 0.5 || pos > plot.bottom + 0.5) return;
    svg.Line(plot.left, pos, plot.right, pos, internal::kRefInk, 1.2, "5 4");
    if (!label.empty()) svg.Text(plot.right - 4, pos - 4, label, {.anchor = "end", .fill = internal::kRefInk, .halo = true});
  }
}

// A whisker from (x1, y1) to (x2, y2) with short caps across its ends.
void DrawWhisker(SvgWriter& svg, double x1, double y1, double x2, double y2, double cap, const std::string& color,
                 double width) {
  svg.Line(x1, y1, x2, y2, color, width);
  const bool vertical = x1 == x2;
  for (auto [x, y] : {std::pair{x1, y1}, std::pair{x2, y2}}) {
    if (vertical) {
      svg.Line(x - cap, y, x + cap, y, color, width);
    } else {
      svg.Line(x, y - cap, x, y + cap, color, width);
    }
  }
}

bool Finite(const Range& r) { return std::isfinite(r.first) && std::isfinite(r.second); }

}  // namespace

std::vector<double> NiceTicks(double lo, double hi, int target, bool extend) {
  if (!std::isfinite(lo) || !std::isfinite(hi)) return {0, 1};
  if (hi < lo) std::swap(lo, hi);
  if (hi == lo) {
    const double pad = lo == 0 ? 1 : std::abs(lo) * 0.1;
    lo -= lo == 0 ? 0 : pad;
    hi += pad;
  }
  target = std::max(target, 1);
  const double raw = (hi - lo) / target;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  const double norm = raw / mag;
  const double nice = norm < 1.5 ? 1 : norm < 3 ? 2 : norm < 7 ? 5 : 10;
  const double step = nice * mag;
  // Below 1, divide by a power of ten (exact) so that 3 x 0.2 comes out as
  // the double nearest 0.6 rather than 0.6000000000000001.
  const double inv = mag < 1 ? std::round(1 / mag) : 0;
  const double eps = 1e-9;
  const double first = extend ? std::floor(lo / step + eps) : std::ceil(lo / step - eps);
  const double last = extend ? std::ceil(hi / step - eps) : std::floor(hi / step + eps);
  std::vector<double> ticks;
  for (double i = first; i <= last && ticks.size() < 1000; i += 1) {
    const double t = inv > 0 ? i * nice / inv : i * step;
    ticks.push_back(t == 0 ? 0.0 : t);  // no -0
  }
  return ticks;
}

std::string FormatTick(double v, double step, TickFormat format) {
  const double scale = format == TickFormat::kFraction ? 100 : 1;
  v *= scale;
  step = std::abs(step * scale);
  std::string unit = format == TickFormat::kNumber ? "" : "%";
  if (format == TickFormat::kNumber && step >= 1e7) {
    v /= 1e6, step /= 1e6, unit = "M";
  } else if (format == TickFormat::kNumber && step >= 1e4) {
    v /= 1e3, step /= 1e3, unit = "k";
  }
  int decimals = 0;
  for (double s = step; decimals < 6 && s > 0 && std::abs(s - std::round(s)) > 1e-6 * std::max(1.0, s); s *= 10) {
    ++decimals;
  }
  std::string s = absl::StrFormat("%.*f", decimals, v);
  if (s[0] == '-' && s.find_first_not_of("-0.") == std::string::npos) s.erase(0, 1);
  return s + unit;
}

std::string XmlEscape(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (unsigned char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default:
        // Control characters other than tab and line breaks are not allowed
        // in XML 1.0, even escaped.
        out += (c < 0x20 && c != '\t' && c != '\n' && c != '\r') ? '?' : static_cast<char>(c);
    }
  }
  return out;
}

std::vector<Point> Cdf(std::vector<double> values) {
  std::erase_if(values, [](double v) { return std::isnan(v); });
  std::sort(values.begin(), values.end());
  std::vector<Point> out;
  if (values.empty()) return out;
  const double n = static_cast<double>(values.size());
  out.emplace_back(values.front(), 0.0);
  for (size_t i = 0; i < values.size(); ++i) {
    if (i + 1 < values.size() && values[i + 1] == values[i]) continue;  // ties: one point at the top
    out.emplace_back(values[i], static_cast<double>(i + 1) / n);
  }
  return out;
}

LineSeries CdfSeries(std::string name, std::vector<double> values, std::vector<Range> ranges) {
  LineSeries s;
  s.name = std::move(name);
  s.step = true;
  if (ranges.empty()) {
    s.points = Cdf(std::move(values));
    return s;
  }
  HERD_CHECK_MSG(ranges.size() == values.size(), "CdfSeries: one range per value");
  // One marked point per value (ties not merged) so each keeps its whisker.
  std::vector<size_t> order;
  for (size_t i = 0; i < values.size(); ++i) {
    if (!std::isnan(values[i])) order.push_back(i);
  }
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return values[a] < values[b]; });
  for (size_t k = 0; k < order.size(); ++k) {
    s.points.emplace_back(values[order[k]], static_cast<double>(k + 1) / static_cast<double>(order.size()));
    s.x_ranges.push_back(ranges[order[k]]);
  }
  s.markers = true;
  return s;
}

std::string LineChart::Render() const {
  Extent ex, ey;
  for (const auto& s : series) {
    for (const auto& [x, y] : s.points) ex.Add(x), ey.Add(y);
    for (const auto& r : s.x_ranges) ex.Add(r.first), ex.Add(r.second);
    for (const auto& r : s.y_ranges) ey.Add(r.first), ey.Add(r.second);
  }
  for (const auto& r : references) (r.along == ReferenceLine::Along::kX ? ex : ey).Add(r.value);
  const ResolvedAxis ya = internal::ResolveAxis(y, ey.lo, ey.hi, 5);
  std::vector<LegendItem> legend;
  for (size_t i = 0; i < series.size(); ++i) {
    if (series[i].name.empty()) continue;
    legend.push_back({series[i].name, internal::Color(i), internal::Dash(i), false, series[i].markers});
  }
  const Frame frame(width, height, title, legend, ya, y.label, kXBand, x.label);
  const Box& plot = frame.plot();
  // Fewer x ticks until their labels fit side by side.
  ResolvedAxis xa;
  for (int target = std::max(2, static_cast<int>(plot.width() / 80)); target >= 2; --target) {
    xa = internal::ResolveAxis(x, ex.lo, ex.hi, target);
    double widest = 0;
    for (const auto& l : xa.labels) widest = std::max(widest, internal::TextWidth(l, internal::kTickFont));
    const double spacing = xa.ticks.size() < 2 ? plot.width() : plot.width() * xa.step / (xa.hi - xa.lo);
    if (widest + 12 <= spacing) break;
  }
  auto px = [&](double v) { return plot.left + (v - xa.lo) / (xa.hi - xa.lo) * plot.width(); };
  auto py = [&](double v) { return frame.Y(v); };
  auto clamp_x = [&](double v) { return std::clamp(px(v), plot.left, plot.right); };
  auto clamp_y = [&](double v) { return std::clamp(py(v), plot.top, plot.bottom); };

  SvgWriter svg(width, height, title);
  frame.Draw(svg);
  svg.OpenGroup("x-axis");
  for (size_t i = 0; i < xa.ticks.size(); ++i) {
    const double tx = px(xa.ticks[i]);
    if (std::abs(tx - plot.left) > 0.5) svg.Line(tx, plot.top, tx, plot.bottom, internal::kGrid, 1);
    svg.Line(tx, plot.bottom, tx, plot.bottom + 5, internal::kInk, 1);
    svg.Text(tx, plot.bottom + 5 + internal::kTickFont + 1, xa.labels[i], {.anchor = "middle"});
  }
  svg.CloseGroup();
  svg.OpenGroup("references");
  for (const auto& r : references) {
    const bool vertical = r.along == ReferenceLine::Along::kX;
    DrawReference(svg, plot, vertical, vertical ? px(r.value) : py(r.value), r.label);
  }
  svg.CloseGroup();
  const std::string clip = ClipId(title, series.size());
  svg.ClipRect(clip, {plot.left - 3, plot.top - 3, plot.right + 3, plot.bottom + 3});
  for (size_t i = 0; i < series.size(); ++i) {
    const LineSeries& s = series[i];
    const std::string color = internal::Color(i);
    svg.OpenGroup("series");
    std::string d;
    bool open = false;
    for (const auto& [x0, y0] : s.points) {
      if (!std::isfinite(x0) || !std::isfinite(y0)) {
        open = false;
        continue;
      }
      if (!open) {
        absl::StrAppend(&d, d.empty() ? "" : " ", "M", Coord(px(x0)), " ", Coord(py(y0)));
      } else if (s.step) {
        absl::StrAppend(&d, " H", Coord(px(x0)), " V", Coord(py(y0)));
      } else {
        absl::StrAppend(&d, " L", Coord(px(x0)), " ", Coord(py(y0)));
      }
      open = true;
    }
    if (!d.empty()) svg.Path(d, color, 2, internal::Dash(i), clip);
    for (size_t k = 0; k < s.points.size(); ++k) {
      const auto [x0, y0] = s.points[k];
      if (k < s.x_ranges.size() && Finite(s.x_ranges[k]) && std::isfinite(y0)) {
        DrawWhisker(svg, clamp_x(s.x_ranges[k].first), clamp_y(y0), clamp_x(s.x_ranges[k].second), clamp_y(y0), 3,
                    color, 1.2);
      }
      if (k < s.y_ranges.size() && Finite(s.y_ranges[k]) && std::isfinite(x0)) {
        DrawWhisker(svg, clamp_x(x0), clamp_y(s.y_ranges[k].first), clamp_x(x0), clamp_y(s.y_ranges[k].second), 3,
                    color, 1.2);
      }
    }
    if (s.markers) {
      for (const auto& [x0, y0] : s.points) {
        if (!std::isfinite(x0) || !std::isfinite(y0)) continue;
        const double cx = px(x0), cy = py(y0);
        if (cx < plot.left - 0.5 || cx > plot.right + 0.5 || cy < plot.top - 0.5 || cy > plot.bottom + 0.5) continue;
        svg.Circle(cx, cy, 3.2, color);
      }
    }
    svg.CloseGroup();
  }
  return svg.Finish();
}

std::string BarChart::Render() const {
  Extent ey;
  ey.Add(0);
  for (const auto& s : series) {
    for (double v : s.values) ey.Add(v);
    for (const auto& r : s.ranges) ey.Add(r.first), ey.Add(r.second);
  }
  for (const auto& r : references) {
    if (r.along == ReferenceLine::Along::kY) ey.Add(r.value);
  }
  Axis yaxis = y;
  yaxis.include_zero = true;
  // Value labels above the tallest bar (or below the deepest) need headroom.
  const double pad = value_labels ? 0.1 * (ey.hi - ey.lo) : 0;
  const ResolvedAxis ya =
      internal::ResolveAxis(yaxis, ey.lo < 0 ? ey.lo - pad : ey.lo, ey.hi > 0 ? ey.hi + pad : ey.hi, 5);
  std::vector<LegendItem> legend;
  for (size_t i = 0; i < series.size(); ++i) {
    if (!series[i].name.empty()) legend.push_back({series[i].name, internal::Color(i), "", true, false});
  }
  // Reference labels would collide with bars and value labels inside the
  // plot, so they go to the legend.
  for (const auto& r : references) {
    if (r.along == ReferenceLine::Along::kY && !r.label.empty()) {
      legend.push_back({r.label, internal::kRefInk, "5 4", false, false});
    }
  }
  const size_t n = std::max<size_t>(categories.size(), 1);
  // Category labels go under their groups, slanted when they do not fit.
  Frame frame(width, height, title, legend, ya, y.label, kXBand, x_label);
  double widest = 0;
  for (const auto& c : categories) widest = std::max(widest, internal::TextWidth(c, internal::kTickFont));
  const bool slant = widest > frame.plot().width() / static_cast<double>(n) - 6;
  constexpr double kSlant = 35;  // degrees
  if (slant) {
    const double band = std::min(widest * std::sin(kSlant * std::numbers::pi / 180) + internal::kTickFont + 10, height * 0.3);
    frame = Frame(width, height, title, legend, ya, y.label, band, x_label);
  }
  const Box& plot = frame.plot();
  const double slot = plot.width() / static_cast<double>(n);
  const double group = slot * 0.8;
  const double bar_w = series.empty() ? group : group / static_cast<double>(series.size());
  const double gap = series.size() > 1 ? std::min(2.0, bar_w * 0.1) : 0;

  SvgWriter svg(width, height, title);
  frame.Draw(svg);
  svg.OpenGroup("x-axis");
  for (size_t c = 0; c < categories.size(); ++c) {
    const double cx = plot.left + slot * (static_cast<double>(c) + 0.5);
    if (slant) {
      svg.Text(cx + 3, plot.bottom + internal::kTickFont + 2, categories[c], {.anchor = "end", .rotate = -kSlant});
    } else {
      svg.Text(cx, plot.bottom + 5 + internal::kTickFont + 1, categories[c], {.anchor = "middle"});
    }
  }
  svg.CloseGroup();
  if (ya.lo < 0) svg.Line(plot.left, frame.Y(0), plot.right, frame.Y(0), internal::kInk, 1);
  struct ValueLabel {
    double x, y;
    std::string text;
  };
  std::vector<ValueLabel> labels;
  for (size_t i = 0; i < series.size(); ++i) {
    const BarSeries& s = series[i];
    svg.OpenGroup("series");
    for (size_t c = 0; c < categories.size() && c < s.values.size(); ++c) {
      const double v = s.values[c];
      if (!std::isfinite(v)) continue;
      const double x0 = plot.left + slot * static_cast<double>(c) + (slot - group) / 2 + bar_w * static_cast<double>(i);
      const double top = frame.Y(std::max(v, 0.0)), bottom = frame.Y(std::min(v, 0.0));
      const double y_top = std::clamp(top, plot.top, plot.bottom), y_bottom = std::clamp(bottom, plot.top, plot.bottom);
      svg.Rect(x0 + gap / 2, y_top, bar_w - gap, y_bottom - y_top, internal::Color(i));
      double label_hi = v, label_lo = v;
      const double cx = x0 + bar_w / 2;
      if (c < s.ranges.size() && Finite(s.ranges[c])) {
        const double lo = std::clamp(frame.Y(s.ranges[c].first), plot.top, plot.bottom);
        const double hi = std::clamp(frame.Y(s.ranges[c].second), plot.top, plot.bottom);
        DrawWhisker(svg, cx, lo, cx, hi, std::min(bar_w * 0.25, 6.0), "#222222", 1.2);
        label_hi = std::max(v, std::max(s.ranges[c].first, s.ranges[c].second));
        label_lo = std::min(v, std::min(s.ranges[c].first, s.ranges[c].second));
      }
      if (value_labels) {
        const double ly = v >= 0 ? frame.Y(label_hi) - 4 : frame.Y(label_lo) + 11;
        labels.push_back({cx, std::clamp(ly, plot.top + 9, plot.bottom - 2),
                          internal::FormatValue(v, value_precision, y.format)});
      }
    }
    svg.CloseGroup();
  }
  svg.OpenGroup("references");
  for (const auto& r : references) {
    if (r.along == ReferenceLine::Along::kY) DrawReference(svg, plot, false, frame.Y(r.value), "");
  }
  svg.CloseGroup();
  // Value labels last, so no reference line crosses them.
  svg.OpenGroup("values");
  for (const auto& l : labels) svg.Text(l.x, l.y, l.text, {.size = 10, .anchor = "middle", .halo = true});
  svg.CloseGroup();
  return svg.Finish();
}

absl::Status WriteSvg(const std::string& path, const std::string& svg) { return WriteTextFile(path, svg); }

}  // namespace herd::sim::report
