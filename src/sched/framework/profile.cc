#include "sched/framework/profile.h"

#include "absl/strings/str_cat.h"
#include "sched/plugins/filter/filters.h"
#include "sched/plugins/score/scores.h"

namespace herd::sched {

absl::StatusOr<PackingPolicy> ParsePackingPolicy(absl::string_view name) {
  if (name == "best" || name == "best-fit") return PackingPolicy::kBestFit;
  if (name == "worst" || name == "worst-fit" || name == "epvm") return PackingPolicy::kWorstFit;
  return absl::InvalidArgumentError(absl::StrCat("unknown packing policy '", name, "' (best, worst)"));
}

Profile DefaultProfile(PackingPolicy policy) {
  Profile p;
  p.filters.push_back(std::make_unique<MachineUpFilter>());
  p.filters.push_back(std::make_unique<ConstraintFilter>());
  p.filters.push_back(std::make_unique<ResourceFilter>());
  if (policy == PackingPolicy::kWorstFit) {
    p.scores.push_back({std::make_unique<WorstFitScore>(), 1.0});
  } else {
    p.scores.push_back({std::make_unique<BestFitScore>(), 1.0});
  }
  return p;
}

absl::string_view ReasonText(ReasonCode code) {
  switch (code) {
    case ReasonCode::kOk:
      return "fits";
    case ReasonCode::kMachineDown:
      return "machine down";
    case ReasonCode::kConstraint:
      return "constraint";
    case ReasonCode::kInsufficientCpu:
      return "insufficient cpu";
    case ReasonCode::kInsufficientMemory:
      return "insufficient memory";
    case ReasonCode::kInsufficientDisk:
      return "insufficient disk";
    case ReasonCode::kInsufficientPorts:
      return "insufficient ports";
    case ReasonCode::kInsufficientExtended:
      return "insufficient";
    case ReasonCode::kCount:
      break;
  }
  return "?";
}

}  // namespace herd::sched
