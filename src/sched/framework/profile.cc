#include "sched/framework/profile.h"

#include <set>

#include "absl/strings/str_cat.h"
#include "base/check.h"
#include "sched/framework/registry.h"

namespace herd::sched {

absl::StatusOr<PackingPolicy> ParsePackingPolicy(absl::string_view name) {
  if (name == "best" || name == "best-fit") return PackingPolicy::kBestFit;
  if (name == "worst" || name == "worst-fit" || name == "epvm" || name == "e-pvm") return PackingPolicy::kWorstFit;
  if (name == "hybrid") return PackingPolicy::kHybrid;
  if (name == "pack") return PackingPolicy::kPack;
  if (name == "k8s" || name == "kubernetes") return PackingPolicy::kK8s;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown packing policy '", name, "' (worst, best, hybrid, pack, k8s)"));
}

absl::string_view PackingPolicyName(PackingPolicy p) {
  switch (p) {
    case PackingPolicy::kWorstFit:
      return "worst-fit";
    case PackingPolicy::kBestFit:
      return "best-fit";
    case PackingPolicy::kHybrid:
      return "hybrid";
    case PackingPolicy::kPack:
      return "pack";
    case PackingPolicy::kK8s:
      return "k8s";
  }
  return "?";
}

absl::StatusOr<QueueOrder> ParseQueueOrder(absl::string_view name) {
  if (name == "round-robin" || name == "rr") return QueueOrder::kRoundRobin;
  if (name == "drf") return QueueOrder::kDrf;
  return absl::InvalidArgumentError(absl::StrCat("unknown queue order '", name, "' (round-robin, drf)"));
}

absl::StatusOr<TaskOrder> ParseTaskOrder(absl::string_view name) {
  if (name == "fifo" || name == "submission") return TaskOrder::kSubmission;
  if (name == "largest" || name == "hardest") return TaskOrder::kLargest;
  return absl::InvalidArgumentError(absl::StrCat("unknown task order '", name, "' (fifo, largest)"));
}

absl::string_view TaskOrderName(TaskOrder o) { return o == TaskOrder::kLargest ? "largest" : "fifo"; }

absl::string_view ReasonText(ReasonCode code) {
  switch (code) {
    case ReasonCode::kOk:
      return "fits";
    case ReasonCode::kMachineDown:
      return "machine down";
    case ReasonCode::kCrashedHere:
      return "task crashed there recently";
    case ReasonCode::kConstraint:
      return "constraint";
    case ReasonCode::kDifferentMachines:
      return "a task of the job already there";
    case ReasonCode::kDomainLimit:
      return "job's limit per failure domain reached";
    case ReasonCode::kInterference:
      return "machine marked for interference with latency-sensitive work";
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

double Profile::Weight(absl::string_view name) const {
  for (const WeightedScore& s : scores) {
    if (s.name == name) return s.weight;
  }
  return 0;
}

absl::StatusOr<Profile> BuildProfile(const Options& o) {
  const Registry& r = o.registry != nullptr ? *o.registry : Registry::BuiltIn();
  Profile p;
  if (o.filters.empty()) {
    for (const FilterEntry& f : r.filters()) p.filters.push_back(f.make(o));
  } else {
    std::set<absl::string_view> named;
    for (const std::string& name : o.filters) {
      const FilterEntry* f = r.FindFilter(name);
      if (f == nullptr) {
        return absl::InvalidArgumentError(
            absl::StrCat("unknown filter plugin '", name, "' (registered: ", r.FilterNames(), ")"));
      }
      if (!named.insert(f->name).second) {
        return absl::InvalidArgumentError(absl::StrCat("filter plugin '", name, "' is named twice"));
      }
      p.filters.push_back(f->make(o));
    }
    for (const FilterEntry& f : r.filters()) {
      if (f.required && !named.contains(f.name)) {
        return absl::InvalidArgumentError(absl::StrCat("the profile leaves out the filter plugin '", f.name,
                                                       "', which every profile runs (", f.help, ")"));
      }
    }
  }
  for (const auto& [name, w] : o.weights.all()) {
    if (r.FindScore(name) == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown score plugin '", name, "' (registered: ", r.ScoreNames(), ")"));
    }
    if (!(w >= 0) || w > 1e6) {
      return absl::InvalidArgumentError(absl::StrCat("the weight of score plugin '", name, "' is ", w,
                                                     "; it must be between 0 (off) and 1e6"));
    }
  }
  for (const ScoreEntry& s : r.scores()) {
    const double w = o.weights.Find(s.name).value_or(s.default_weight(o));
    if (w <= 0) continue;
    std::unique_ptr<ScorePlugin> plugin = s.make(o);
    p.total_weight += w;
    p.scores_depend_on_job |= plugin->DependsOnJobPlacements();
    p.scores.push_back({s.name, std::move(plugin), w});
  }
  return p;
}

Profile MustBuildProfile(const Options& o) {
  absl::StatusOr<Profile> p = BuildProfile(o);
  HERD_CHECK_MSG(p.ok(), absl::StrCat("scheduler profile '", o.profile, "': ", p.status().message()));
  return std::move(*p);
}

}  // namespace herd::sched
