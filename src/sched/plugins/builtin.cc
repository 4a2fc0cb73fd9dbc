// The built-in plugins: the one list of what `herd master` and `herd
// scheduler` can run (framework/registry.h). Filters in the order the
// default profile runs them (static ones first, cheapest first); scores
// with their default weights. A new plugin is one more entry here.
#include "base/check.h"
#include "sched/framework/registry.h"
#include "sched/plugins/filter/filters.h"
#include "sched/plugins/score/scores.h"

namespace herd::sched {
namespace {

template <typename T>
std::function<std::unique_ptr<FilterPlugin>(const Options&)> MakeFilter() {
  return [](const Options&) { return std::make_unique<T>(); };
}

template <typename T>
std::function<std::unique_ptr<ScorePlugin>(const Options&)> MakeScore() {
  return [](const Options&) { return std::make_unique<T>(); };
}

std::function<double(const Options&)> Weight(double w) {
  return [w](const Options&) { return w; };
}

void Must(const absl::Status& st) { HERD_CHECK_MSG(st.ok(), st.ToString()); }

}  // namespace

void RegisterBuiltinPlugins(Registry& r) {
  Must(r.AddFilter({"machine-up", "the machine is up and not draining", true, MakeFilter<MachineUpFilter>()}));
  Must(r.AddFilter({"crash-avoid", "not where this task crashed recently", false, MakeFilter<CrashAvoidFilter>()}));
  Must(r.AddFilter(
      {"constraints", "the job's hard constraints on machine attributes", false, MakeFilter<ConstraintFilter>()}));
  Must(r.AddFilter({"domain-limits", "the job's limit of tasks per failure domain, and different_machines", false,
                    MakeFilter<DomainLimitFilter>()}));
  Must(r.AddFilter({"interference", "not on a machine marked for interference with latency-sensitive work", false,
                    MakeFilter<InterferenceFilter>()}));
  Must(r.AddFilter({"resources", "CPU, memory, disk, ports and devices free (after preemption)", true,
                    MakeFilter<ResourceFilter>()}));

  Must(r.AddScore({"packing", "packing by --policy (worst, best, hybrid, pack, k8s)", Weight(1.0),
                   [](const Options& o) { return std::make_unique<PackingScore>(o.policy); }}));
  Must(r.AddScore(
      {"spread", "spreads a job across machines and failure domains", Weight(0.5), MakeScore<SpreadScore>()}));
  Must(r.AddScore({"preempt-cost", "fewer and lower-priority victims", Weight(10.0), MakeScore<PreemptCostScore>()}));
  Must(r.AddScore(
      {"locality", "machines that already hold the task's packages", Weight(0.5), MakeScore<LocalityScore>()}));
  Must(r.AddScore(
      {"priority-mix", "mixes high- and low-priority work on a machine", Weight(0.2), MakeScore<PriorityMixScore>()}));
  Must(r.AddScore(
      {"soft-constraints", "the job's preferred machine attributes", Weight(1.0), MakeScore<SoftConstraintScore>()}));
  // kube-scheduler's default profile has no such score: off with --policy k8s.
  Must(r.AddScore({"reserve", "keeps room planned for scarce pending work (GPUs, constraints)",
                   [](const Options& o) { return o.policy == PackingPolicy::kK8s ? 0.0 : 4.0; },
                   MakeScore<ReserveScore>()}));
}

}  // namespace herd::sched
