// Reservations (Borg §5.5, issue #16): the master's estimate of what a
// task will really use. It starts at the task's limit, and once the task is
// past its startup transient it follows usage plus a safety margin: up at
// once when usage rises above it, down slowly (exponentially, with a
// half-life) when usage falls. Non-production work is scheduled into what
// the others' reservations leave (CellState, Machine::FreeFor).
//
// Two estimators, one interface:
//   - kBorg: the paper's decaying peak. The estimate decays toward the
//     latest usage + margin with half-life `half_life_ms`, and jumps to
//     usage + margin when usage exceeds it.
//   - kHistogram: seed 004's (Tencent TKE) decayed histogram. Samples go
//     into buckets whose widths grow geometrically with the value, each
//     sample weighing twice as much as one a half-life older; the estimate
//     is the `percentile` of the histogram's area (weight x bucket width;
//     the upper edge of the bucket it falls in) plus the margin. A rise
//     lands in the wide upper buckets and soon dominates the area; a fall
//     must fill the narrow low buckets before the percentile moves: fast
//     up, slow down. It also jumps at once when a sample exceeds it.
// Pure: no clock, no I/O (times come in); the simulator runs the same code.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace herd::cell {

struct EstimatorOptions {
  enum class Kind { kBorg, kHistogram };
  Kind kind = Kind::kBorg;
  // Usage is multiplied by 1 + margin.
  double margin = 0.25;
  // How fast the estimate comes down (kBorg) or old samples fade (kHistogram).
  int64_t half_life_ms = 30 * 60'000;
  // A new task's reservation stays at its limit this long (Borg: 300 s).
  int64_t startup_ms = 300'000;
  // kHistogram: the percentile of the decayed histogram.
  double percentile = 0.99;
};

// Borg §5.5's settings (Fig. 12): baseline is cautious, aggressive reclaims
// most; medium between. "off": no reservations are estimated.
absl::StatusOr<EstimatorOptions> EstimatorPreset(absl::string_view name);
std::string DescribeEstimator(const EstimatorOptions& o);

// One dimension's estimate for one task run. Values are in the dimension's
// unit (millicores, bytes), as doubles.
class Estimate {
 public:
  static constexpr int kBuckets = 24;

  // A run that starts (or is adopted) at `start_ms` with `limit`, whose
  // reservation is now `current` (its limit for a new run; what the cell
  // holds after a master takes over).
  Estimate(double limit, double current, int64_t start_ms);

  // A usage sample taken at `now_ms`.
  void Observe(double used, int64_t now_ms, const EstimatorOptions& o);
  // The reservation at `now_ms`: in [0, limit].
  double Value(int64_t now_ms, const EstimatorOptions& o) const;

  double limit() const { return limit_; }

 private:
  // The bucket of a value: geometric edges from 1/1024 of the limit up to
  // the limit (and one for anything above).
  int BucketOf(double v) const;
  double UpperEdge(int b) const;

  double limit_;
  double value_;       // kBorg's estimate (also the last jump, for kHistogram)
  int64_t start_ms_;
  int64_t last_ms_ = 0;  // last sample
  double last_used_ = -1;
  std::array<float, kBuckets> weights_{};  // kHistogram, scaled by 2^(t / half_life) from t0_
  int64_t t0_ms_ = 0;
  float scale_ = 1;  // the weight of a sample taken now
};

}  // namespace herd::cell
