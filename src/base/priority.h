// Priority bands (the Google 2019 trace's ranges, docs/design.md §1).
#pragma once

#include <cstdint>
#include <optional>
#include "absl/strings/string_view.h"

namespace herd {

enum class Band { kFree, kBatch, kMid, kProduction, kMonitoring };

inline constexpr int32_t kMaxPriority = 450;

struct BandInfo {
  Band band;
  absl::string_view name;
  int32_t lo, hi;  // inclusive
};
inline constexpr BandInfo kBands[] = {
    {Band::kFree, "free", 0, 99},
    {Band::kBatch, "batch", 100, 115},
    {Band::kMid, "mid", 116, 119},
    {Band::kProduction, "production", 120, 359},
    {Band::kMonitoring, "monitoring", 360, kMaxPriority},
};

constexpr Band BandOf(int32_t priority) {
  for (const BandInfo& b : kBands) {
    if (priority >= b.lo && priority <= b.hi) return b.band;
  }
  return priority < 0 ? Band::kFree : Band::kMonitoring;
}
constexpr absl::string_view BandName(Band b) { return kBands[static_cast<int>(b)].name; }
constexpr absl::string_view BandNameOf(int32_t priority) { return BandName(BandOf(priority)); }
// The priority a spec gets when it names a band: free 0, batch 100, mid 116,
// production 200 (room above and below), monitoring 360.
constexpr int32_t BandDefaultPriority(Band b) {
  return b == Band::kProduction ? 200 : kBands[static_cast<int>(b)].lo;
}

// "production" -> Band::kProduction; also "prod", "best-effort"/"besteffort" -> batch.
std::optional<Band> ParseBand(absl::string_view name);

// "prod" = the production and monitoring bands (Borg paper §2.5).
constexpr bool IsProd(int32_t priority) { return priority >= 120; }

// Borg forbids production-band tasks to preempt one another (no cascades).
constexpr bool MayPreempt(int32_t preemptor, int32_t victim) {
  if (victim >= preemptor) return false;
  if (BandOf(preemptor) == Band::kProduction && BandOf(victim) == Band::kProduction) return false;
  return true;
}

}  // namespace herd
