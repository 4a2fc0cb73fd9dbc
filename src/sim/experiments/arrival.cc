// FGD's evaluation (Weng et al., ATC '23, §6): tasks arrive one after
// another on the whole cell, each placed or failed at once (a failed task
// leaves); the share of the cell's GPUs allocated when the first task fails,
// and as arrivals go on.
#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "base/ids.h"
#include "base/rng.h"
#include "base/status.h"
#include "cell/cell_state.h"
#include "sched/framework/devices.h"
#include "sched/scheduler.h"
#include "sim/experiments/experiments.h"
#include "sim/report/svg.h"

namespace herd::sim {
namespace {

int64_t DeviceMillis(const v1::Resources& r) {
  int64_t n = 0;
  for (const auto& [name, milli] : r.extended()) {
    if (sched::IsDeviceResource(name)) n += milli;
  }
  return n;
}

}  // namespace

absl::StatusOr<Figure> RunArrival(const SimWorkload& w, const CompactionOptions& o, const ArrivalOptions& a) {
  if (w.jobs.empty()) return absl::InvalidArgumentError("the workload has no jobs");
  if (a.batch < 1 || a.demand <= 0 || a.demand > 10) {
    return absl::InvalidArgumentError("arrival: batch must be >= 1 and demand in (0, 10]");
  }
  cell::CellState s("arrival");
  v1::Mutation m;
  int64_t cap = 0;
  for (const v1::Machine& mach : w.machines) {
    *m.mutable_machine_registered()->mutable_machine() = mach;
    HERD_RETURN_IF_ERROR(s.Apply(m));
    cap += sched::Devices::ForCapacity(s.machines().back()->capacity()).Capacity();
  }
  if (cap == 0) return absl::FailedPreconditionError("arrival: the cell has no devices (GPUs); use compaction");
  sched::Options so = o.scheduler;
  so.preemption = false;  // an arriving task is placed or fails, as in FGD's evaluation
  sched::Scheduler sch(so);
  Rng rng(o.first_seed * 7919 + 3);

  // Arrivals: the workload in its order, then tasks drawn from it at random
  // until the devices asked for reach `demand` x the cell's.
  const double target = a.demand * static_cast<double>(cap);
  double asked = 0;
  int64_t arrived = 0, failed = 0, next_mark = 0;
  double alloc = 0, first_fail_alloc = -1, first_fail_asked = -1;
  std::vector<std::pair<double, double>> curve;  // (asked / cap, allocated / cap)
  size_t i = 0;
  while (asked < target) {
    std::vector<v1::JobSpec> batch;
    for (int b = 0; b < a.batch && asked < target; ++b, ++i) {
      v1::JobSpec j = w.jobs[i < w.jobs.size() ? i : rng.Uniform(w.jobs.size())];
      if (i >= w.jobs.size()) j.set_name(absl::StrCat(j.name(), "-a", i));
      j.set_task_count(1);
      asked += static_cast<double>(DeviceMillis(j.task().resources()));
      batch.push_back(std::move(j));
    }
    m.Clear();
    for (v1::JobSpec& j : batch) *m.mutable_jobs_submitted()->add_jobs() = std::move(j);
    HERD_RETURN_IF_ERROR(s.Apply(m));
    arrived += static_cast<int64_t>(batch.size());
    sched::PassResult r = sch.RunPass(s, 0);
    for (const v1::TaskScheduled& p : r.proposals) {
      const cell::Job* job = s.FindJob(p.job());
      const int64_t milli = job == nullptr ? 0 : DeviceMillis(job->spec.task().resources());
      m.Clear();
      *m.mutable_task_scheduled() = p;
      if (s.Apply(m).ok()) alloc += static_cast<double>(milli);
    }
    // Whatever did not fit leaves (FGD: a task that fails is not retried).
    for (const sched::PendingClass& pc : r.pending) {
      failed += static_cast<int64_t>(pc.indexes.size());
      if (first_fail_alloc < 0) {
        first_fail_alloc = alloc / static_cast<double>(cap);
        first_fail_asked = asked / static_cast<double>(cap);
      }
      m.Clear();
      m.mutable_job_killed()->set_job(pc.job);
      m.mutable_job_killed()->set_reason("did not fit on arrival");
      HERD_RETURN_IF_ERROR(s.Apply(m));
    }
    const int64_t mark = static_cast<int64_t>(std::floor(20 * asked / static_cast<double>(cap)));
    if (mark >= next_mark) {
      curve.push_back({asked / static_cast<double>(cap), alloc / static_cast<double>(cap)});
      next_mark = mark + 1;
    }
  }
  const double end_alloc = alloc / static_cast<double>(cap);
  Figure f;
  f.id = "arrival";
  f.title = absl::StrCat("GPUs allocated as tasks arrive (FGD's metric): ", w.name);
  f.table = report::Table({"GPUs asked (% of the cell's)", "GPUs allocated (% of the cell's)"});
  for (const auto& [x, y] : curve) f.table.AddRow({report::Num(100 * x, 1), report::Num(100 * y, 1)});
  f.table.AddRow({"first failure at", first_fail_asked < 0 ? report::Cell("none") : report::Num(100 * first_fail_asked, 1)});
  report::LineChart c;
  c.title = "GPUs allocated as tasks arrive";
  c.x.label = "GPUs asked for (% of the cell's)";
  c.y.label = "GPUs allocated (% of the cell's)";
  report::LineSeries series;
  series.name = std::string(sched::PackingPolicyName(o.scheduler.policy));
  for (const auto& [x, y] : curve) series.points.push_back(report::Point{100 * x, 100 * y});
  c.series.push_back(std::move(series));
  f.charts.push_back({"arrival", c.Render()});
  f.results = {{"first_failure_gpu_alloc_ratio", first_fail_alloc < 0 ? end_alloc : first_fail_alloc},
               {"first_failure_asked_ratio", first_fail_asked},
               {"gpu_alloc_ratio", end_alloc},
               {"arrived", static_cast<double>(arrived)},
               {"failed", static_cast<double>(failed)}};
  f.notes = absl::StrCat("tasks arrive ", a.batch, " per pass until ", a.demand * 100,
                         "% of the cell's GPUs were asked for; one that does not fit leaves; policy ",
                         sched::PackingPolicyName(o.scheduler.policy));
  return f;
}

}  // namespace herd::sim
