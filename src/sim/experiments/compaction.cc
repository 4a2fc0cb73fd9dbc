#include "sim/experiments/compaction.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <cmath>
#include <numeric>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/ids.h"
#include "base/priority.h"
#include "base/rng.h"
#include "cell/cell_state.h"
#include "sched/framework/devices.h"
#include "sched/scheduler.h"
#include "sim/core/fork_pool.h"

namespace herd::sim {

int64_t SimWorkload::tasks() const {
  int64_t n = 0;
  for (const auto& j : jobs) n += j.task_count();
  return n;
}

int CompactionResult::P90() const {
  if (needed.empty()) return 0;
  std::vector<int> v = needed;
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(std::ceil(0.9 * static_cast<double>(v.size()))) - 1];
}
int CompactionResult::Min() const { return needed.empty() ? 0 : *std::min_element(needed.begin(), needed.end()); }
int CompactionResult::Max() const { return needed.empty() ? 0 : *std::max_element(needed.begin(), needed.end()); }

std::vector<int32_t> RemovalOrder(size_t machines, uint64_t seed) {
  std::vector<int32_t> order(machines);
  std::iota(order.begin(), order.end(), 0);
  Rng rng(seed * 2654435761ULL + 7);
  std::shuffle(order.begin(), order.end(), rng.engine());
  return order;
}

bool FitsOn(const SimWorkload& w, const std::vector<int32_t>& order, int k, const CompactionOptions& o,
            int64_t* pending, double* device_ratio) {
  cell::CellState s("compaction");
  v1::Mutation m;
  for (int i = 0; i < k; ++i) {
    *m.mutable_machine_registered()->mutable_machine() = w.machines[static_cast<size_t>(order[static_cast<size_t>(i)])];
    if (!s.Apply(m).ok()) return false;
  }
  for (v1::JobSpec spec : w.jobs) {
    if (o.soften_large_jobs && spec.task_count() > k / 2) {
      for (auto& c : *spec.mutable_constraints()) c.set_soft(true);
    }
    m.Clear();
    *m.mutable_jobs_submitted()->add_jobs() = std::move(spec);
    if (!s.Apply(m).ok()) return false;
  }
  if (o.use_reservations && !w.reservations.empty()) {
    m.Clear();
    auto* rs = m.mutable_reservations_set();
    for (const auto& [job, r] : w.reservations) {
      const cell::Job* j = s.FindJob(job);
      if (j == nullptr) continue;
      for (int32_t i = 0; i < j->spec.task_count(); ++i) {
        auto* e = rs->add_entries();
        e->set_job(job);
        e->set_index(i);
        *e->mutable_reservation() = r;
      }
    }
    if (!s.Apply(m).ok()) return false;
  }
  const int64_t budget = static_cast<int64_t>(std::floor(o.picky * static_cast<double>(w.tasks())));
  sched::Options so = o.scheduler;
  so.max_unplaced = budget;
  sched::Scheduler sch(so);
  sched::PassResult r = sch.RunPass(s, 0);
  *pending = r.unplaced;
  if (device_ratio != nullptr) {
    int64_t cap = 0, used = 0;
    for (const cell::Machine* mach : s.machines()) cap += sched::Devices::ForCapacity(mach->capacity()).Capacity();
    for (const v1::TaskScheduled& p : r.proposals) {
      const cell::Job* j = s.FindJob(p.job());
      if (j == nullptr || p.index() < 0 || static_cast<size_t>(p.index()) >= j->tasks.size()) continue;
      for (const auto& [name, milli] : j->tasks[static_cast<size_t>(p.index())].resources().extended) {
        if (sched::IsDeviceResource(name)) used += milli;
      }
    }
    *device_ratio = cap > 0 ? static_cast<double>(used) / static_cast<double>(cap) : -1;
  }
  return !r.stopped_early && r.unplaced <= budget;
}

