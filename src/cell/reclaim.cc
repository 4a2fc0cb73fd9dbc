#include "cell/reclaim.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "base/units.h"

namespace herd::cell {
namespace {

// Geometric bucket edges: kBuckets - 1 of them from limit/1024 to the limit.
constexpr double kSpan = 1024.0;
const double kRatio = std::pow(kSpan, 1.0 / (Estimate::kBuckets - 2));
// Renormalise the histogram's weights before they overflow a float.
constexpr float kMaxScale = 1e6f;

}  // namespace

absl::StatusOr<EstimatorOptions> EstimatorPreset(absl::string_view name) {
  EstimatorOptions o;
  if (name == "baseline") {
    o.margin = 0.5;
    o.half_life_ms = 60 * 60'000;
    o.percentile = 0.99;
  } else if (name == "medium") {
    o.margin = 0.25;
    o.half_life_ms = 15 * 60'000;
    o.percentile = 0.95;
  } else if (name == "aggressive") {
    o.margin = 0.1;
    o.half_life_ms = 3 * 60'000;
    o.percentile = 0.9;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown reclamation preset '", name, "' (off, baseline, medium or aggressive)"));
  }
  return o;
}

std::string DescribeEstimator(const EstimatorOptions& o) {
  std::string s = o.kind == EstimatorOptions::Kind::kBorg ? "borg" : "histogram";
  absl::StrAppend(&s, ": margin ", std::lround(o.margin * 100), "%, half-life ", FormatDurationMs(o.half_life_ms),
                  ", startup ", FormatDurationMs(o.startup_ms));
  if (o.kind == EstimatorOptions::Kind::kHistogram) absl::StrAppend(&s, ", p", std::lround(o.percentile * 100));
  return s;
}

Estimate::Estimate(double limit, double current, int64_t start_ms)
    : limit_(std::max(0.0, limit)), value_(std::clamp(current, 0.0, std::max(0.0, limit))), start_ms_(start_ms),
      last_ms_(start_ms), t0_ms_(start_ms) {}

int Estimate::BucketOf(double v) const {
  if (limit_ <= 0 || v <= 0) return 0;
  if (v > limit_) return kBuckets - 1;
  double x = std::log(v / limit_) / std::log(kRatio) + (kBuckets - 2);
  return std::clamp(static_cast<int>(std::ceil(x - 1e-9)), 0, kBuckets - 2);
}

double Estimate::UpperEdge(int b) const {
  if (b >= kBuckets - 2) return limit_;
  return limit_ * std::pow(kRatio, b - (kBuckets - 2));
}

void Estimate::Observe(double used, int64_t now_ms, const EstimatorOptions& o) {
  used = std::max(0.0, used);
  const double target = std::min(limit_, used * (1 + o.margin));
  const int64_t settled_ms = start_ms_ + o.startup_ms;
  if (o.kind == EstimatorOptions::Kind::kBorg) {
    if (now_ms >= settled_ms) {
      if (target >= value_) {
        value_ = target;  // up at once
      } else {
        // Down toward the target, halving the gap every half-life since the
        // last sample (or since the startup ended).
        const double dt = static_cast<double>(now_ms - std::max(last_ms_, settled_ms));
        const double keep = o.half_life_ms > 0 ? std::exp2(-dt / static_cast<double>(o.half_life_ms)) : 0.0;
        value_ = target + (value_ - target) * keep;
      }
    }
  } else {
    // Later samples weigh more: 2^(age difference / half-life).
    float scale = o.half_life_ms > 0
                      ? static_cast<float>(std::exp2(static_cast<double>(now_ms - t0_ms_) / o.half_life_ms))
                      : 1.0f;
    if (scale > kMaxScale || !std::isfinite(scale)) {
      for (float& w : weights_) w /= scale;
      t0_ms_ = now_ms;
      scale = 1.0f;
    }
    scale_ = scale;
    weights_[BucketOf(used)] += scale;
    if (now_ms >= settled_ms && target > value_) value_ = target;
  }
  last_used_ = used;
  last_ms_ = std::max(last_ms_, now_ms);
}

double Estimate::Value(int64_t now_ms, const EstimatorOptions& o) const {
  if (now_ms < start_ms_ + o.startup_ms) return limit_;
  if (o.kind == EstimatorOptions::Kind::kBorg || last_used_ < 0) return value_;
  // The percentile of the histogram's *area* (weight x bucket width), as
  // seed 004 reads it: samples in the wide upper buckets count for more.
  auto area = [&](int b) {
    const double lower = b == 0 ? 0.0 : UpperEdge(b - 1);
    return static_cast<double>(weights_[b]) * std::max(1e-9, UpperEdge(b) - lower);
  };
  double total = 0;
  for (int b = 0; b < kBuckets; ++b) total += area(b);
  if (total <= 0) return value_;
  const double want = o.percentile * total;
  double seen = 0;
  int b = 0;
  for (; b < kBuckets - 1; ++b) {
    seen += area(b);
    if (seen >= want) break;
  }
  double est = std::min(limit_, UpperEdge(b) * (1 + o.margin));
  // Never below what the last sample needs: a rise counts at once.
  return std::max(est, std::min(limit_, last_used_ * (1 + o.margin)));
}

}  // namespace herd::cell
