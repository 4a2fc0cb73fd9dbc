#include "sim/report/svg.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>

#include "absl/strings/match.h"

namespace herd::sim::report {
namespace {

// A minimal XML well-formedness check: one root element, balanced tags,
// quoted attributes, no raw '<' in text or attributes and only the five
// predefined entities. Returns "" when well-formed, else what is wrong.
std::string XmlProblem(const std::string& doc) {
  std::vector<std::string> open;
  bool root_seen = false;
  auto entity_ok = [&](size_t amp) {
    for (const char* e : {"&amp;", "&lt;", "&gt;", "&quot;", "&apos;"}) {
      if (doc.compare(amp, std::strlen(e), e) == 0) return true;
    }
    return false;
  };
  size_t i = 0;
  while (i < doc.size()) {
    if (doc[i] == '&' && !entity_ok(i)) return "bad entity at " + std::to_string(i);
    if (doc[i] != '<') {
      if (open.empty() && !std::isspace(static_cast<unsigned char>(doc[i]))) return "text outside root";
      ++i;
      continue;
    }
    const bool closing = doc[i + 1] == '/';
    size_t j = i + (closing ? 2 : 1);
    const size_t name_start = j;
    while (j < doc.size() && (std::isalnum(static_cast<unsigned char>(doc[j])) || doc[j] == '-' || doc[j] == ':')) ++j;
    const std::string name = doc.substr(name_start, j - name_start);
    if (name.empty()) return "empty tag name at " + std::to_string(i);
    // Attributes: name="value" pairs until '>' or '/>'.
    while (j < doc.size() && doc[j] != '>' && doc[j] != '/') {
      if (std::isspace(static_cast<unsigned char>(doc[j]))) {
        ++j;
        continue;
      }
      while (j < doc.size() && doc[j] != '=' && doc[j] != '>') ++j;
      if (j + 1 >= doc.size() || doc[j] != '=' || doc[j + 1] != '"') return "unquoted attribute in <" + name + ">";
      const size_t end = doc.find('"', j + 2);
      if (end == std::string::npos) return "unterminated attribute";
      for (size_t k = j + 2; k < end; ++k) {
        if (doc[k] == '<') return "raw < in attribute";
        if (doc[k] == '&' && !entity_ok(k)) return "bad entity in attribute";
      }
      j = end + 1;
    }
    if (j >= doc.size()) return "unterminated tag <" + name + ">";
    const bool self_closing = doc[j] == '/';
    if (self_closing && (j + 1 >= doc.size() || doc[j + 1] != '>')) return "bad self-closing tag";
    i = j + (self_closing ? 2 : 1);
    if (closing) {
      if (open.empty() || open.back() != name) return "unbalanced </" + name + ">";
      open.pop_back();
    } else if (!self_closing) {
      if (open.empty() && root_seen) return "second root element";
      root_seen = true;
      open.push_back(name);
    } else if (open.empty()) {
      return "self-closing root";
    }
  }
  if (!open.empty()) return "unclosed <" + open.back() + ">";
  return root_seen ? "" : "no root";
}

size_t Count(const std::string& s, const std::string& needle) {
  size_t n = 0;
  for (size_t p = s.find(needle); p != std::string::npos; p = s.find(needle, p + 1)) ++n;
  return n;
}

TEST(XmlChecker, CatchesBrokenDocuments) {
  EXPECT_EQ(XmlProblem("<svg><g/><text x=\"1\">a &amp; b</text></svg>"), "");
  EXPECT_NE(XmlProblem("<svg><g></svg>"), "");
  EXPECT_NE(XmlProblem("<svg><text>a & b</text></svg>"), "");
  EXPECT_NE(XmlProblem("<svg x=1></svg>"), "");
  EXPECT_NE(XmlProblem("<svg></svg><svg></svg>"), "");
}

TEST(NiceTicks, RoundSteps) {
  EXPECT_EQ(NiceTicks(0, 973), (std::vector<double>{0, 200, 400, 600, 800, 1000}));
  EXPECT_EQ(NiceTicks(0, 1), (std::vector<double>{0, 0.2, 0.4, 0.6, 0.8, 1}));
  EXPECT_EQ(NiceTicks(-12, 31), (std::vector<double>{-20, -10, 0, 10, 20, 30, 40}));
  EXPECT_EQ(NiceTicks(3, 97, 5, /*extend=*/false), (std::vector<double>{20, 40, 60, 80}));
  EXPECT_EQ(NiceTicks(5, 5), (std::vector<double>{4.4, 4.6, 4.8, 5, 5.2, 5.4, 5.6}));
  EXPECT_EQ(NiceTicks(0, 0), (std::vector<double>{0, 0.2, 0.4, 0.6, 0.8, 1}));
}

TEST(FormatTick, RoundLabels) {
  EXPECT_EQ(FormatTick(600, 200, TickFormat::kNumber), "600");
  EXPECT_EQ(FormatTick(0.6000000000000001, 0.2, TickFormat::kNumber), "0.6");
  EXPECT_EQ(FormatTick(0.25, 0.05, TickFormat::kNumber), "0.25");
  EXPECT_EQ(FormatTick(40000, 20000, TickFormat::kNumber), "40k");
  EXPECT_EQ(FormatTick(25e6, 5e7, TickFormat::kNumber), "25M");
  EXPECT_EQ(FormatTick(0.6000000000000001, 0.2, TickFormat::kFraction), "60%");
  EXPECT_EQ(FormatTick(0.125, 0.025, TickFormat::kFraction), "12.5%");
  EXPECT_EQ(FormatTick(30, 10, TickFormat::kPercent), "30%");
  EXPECT_EQ(FormatTick(-1e-17, 0.1, TickFormat::kNumber), "0.0");
}

TEST(Cdf, SortedStepsWithTiesMerged) {
  const std::vector<Point> cdf = Cdf({3, 1, 2, NAN, 2});
  EXPECT_EQ(cdf, (std::vector<Point>{{1, 0}, {1, 0.25}, {2, 0.75}, {3, 1}}));
  EXPECT_TRUE(Cdf({}).empty());
  const std::vector<Point> one = Cdf({7});
  EXPECT_EQ(one, (std::vector<Point>{{7, 0}, {7, 1}}));
}

TEST(Cdf, SeriesWithRangesKeepsEachValuesWhisker) {
  const LineSeries s = CdfSeries("cells", {0.9, 0.7, 0.8}, {{0.85, 0.95}, {0.6, 0.75}, {0.8, 0.8}});
  EXPECT_TRUE(s.step);
  EXPECT_TRUE(s.markers);
  ASSERT_EQ(s.points.size(), 3u);
  EXPECT_EQ(s.points[0], (Point{0.7, 1.0 / 3}));
  EXPECT_EQ(s.x_ranges[0], (Range{0.6, 0.75}));
  EXPECT_EQ(s.points[2], (Point{0.9, 1.0}));
  EXPECT_EQ(s.x_ranges[2], (Range{0.85, 0.95}));
}

LineChart SampleLine() {
  LineChart c;
  c.title = "Compaction: cell size after compaction <A & B>";
  c.x = {.label = "Compacted size (% of original)", .format = TickFormat::kFraction};
  c.y = {.label = "Fraction of cells", .min = 0, .max = 1, .format = TickFormat::kFraction};
  c.series.push_back(CdfSeries("herd \"hybrid\"", {0.82, 0.74, 0.91, 0.68, 0.88, 0.79, 0.85},
                               {{0.8, 0.84}, {0.71, 0.76}, {0.9, 0.93}, {0.66, 0.7}, {0.86, 0.9}, {0.78, 0.8},
                                {0.83, 0.87}}));
  c.series.push_back(CdfSeries("best fit", {0.7, 0.65, 0.8, 0.75, 0.72, 0.69, 0.9}));
  c.references.push_back({ReferenceLine::Along::kX, 0.8, "Borg median"});
  c.references.push_back({ReferenceLine::Along::kY, 0.5, "median"});
  return c;
}

BarChart SampleBars() {
  BarChart b;
  b.title = "Segregating prod and non-prod";
  b.x_label = "Cell";
  b.y = {.label = "Extra machines", .format = TickFormat::kPercent};
  b.categories = {"A", "B", "C", "D", "E"};
  b.series.push_back({"prod", {22, 31, 18, 27, 24}, {{20, 25}, {29, 35}, {15, 19}, {26, 30}, {24, 24}}});
  b.series.push_back({"non-prod", {12, 9, NAN, 14, 11}, {}});
  b.value_labels = true;
  b.references.push_back({ReferenceLine::Along::kY, 25, "paper: 20-30%"});
  return b;
}

// Fig. 7-like: extra machines against the number of sub-cells, one line per
// cell with min..max whiskers over seeds; more series than the palette.
LineChart SampleCurves() {
  LineChart c;
  c.title = "Subdividing cells";
  c.x = {.label = "Number of sub-cells"};
  c.y = {.label = "Extra machines", .format = TickFormat::kPercent, .include_zero = true};
  for (int cell = 0; cell < 10; ++cell) {
    LineSeries s{.name = "cell " + std::string(1, static_cast<char>('A' + cell)), .markers = true};
    for (int parts : {1, 2, 5, 10}) {
      const double v = (parts - 1) * (3.0 + cell * 0.7);
      s.points.emplace_back(parts, v);
      s.y_ranges.emplace_back(v * 0.9, v * 1.1);
    }
    c.series.push_back(std::move(s));
  }
  return c;
}

// Fig. 6-like: many long category names and a negative value.
BarChart SampleSlanted() {
  BarChart b;
  b.title = "Segregating users: extra machines by cell";
  b.y = {.label = "Extra machines", .format = TickFormat::kFraction};
  for (int i = 0; i < 12; ++i) b.categories.push_back("cell-" + std::to_string(1000 + i * 731));
  BarSeries s{.name = "10 TiB threshold"};
  for (int i = 0; i < 12; ++i) s.values.push_back(i == 3 ? -0.05 : 0.2 + 0.1 * (i % 5));
  b.series.push_back(std::move(s));
  b.value_labels = true;
  return b;
}

TEST(LineChart, WellFormedWithSeriesLabelsAndReferences) {
  const std::string svg = SampleLine().Render();
  EXPECT_EQ(XmlProblem(svg), "") << svg;
  EXPECT_TRUE(absl::StartsWith(svg, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"720\" height=\"420\""));
  EXPECT_TRUE(absl::StrContains(svg, ">Compaction: cell size after compaction &lt;A &amp; B&gt;</text>"));
  EXPECT_TRUE(absl::StrContains(svg, ">herd &quot;hybrid&quot;</text>"));
  EXPECT_TRUE(absl::StrContains(svg, ">best fit</text>"));
  EXPECT_TRUE(absl::StrContains(svg, ">Compacted size (% of original)</text>"));
  EXPECT_TRUE(absl::StrContains(svg, ">Fraction of cells</text>"));
  EXPECT_TRUE(absl::StrContains(svg, ">Borg median</text>"));
  EXPECT_TRUE(absl::StrContains(svg, ">100%</text>"));
  EXPECT_TRUE(absl::StrContains(svg, ">0%</text>"));
  EXPECT_EQ(Count(svg, "<path "), 2u);                            // one line per series
  EXPECT_EQ(Count(svg, "<circle "), 7u + 1u);                     // markers + legend dot
  EXPECT_EQ(Count(svg, "stroke-dasharray=\"5 4\""), 2u);          // reference lines
  EXPECT_TRUE(absl::StrContains(svg, "stroke=\"#0072B2\""));      // palette
  EXPECT_TRUE(absl::StrContains(svg, "stroke=\"#E69F00\""));
}

TEST(LineChart, StraightAndStepSegmentsAndBreaks) {
  LineChart c;
  c.x.min = 0;
  c.x.max = 10;
  c.y.min = 0;
  c.y.max = 10;
  c.series.push_back({.name = "s", .points = {{0, 0}, {5, 5}, {NAN, NAN}, {6, 6}, {10, 10}}});
  c.series.push_back({.name = "t", .points = {{0, 0}, {5, 5}}, .step = true});
  const std::string svg = c.Render();
  EXPECT_EQ(XmlProblem(svg), "");
  EXPECT_EQ(Count(svg, " M"), 1u);  // the break starts a second subpath in the first series
  EXPECT_EQ(Count(svg, "d=\"M"), 2u);
  EXPECT_TRUE(absl::StrContains(svg, " H"));
  EXPECT_TRUE(absl::StrContains(svg, " V"));
  EXPECT_TRUE(absl::StrContains(svg, ">10</text>"));
  EXPECT_FALSE(absl::StrContains(svg, ">12</text>"));
}

TEST(LineChart, EmptyChartStillRenders) {
  LineChart c;
  EXPECT_EQ(XmlProblem(c.Render()), "");
  BarChart b;
  EXPECT_EQ(XmlProblem(b.Render()), "");
}

TEST(BarChart, WellFormedWithBarsWhiskersAndValueLabels) {
  const std::string svg = SampleBars().Render();
  EXPECT_EQ(XmlProblem(svg), "") << svg;
  for (const char* c : {">A</text>", ">E</text>", ">prod</text>", ">non-prod</text>", ">Extra machines</text>",
                        ">Cell</text>", ">paper: 20-30%</text>", ">31%</text>", ">14%</text>"}) {
    EXPECT_TRUE(absl::StrContains(svg, c)) << c;
  }
  // Background + 2 legend boxes + 5 prod bars + 4 non-prod bars (one NaN).
  EXPECT_EQ(Count(svg, "<rect "), 1u + 2u + 5u + 4u);
  // Five whiskers of three lines each, in the whisker colour.
  EXPECT_EQ(Count(svg, "stroke=\"#222222\""), 15u);
}

TEST(BarChart, LongCategoriesAreSlanted) {
  BarChart b;
  b.categories = {"a very long cell name", "another long cell name", "c", "d", "e", "f", "g", "h"};
  b.series.push_back({"", {1, 2, 3, 4, 5, 6, 7, 8}, {}});
  const std::string svg = b.Render();
  EXPECT_EQ(XmlProblem(svg), "");
  EXPECT_TRUE(absl::StrContains(svg, "rotate(-35 "));
}

TEST(Charts, Deterministic) {
  EXPECT_EQ(SampleLine().Render(), SampleLine().Render());
  EXPECT_EQ(SampleBars().Render(), SampleBars().Render());
}

// Set HERD_REPORT_SAMPLES=dir to write the sample charts for a look.
TEST(Charts, WriteSvgAndSamples) {
  const char* dir = std::getenv("HERD_REPORT_SAMPLES");
  const std::filesystem::path out = dir ? dir : std::filesystem::path(testing::TempDir()) / "herd_report_svg";
  ASSERT_TRUE(WriteSvg((out / "line.svg").string(), SampleLine().Render()).ok());
  ASSERT_TRUE(WriteSvg((out / "bars.svg").string(), SampleBars().Render()).ok());
  ASSERT_TRUE(WriteSvg((out / "curves.svg").string(), SampleCurves().Render()).ok());
  ASSERT_TRUE(WriteSvg((out / "slanted.svg").string(), SampleSlanted().Render()).ok());
  EXPECT_TRUE(std::filesystem::exists(out / "line.svg"));
  EXPECT_EQ(XmlProblem(SampleCurves().Render()), "");
  EXPECT_EQ(XmlProblem(SampleSlanted().Render()), "");
}

}  // namespace
}  // namespace herd::sim::report
