#include "metrics/registry.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"

namespace herd::metrics {
namespace {

// The exposition's lines that start with `prefix` (no comments).
std::vector<std::string> Lines(const std::string& text, const std::string& prefix) {
  std::vector<std::string> out;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (absl::StartsWith(line, prefix)) out.emplace_back(line);
  }
  return out;
}

TEST(Registry, CountersAndGaugesWithHelpAndType) {
  Registry r;
  Counter c = r.GetCounter("herd_task_starts_total", "Task attempts started");
  c.Inc();
  c.Inc(2);
  c.Inc(-5);  // counters never go down
  Gauge g = r.GetGauge("herd_machines", "Machines by state", {{"state", "up"}});
  g.Set(3);
  g.Add(-1);
  EXPECT_EQ(c.Value(), 3);
  EXPECT_EQ(g.Value(), 2);
  const std::string text = r.Text();
  EXPECT_TRUE(absl::StrContains(text, "# HELP herd_task_starts_total Task attempts started\n")) << text;
  EXPECT_TRUE(absl::StrContains(text, "# TYPE herd_task_starts_total counter\n")) << text;
  EXPECT_TRUE(absl::StrContains(text, "\nherd_task_starts_total 3\n")) << text;
  EXPECT_TRUE(absl::StrContains(text, "# TYPE herd_machines gauge\n")) << text;
  EXPECT_TRUE(absl::StrContains(text, "\nherd_machines{state=\"up\"} 2\n")) << text;
}

TEST(Registry, SameNameAndLabelsIsTheSameSeries) {
  Registry r;
  r.GetCounter("herd_x_total", "x", {{"a", "1"}}).Inc();
  r.GetCounter("herd_x_total", "x", {{"a", "1"}}).Inc();
  r.GetCounter("herd_x_total", "x", {{"a", "2"}}).Inc();
  EXPECT_EQ(r.GetCounter("herd_x_total", "x", {{"a", "1"}}).Value(), 2);
  EXPECT_EQ(Lines(r.Text(), "herd_x_total{").size(), 2u);
}

TEST(Registry, EscapesLabelValues) {
  Registry r;
  r.GetGauge("herd_task_memory_bytes", "m", {{"job", "alice/we\"b\\x\ny"}, {"task", "0"}}).Set(1);
  const std::string text = r.Text();
  // Backslash, double quote and newline are escaped as \\, \" and \n.
  EXPECT_TRUE(absl::StrContains(text, R"(herd_task_memory_bytes{job="alice/we\"b\\x\ny",task="0"} 1)")) << text;
}

TEST(Registry, HistogramBucketsAreCumulativeWithInfSumAndCount) {
  Registry r;
  Histogram h = r.GetHistogram("herd_scheduler_pass_duration_seconds", "Pass latency", {0.1, 1, 10});
  for (double v : {0.05, 0.5, 0.5, 5.0, 50.0}) h.Observe(v);
  const std::string text = r.Text();
  EXPECT_TRUE(absl::StrContains(text, "# TYPE herd_scheduler_pass_duration_seconds histogram\n")) << text;
  const std::vector<std::string> want = {
      R"(herd_scheduler_pass_duration_seconds_bucket{le="0.1"} 1)",
      R"(herd_scheduler_pass_duration_seconds_bucket{le="1"} 3)",
      R"(herd_scheduler_pass_duration_seconds_bucket{le="10"} 4)",
      R"(herd_scheduler_pass_duration_seconds_bucket{le="+Inf"} 5)",
  };
  EXPECT_EQ(Lines(text, "herd_scheduler_pass_duration_seconds_bucket"), want) << text;
  EXPECT_EQ(Lines(text, "herd_scheduler_pass_duration_seconds_count"),
            std::vector<std::string>{"herd_scheduler_pass_duration_seconds_count 5"});
  EXPECT_EQ(Lines(text, "herd_scheduler_pass_duration_seconds_sum"),
            std::vector<std::string>{"herd_scheduler_pass_duration_seconds_sum 56.05"});
}

TEST(Registry, HistogramWithLabels) {
  Registry r;
  r.GetHistogram("herd_poll_duration_seconds", "p", {1}, {{"shard", "0"}}).Observe(2);
  const std::string text = r.Text();
  EXPECT_TRUE(absl::StrContains(text, R"(herd_poll_duration_seconds_bucket{shard="0",le="1"} 0)")) << text;
  EXPECT_TRUE(absl::StrContains(text, R"(herd_poll_duration_seconds_bucket{shard="0",le="+Inf"} 1)")) << text;
  EXPECT_TRUE(absl::StrContains(text, R"(herd_poll_duration_seconds_count{shard="0"} 1)")) << text;
}

TEST(Registry, SeriesPerFamilyAreBounded) {
  Registry r(/*max_series=*/3);
  for (int i = 0; i < 10; ++i) r.GetGauge("herd_task_cpu_cores", "c", {{"task", std::to_string(i)}}).Set(i);
  const std::string text = r.Text();
  EXPECT_EQ(Lines(text, "herd_task_cpu_cores{").size(), 3u) << text;
  EXPECT_TRUE(absl::StrContains(text, R"(herd_metrics_series_dropped_total{family="herd_task_cpu_cores"} 7)")) << text;
  // A dropped series' handle does nothing; an existing one still works.
  Gauge over = r.GetGauge("herd_task_cpu_cores", "c", {{"task", "9"}});
  over.Set(5);
  EXPECT_EQ(over.Value(), 0);
  EXPECT_EQ(r.GetGauge("herd_task_cpu_cores", "c", {{"task", "1"}}).Value(), 1);
}

TEST(Registry, RetainGaugesDropsSeriesAndMakesRoom) {
  Registry r(/*max_series=*/2);
  r.GetGauge("herd_task_memory_bytes", "m", {{"task", "a"}}).Set(1);
  r.GetGauge("herd_task_memory_bytes", "m", {{"task", "b"}}).Set(2);
  r.RetainGauges("herd_task_memory_bytes", [](const Labels& l) { return l.at("task") != "a"; });
  r.GetGauge("herd_task_memory_bytes", "m", {{"task", "c"}}).Set(3);
  const std::string text = r.Text();
  EXPECT_FALSE(absl::StrContains(text, R"(task="a")")) << text;
  EXPECT_TRUE(absl::StrContains(text, R"(herd_task_memory_bytes{task="b"} 2)")) << text;
  EXPECT_TRUE(absl::StrContains(text, R"(herd_task_memory_bytes{task="c"} 3)")) << text;
}

TEST(Registry, OnCollectRunsBeforeEachExposition) {
  Registry r;
  int calls = 0;
  r.OnCollect([&] { r.GetGauge("herd_machines", "m", {{"state", "up"}}).Set(++calls); });
  EXPECT_TRUE(absl::StrContains(r.Text(), "herd_machines{state=\"up\"} 1"));
  EXPECT_TRUE(absl::StrContains(r.Text(), "herd_machines{state=\"up\"} 2"));
}

TEST(Registry, DefaultHandlesDoNothing) {
  Counter c;
  Gauge g;
  Histogram h;
  c.Inc();
  g.Set(1);
  h.Observe(1);
  EXPECT_EQ(c.Value(), 0);
  EXPECT_EQ(g.Value(), 0);
}

TEST(Registry, ConcurrentUpdatesAllCount) {
  Registry r;
  Counter c = r.GetCounter("herd_c_total", "c");
  Histogram h = r.GetHistogram("herd_h_seconds", "h", LatencyBuckets());
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 10000; ++i) {
        c.Inc();
        h.Observe(0.001);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(c.Value(), 40000);
  EXPECT_TRUE(absl::StrContains(r.Text(), "herd_h_seconds_count 40000"));
}

TEST(Buckets, Exponential) {
  EXPECT_EQ(ExponentialBuckets(1, 2, 4), (std::vector<double>{1, 2, 4, 8}));
  EXPECT_EQ(LatencyBuckets().size(), 16u);
}

}  // namespace
}  // namespace herd::metrics
