#include "cell/reclaim.h"

#include <gtest/gtest.h>

namespace herd::cell {
namespace {

constexpr int64_t kMin = 60'000;

EstimatorOptions Borg() {
  EstimatorOptions o;
  o.kind = EstimatorOptions::Kind::kBorg;
  o.margin = 0.25;
  o.half_life_ms = 10 * kMin;
  o.startup_ms = 5 * kMin;
  return o;
}

EstimatorOptions Histogram() {
  EstimatorOptions o = Borg();
  o.kind = EstimatorOptions::Kind::kHistogram;
  o.percentile = 0.9;
  return o;
}

// Feeds `used` every 10 s from `from` to `to` (ms).
void Feed(Estimate& e, double used, int64_t from, int64_t to, const EstimatorOptions& o) {
  for (int64_t t = from; t <= to; t += 10'000) e.Observe(used, t, o);
}

TEST(Reclaim, StartsAtTheLimitAndHoldsItThroughStartup) {
  for (const EstimatorOptions& o : {Borg(), Histogram()}) {
    Estimate e(1000, 1000, 0);
    Feed(e, 100, 0, 4 * kMin, o);
    EXPECT_EQ(e.Value(4 * kMin, o), 1000) << static_cast<int>(o.kind);
  }
}

TEST(Reclaim, BorgDecaysTowardUsagePlusMarginByHalfLives) {
  const EstimatorOptions o = Borg();
  Estimate e(1000, 1000, 0);
  Feed(e, 200, 0, 5 * kMin, o);
  // One half-life after startup: the gap to 250 (200 + 25%) halves.
  Feed(e, 200, 5 * kMin + 10'000, 15 * kMin, o);
  EXPECT_NEAR(e.Value(15 * kMin, o), 250 + 750 / 2.0, 5);
  Feed(e, 200, 15 * kMin + 10'000, 105 * kMin, o);
  EXPECT_NEAR(e.Value(105 * kMin, o), 250, 2);
}

TEST(Reclaim, ARiseCountsAtOnceAFallSlowly) {
  for (const EstimatorOptions& o : {Borg(), Histogram()}) {
    SCOPED_TRACE(static_cast<int>(o.kind));
    Estimate e(1000, 1000, 0);
    Feed(e, 100, 0, 120 * kMin, o);
    const double low = e.Value(120 * kMin, o);
    EXPECT_LT(low, 200);
    // A burst: the very first sample raises it to the burst + margin.
    e.Observe(600, 120 * kMin + 10'000, o);
    EXPECT_GE(e.Value(120 * kMin + 10'000, o), 750 - 1);
    Feed(e, 600, 120 * kMin + 20'000, 121 * kMin, o);
    // Back to 100: a minute later it is still well above the old level.
    Feed(e, 100, 121 * kMin + 10'000, 122 * kMin, o);
    EXPECT_GT(e.Value(122 * kMin, o), 2 * low);
    // Hours later it is down again.
    Feed(e, 100, 122 * kMin + 10'000, 300 * kMin, o);
    EXPECT_LT(e.Value(300 * kMin, o), 1.6 * low);
  }
}

TEST(Reclaim, NeverAboveTheLimitNorBelowZero) {
  for (const EstimatorOptions& o : {Borg(), Histogram()}) {
    Estimate e(500, 500, 0);
    Feed(e, 5000, 0, 30 * kMin, o);
    EXPECT_EQ(e.Value(30 * kMin, o), 500);
    Feed(e, 0, 30 * kMin, 600 * kMin, o);
    EXPECT_GE(e.Value(600 * kMin, o), 0);
    EXPECT_LT(e.Value(600 * kMin, o), 50);
  }
}

TEST(Reclaim, AMasterThatTakesOverStartsFromTheCellsReservation) {
  const EstimatorOptions o = Borg();
  // Started long ago, the cell says 300: the new estimator begins there.
  Estimate e(1000, 300, 0);
  e.Observe(200, 60 * kMin, o);
  EXPECT_NEAR(e.Value(60 * kMin, o), 300, 60);  // decays from 300, not from 1000
}

TEST(Reclaim, HistogramWeighsRareHighSamplesByTheirBucketsWidth) {
  const EstimatorOptions o = Histogram();
  // Steady at 100: it settles near 100 + margin (one bucket's width above).
  Estimate steady(1000, 1000, 0);
  Feed(steady, 100, 0, 120 * kMin, o);
  EXPECT_LT(steady.Value(120 * kMin, o), 200);
  // 1 sample in 20 at 800: by count under the 90th percentile, by area
  // (the wide upper bucket) above it: the estimate covers the bursts.
  Estimate bursty(1000, 1000, 0);
  for (int64_t t = 0; t <= 120 * kMin; t += 10'000) bursty.Observe((t / 10'000) % 20 == 0 ? 800 : 100, t, o);
  bursty.Observe(100, 120 * kMin + 10'000, o);
  EXPECT_GE(bursty.Value(120 * kMin + 10'000, o), 800);
}

TEST(Reclaim, Presets) {
  for (const char* name : {"baseline", "medium", "aggressive"}) EXPECT_TRUE(EstimatorPreset(name).ok()) << name;
  EXPECT_FALSE(EstimatorPreset("greedy").ok());
  EXPECT_GT(EstimatorPreset("baseline")->margin, EstimatorPreset("aggressive")->margin);
  EXPECT_GT(EstimatorPreset("baseline")->half_life_ms, EstimatorPreset("aggressive")->half_life_ms);
}

}  // namespace
}  // namespace herd::cell
