#include "master/core/master_metrics.h"

#include <array>
#include <memory>
#include <string>

#include "base/priority.h"
#include "herd/v1/mutation.pb.h"
#include "master/core/master_core.h"

namespace herd::master {
namespace {

// One counter per kind of mutation, made once (the oneof's field names).
class MutationCounters {
 public:
  explicit MutationCounters(metrics::Registry& r) {
    const google::protobuf::OneofDescriptor* kind = v1::Mutation::descriptor()->FindOneofByName("kind");
    for (int i = 0; kind != nullptr && i < kind->field_count(); ++i) {
      const google::protobuf::FieldDescriptor* f = kind->field(i);
      by_number_[f->number()] = r.GetCounter("herd_mutations_committed_total",
                                             "Mutations the master committed, by kind", {{"kind", f->name()}});
    }
    placements_ = r.GetCounter("herd_scheduler_placements_total", "Tasks placed on a machine (committed)");
    preemptions_ = r.GetCounter("herd_scheduler_preemptions_total", "Tasks preempted to make room (committed)");
  }

  void Applied(const v1::Mutation& m) {
    auto it = by_number_.find(static_cast<int>(m.kind_case()));
    if (it != by_number_.end()) it->second.Inc();
    if (m.has_task_scheduled()) {
      placements_.Inc();
      preemptions_.Inc(m.task_scheduled().victims_size());
    } else if (m.has_jobs_submitted() && !m.jobs_submitted().place_on().empty()) {
      for (const v1::JobSpec& s : m.jobs_submitted().jobs()) placements_.Inc(s.task_count());
    }
  }

 private:
  std::map<int, metrics::Counter> by_number_;
  metrics::Counter placements_;
  metrics::Counter preemptions_;
};

// Chains `fn` after what `hook` already does (tests and the simulator may
// have set one).
template <typename Fn, typename... Args>
void Chain(std::function<void(Args...)>& hook, Fn fn) {
  hook = [prev = std::move(hook), fn = std::move(fn)](Args... args) {
    if (prev) prev(args...);
    fn(args...);
  };
}

}  // namespace

void AddMetricHooks(metrics::Registry& registry, MasterOptions* options) {
  auto counters = std::make_shared<MutationCounters>(registry);
  Chain(options->committer.on_applied, [counters](const v1::Mutation& m) { counters->Applied(m); });
  metrics::Histogram commit = registry.GetHistogram(
      "herd_mutation_commit_duration_seconds", "From a change's commit call until its mutations were durable",
      metrics::LatencyBuckets());
  Chain(options->committer.on_durable, [commit](double s) { commit.Observe(s); });

  // One link shard per master today: shard "0".
  const metrics::Labels shard = {{"shard", "0"}};
  metrics::Histogram poll = registry.GetHistogram(
      "herd_poll_duration_seconds", "Round trip of the master's polls of agents, by link shard",
      metrics::LatencyBuckets(), shard);
  metrics::Counter poll_failures =
      registry.GetCounter("herd_poll_failures_total", "Polls of agents that got no answer, by link shard", shard);
  Chain(options->link.on_poll, [poll, poll_failures](double s, bool answered) {
    poll.Observe(s);
    if (!answered) poll_failures.Inc();
  });

  metrics::Histogram pass = registry.GetHistogram(
      "herd_scheduler_pass_duration_seconds", "Scheduler passes over the pending queue", metrics::LatencyBuckets());
  Chain(options->scheduler_loop.on_pass, [pass](double s, const sched::PassResult&) { pass.Observe(s); });
}

void AddCellGauges(metrics::Registry& registry, MasterCore* core) {
  registry.OnCollect([&registry, core] {
    struct Counts {
      int64_t up = 0, down = 0, drained = 0;
      std::array<int64_t, std::size(kBands)> pending{};
      int64_t revision = 0;
    };
    const Counts c = core->committer().Read([](const cell::CellState& s) {
      Counts c;
      for (const cell::Machine* m : s.machines()) {
        if (m->drained()) {
          ++c.drained;
        } else if (m->state() == v1::Machine::UP) {
          ++c.up;
        } else {
          ++c.down;
        }
      }
      for (const cell::Task* t : s.pending()) ++c.pending[static_cast<size_t>(BandOf(t->priority()))];
      c.revision = s.revision();
      return c;
    });
    const std::string machines_help = "Machines by state (drained ones count only as drained)";
    registry.GetGauge("herd_machines", machines_help, {{"state", "up"}}).Set(c.up);
    registry.GetGauge("herd_machines", machines_help, {{"state", "down"}}).Set(c.down);
    registry.GetGauge("herd_machines", machines_help, {{"state", "drained"}}).Set(c.drained);
    for (const BandInfo& b : kBands) {
      registry.GetGauge("herd_tasks_pending", "Tasks waiting for a machine, by priority band",
                        {{"band", std::string(b.name)}})
          .Set(c.pending[static_cast<size_t>(b.band)]);
    }
    registry.GetGauge("herd_cell_revision", "The cell's revision as this master has it").Set(c.revision);
    registry.GetGauge("herd_master_leader", "1 if this master leads the cell, 0 if it follows")
        .Set(core->leading() ? 1 : 0);
  });
}

}  // namespace herd::master
