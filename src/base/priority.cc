#include "base/priority.h"

namespace herd {

std::optional<Band> ParseBand(absl::string_view name) {
  for (const BandInfo& b : kBands) {
    if (name == b.name) return b.band;
  }
  if (name == "prod") return Band::kProduction;
  if (name == "best-effort" || name == "besteffort" || name == "best_effort") return Band::kBatch;
  return std::nullopt;
}

}  // namespace herd
