#include "sched/framework/profile.h"

#include "absl/strings/str_cat.h"
#include "sched/plugins/filter/filters.h"
#include "sched/plugins/score/scores.h"

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

double ReserveWeight(const Options& o) {
  if (o.weights.reserve >= 0) return o.weights.reserve;
  return o.policy == PackingPolicy::kK8s ? 0.0 : 4.0;
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

Profile DefaultProfile(const Options& o) {
  Profile p;
  p.filters.push_back(std::make_unique<MachineUpFilter>());
  p.filters.push_back(std::make_unique<CrashAvoidFilter>());
  p.filters.push_back(std::make_unique<ConstraintFilter>());
  p.filters.push_back(std::make_unique<DomainLimitFilter>());
  p.filters.push_back(std::make_unique<InterferenceFilter>());
  p.filters.push_back(std::make_unique<ResourceFilter>());
  auto add = [&](std::unique_ptr<ScorePlugin> s, double w) {
    if (w <= 0) return;
    p.total_weight += w;
    p.scores_depend_on_job |= s->DependsOnJobPlacements();
    p.scores.push_back({std::move(s), w});
  };
  add(std::make_unique<PackingScore>(o.policy), o.weights.packing);
  add(std::make_unique<SpreadScore>(), o.weights.spread);
  add(std::make_unique<PreemptCostScore>(), o.weights.preempt_cost);
  add(std::make_unique<LocalityScore>(), o.weights.locality);
  add(std::make_unique<PriorityMixScore>(), o.weights.priority_mix);
  add(std::make_unique<SoftConstraintScore>(), o.weights.soft_constraints);
  add(std::make_unique<ReserveScore>(), ReserveWeight(o));
  return p;
}

}  // namespace herd::sched