namespace {

// The largest total of `dim` that the `budget` tasks allowed to stay pending
// could account for (they may be the biggest ones).
double BiggestTasks(const SimWorkload& w, int64_t budget, bool cpu) {
  std::vector<std::pair<double, int64_t>> sizes;  // (request, tasks)
  for (const auto& j : w.jobs) {
    const auto& r = j.task().resources();
    sizes.push_back({static_cast<double>(cpu ? r.cpu_millis() : r.memory_bytes()), j.task_count()});
  }
  std::sort(sizes.begin(), sizes.end(), std::greater<>());
  double total = 0;
  for (const auto& [size, n] : sizes) {
    if (budget <= 0) break;
    int64_t take = std::min(budget, n);
    total += size * static_cast<double>(take);
    budget -= take;
  }
  return total;
}

// The fewest leading machines of `order` whose capacity could hold the
// requests at all (less what the picky allowance may leave pending): no
// smaller cell can fit.
int LowerBound(const SimWorkload& w, const std::vector<int32_t>& order, double picky, bool reservations) {
  // Production counts limits; with reclamation, everything else counts
  // reservations (and production's reservations count against the rest).
  std::map<std::string, v1::Resources> reserved;
  if (reservations) {
    for (const auto& [job, r] : w.reservations) reserved[job] = r;
  }
  double cpu = 0, mem = 0, prod_cpu = 0, prod_mem = 0;
  for (const auto& j : w.jobs) {
    const auto& lim = j.task().resources();
    auto it = reserved.find(JobId(j.user(), j.name()));
    const auto& r = it == reserved.end() ? lim : it->second;
    cpu += static_cast<double>(r.cpu_millis()) * j.task_count();
    mem += static_cast<double>(r.memory_bytes()) * j.task_count();
    if (IsProd(j.priority())) {
      prod_cpu += static_cast<double>(lim.cpu_millis()) * j.task_count();
      prod_mem += static_cast<double>(lim.memory_bytes()) * j.task_count();
    }
  }
  cpu = std::max(cpu, prod_cpu);
  mem = std::max(mem, prod_mem);
  const int64_t budget = static_cast<int64_t>(std::floor(picky * static_cast<double>(w.tasks())));
  cpu -= BiggestTasks(w, budget, true);
  mem -= BiggestTasks(w, budget, false);
  double have_cpu = 0, have_mem = 0;
  for (size_t i = 0; i < order.size(); ++i) {
    const auto& c = w.machines[static_cast<size_t>(order[i])].capacity();
    have_cpu += static_cast<double>(c.cpu_millis());
    have_mem += static_cast<double>(c.memory_bytes());
    if (have_cpu >= cpu && have_mem >= mem) return static_cast<int>(i + 1);
  }
  return static_cast<int>(order.size());
}

}  // namespace

absl::StatusOr<CompactionResult> Compact(const SimWorkload& w, const CompactionOptions& o) {
  auto t0 = std::chrono::steady_clock::now();
  CompactionResult res;
  res.original = static_cast<int>(w.machines.size());
  res.tasks = w.tasks();
  if (w.machines.empty()) return absl::InvalidArgumentError("the workload has no machines");
  // Each seed in its own process: "machines checks" as text.
  auto outs = ForkMap(o.seeds, o.parallel, [&](int i) {
    std::vector<int32_t> order = RemovalOrder(w.machines.size(), o.first_seed + static_cast<uint64_t>(i));
    int64_t pending = 0, checks = 1;
    double ratio = -1, r = -1;
    const int n = static_cast<int>(order.size());
    const int bound = std::min(n, LowerBound(w, order, o.picky, o.use_reservations));
    if (!FitsOn(w, order, n, o, &pending, &ratio)) return absl::StrCat(n, " ", checks, " nofit ", bound, " ", ratio);
    int lo = bound, hi = n;
    while (lo < hi) {
      int mid = lo + (hi - lo) / 2;
      ++checks;
      if (FitsOn(w, order, mid, o, &pending, &r)) {
        hi = mid;
        ratio = r;  // the answer is the last cell that fit
      } else {
        lo = mid + 1;
      }
    }
    return absl::StrCat(hi, " ", checks, " ok ", bound, " ", ratio);
  });
  if (!outs.ok()) return outs.status();
  for (const std::string& line : *outs) {
    std::vector<std::string> f = absl::StrSplit(line, ' ');
    int needed = 0;
    int64_t checks = 0;
    int bound = 0;
    double ratio = -1;
    if (f.size() != 5 || !absl::SimpleAtoi(f[0], &needed) || !absl::SimpleAtoi(f[1], &checks) ||
        !absl::SimpleAtoi(f[3], &bound) || !absl::SimpleAtod(f[4], &ratio)) {
      return absl::InternalError(absl::StrCat("bad result from a compaction run: '", line, "'"));
    }
    res.needed.push_back(needed);
    res.lower_bound.push_back(bound);
    res.device_alloc_ratio.push_back(ratio);
    res.checks += checks;
    if (f[2] == "nofit") res.fits_original = false;
  }
  res.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return res;
}

}  // namespace herd::sim
