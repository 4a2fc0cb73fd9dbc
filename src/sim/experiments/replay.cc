#include "sim/experiments/replay.h"

#include <algorithm>
#include <chrono>
#include <map>

#include "absl/strings/str_cat.h"
#include "base/ids.h"
#include "base/status.h"
#include "sim/core/driver.h"
#include "sim/report/svg.h"
#include "sim/trace/google2011.h"
#include "sim/trace/google2011_tasks.h"
#include "sim/workload/synthetic.h"

namespace herd::sim {
namespace {

using TaskKey = std::pair<int64_t, int32_t>;  // (trace job, trace index)

bool Ends(TaskEventType t) {
  return t == TaskEventType::kEvict || t == TaskEventType::kFail || t == TaskEventType::kFinish ||
         t == TaskEventType::kKill || t == TaskEventType::kLost;
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5))];
}

constexpr int64_t kBaseMs = 1'700'000'000'000;  // virtual time of the window's start

// The window of the trace to replay: the cell at `from` and what happens until `to`.
struct Window {
  int64_t from_us = 0, to_us = 0;
  std::vector<v1::Machine> machines;
  std::vector<TraceTask> live;     // running at `from`
  std::vector<TraceEvent> events;  // in [from, to)
  int64_t VirtualMs(int64_t t_us) const { return kBaseMs + (t_us - from_us) / 1000; }
};

absl::StatusOr<Window> LoadWindow(const std::string& dir, const ReplayOptions& o) {
  const std::string tasks_dir = dir + "/task_events";
  HERD_ASSIGN_OR_RETURN(std::vector<std::string> me, TracePartFiles(dir + "/machine_events"));
  if (me.empty()) return absl::NotFoundError(absl::StrCat("no machine_events under ", dir));
  TasksAtStats span;
  HERD_RETURN_IF_ERROR(TasksAt(tasks_dir, INT64_MAX / 2, &span).status());
  Window w;
  w.from_us = o.from_s >= 0 ? static_cast<int64_t>(o.from_s * 1e6) : span.window_start_us + 1;
  w.to_us = o.to_s >= 0 ? static_cast<int64_t>(o.to_s * 1e6) : span.window_end_us;
  if (w.to_us <= w.from_us) return absl::InvalidArgumentError("the replay window is empty (--to must be after --from)");
  HERD_ASSIGN_OR_RETURN(std::vector<TraceMachine> shapes, LoadGoogle2011Machines(me[0], w.from_us));
  CellOptions co;
  co.machines = static_cast<int>(shapes.size());
  w.machines = MakeMachines(shapes, co);
  HERD_ASSIGN_OR_RETURN(w.live, TasksAt(tasks_dir, w.from_us));
  HERD_ASSIGN_OR_RETURN(w.events, EventsBetween(tasks_dir, w.from_us, w.to_us));
  return w;
}

// When each trace task ends (the first end event in the window).
std::map<TaskKey, int64_t> EndTimes(const std::vector<TraceEvent>& events) {
  std::map<TaskKey, int64_t> end_us;
  for (const TraceEvent& e : events) {
    if (Ends(e.type)) end_us.emplace(TaskKey{e.job_id, e.index}, e.time_us);
  }
  return end_us;
}

// Submissions in time order: the live tasks at `from`, then new ones grouped
// by job and second.
struct Batch {
  int64_t t_us;
  std::vector<TraceTask> tasks;
};

std::vector<Batch> Submissions(const Window& w) {
  std::vector<Batch> batches;
  batches.push_back({w.from_us, w.live});
  std::map<std::pair<int64_t, int64_t>, size_t> open;  // (job, second) -> batch
  std::set<TaskKey> known;
  for (const TraceTask& t : w.live) known.insert({t.job_id, t.index});
  for (const TraceEvent& e : w.events) {
    if (e.type != TaskEventType::kSubmit || known.count({e.job_id, e.index}) || e.cpu < 0 || e.memory < 0) continue;
    known.insert({e.job_id, e.index});
    TraceTask t;
    t.job_id = e.job_id;
    t.index = e.index;
    t.priority = std::max(0, e.priority);
    t.scheduling_class = std::max(0, e.scheduling_class);
    t.user = e.user;
    t.cpu = e.cpu;
    t.memory = e.memory;
    t.disk = std::max(0.0, e.disk);
    t.different_machines = e.different_machines == 1;
    auto key = std::make_pair(e.job_id, e.time_us / 1'000'000);
    auto [it, added] = open.try_emplace(key, batches.size());
    if (added) batches.push_back({e.time_us, {}});
    batches[it->second].tasks.push_back(std::move(t));
  }
  std::stable_sort(batches.begin(), batches.end(), [](const Batch& a, const Batch& b) { return a.t_us < b.t_us; });
  return batches;
}

// Running and pending tasks and allocation, once a virtual minute.
class Timeline {
 public:
  explicit Timeline(const std::vector<v1::Machine>& machines)
      : table_({"minute", "running", "pending", "cpu allocated %", "memory allocated %"}) {
    for (const auto& m : machines) {
      cap_cpu_ += static_cast<double>(m.capacity().cpu_millis());
      cap_mem_ += static_cast<double>(m.capacity().memory_bytes());
    }
  }

  // Samples every minute boundary the driver has passed since the last call.
  void Sample(Driver& d) {
    while (d.now_ms() >= next_ms_) {
      auto [run, pend, cpu, mem] = d.master().committer().Read([](const cell::CellState& s) {
        double c = 0, m = 0;
        for (const cell::Machine* mach : s.machines()) {
          c += static_cast<double>(mach->allocated().cpu_millis);
          m += static_cast<double>(mach->allocated().memory_bytes);
        }
        return std::make_tuple(s.task_count(v1::Task::RUNNING), s.task_count(v1::Task::PENDING), c, m);
      });
      const double minute = static_cast<double>(next_ms_ - kBaseMs) / 60'000.0;
      table_.AddRow({report::Num(minute, 0), run, pend, report::Num(100 * cpu / cap_cpu_, 2),
                     report::Num(100 * mem / cap_mem_, 2)});
      running_.points.push_back({minute, static_cast<double>(run)});
      pending_.points.push_back({minute, static_cast<double>(pend)});
      next_ms_ += 60'000;
    }
  }

  report::Table TakeTable() { return std::move(table_); }
  std::string Chart() const {
    report::LineChart c;
    c.title = "Replay: tasks over time";
    c.x.label = "minutes into the window";
    c.y.label = "tasks";
    c.y.include_zero = true;
    c.series = {running_, pending_};
    return c.Render();
  }

 private:
  report::Table table_;
  report::LineSeries running_{"running tasks"}, pending_{"pending tasks"};
  double cap_cpu_ = 0, cap_mem_ = 0;
  int64_t next_ms_ = kBaseMs;
};

// Submits each batch at its time; returns how many tasks were submitted.
// `trace_of` learns which trace task each Herd task stands for.
absl::StatusOr<int64_t> SubmitAll(Driver& d, const Window& w, std::vector<Batch>& batches, Timeline& timeline,
                                  std::map<std::pair<std::string, int32_t>, TaskKey>& trace_of) {
  int64_t submitted = 0;
  std::map<int64_t, int> batches_of_job;
  for (Batch& b : batches) {
    HERD_RETURN_IF_ERROR(d.AdvanceTo(w.VirtualMs(b.t_us)));
    timeline.Sample(d);
    std::vector<TraceJobIndex> index;
    std::vector<v1::JobSpec> jobs = JobsFromTasks(b.tasks, ScaleOptions(), &index);
    for (size_t i = 0; i < jobs.size(); ++i) {
      int n = batches_of_job[index[i].job_id]++;
      if (n > 0) jobs[i].set_name(absl::StrCat(jobs[i].name(), "-", n));
      for (size_t k = 0; k < index[i].trace_index.size(); ++k) {
        trace_of[{JobId(jobs[i].user(), jobs[i].name()), static_cast<int32_t>(k)}] = {index[i].job_id,
                                                                                      index[i].trace_index[k]};
      }
      submitted += jobs[i].task_count();
    }
    if (!jobs.empty()) HERD_RETURN_IF_ERROR(d.Submit(std::move(jobs), "trace").status());
  }
  return submitted;
}

// How long tasks waited to start (virtual seconds), and how many never did.
struct Waits {
  std::vector<double> seconds;
  int64_t never = 0;
};

Waits WaitTimes(Driver& d) {
  Waits w;
  d.master().committer().Read([&](const cell::CellState& s) {
    for (const auto& [id, j] : s.jobs()) {
      for (const cell::Task& t : j->tasks) {
        int64_t started = t.started_ms();
        if (started == 0 && t.state() == v1::Task::DEAD) {
          for (const auto& e : t.history()) {
            if (e.transition == v1::Event::SCHEDULE) started = e.time_ms;
          }
        }
        if (started > 0) {
          w.seconds.push_back(static_cast<double>(std::max<int64_t>(0, started - j->submit_time_ms)) / 1000.0);
        } else if (t.state() == v1::Task::PENDING) {
          ++w.never;
        }
      }
    }
    return 0;
  });
  return w;
}

}  // namespace

absl::StatusOr<Figure> ReplayGoogle2011(const std::string& dir, const ReplayOptions& o) {
  const auto wall0 = std::chrono::steady_clock::now();
  HERD_ASSIGN_OR_RETURN(const Window w, LoadWindow(dir, o));
  const std::map<TaskKey, int64_t> end_us = EndTimes(w.events);
  std::vector<Batch> batches = Submissions(w);

  DriverOptions dopt;
  dopt.start_ms = kBaseMs;
  dopt.tick_ms = o.tick_ms;
  dopt.scheduler = o.scheduler;
  HERD_ASSIGN_OR_RETURN(std::unique_ptr<Driver> d, Driver::Create(dopt));
  // Each task ends when its trace task ended (at the earliest when it starts).
  std::map<std::pair<std::string, int32_t>, TaskKey> trace_of;
  d->agents().SetScript([&](const v1::TaskRun& run, int64_t start) -> std::optional<std::pair<int64_t, int32_t>> {
    auto it = trace_of.find({run.ref().job(), run.ref().index()});
    if (it == trace_of.end()) return std::nullopt;
    auto e = end_us.find(it->second);
    if (e == end_us.end()) return std::nullopt;  // runs past the window
    return std::make_pair(std::max(start, w.VirtualMs(e->second)), 0);
  });
  HERD_RETURN_IF_ERROR(d->AddMachines(w.machines));

  Timeline timeline(w.machines);
  HERD_ASSIGN_OR_RETURN(const int64_t submitted, SubmitAll(*d, w, batches, timeline, trace_of));
  HERD_RETURN_IF_ERROR(d->AdvanceTo(w.VirtualMs(w.to_us)));
  timeline.Sample(*d);
  const Waits waits = WaitTimes(*d);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
  const double virt = static_cast<double>(w.to_us - w.from_us) / 1e6;

  Figure f;
  f.id = "replay";
  f.title = absl::StrCat("Google 2011 trace replayed from ", w.from_us / 1'000'000, " s to ", w.to_us / 1'000'000,
                         " s on ", w.machines.size(), " machines");
  f.table = timeline.TakeTable();
  f.charts.push_back({"replay", timeline.Chart()});
  f.results = {{"submitted", static_cast<double>(submitted)},
               {"started", static_cast<double>(waits.seconds.size())},
               {"still_pending", static_cast<double>(waits.never)},
               {"wait_p50_s", Percentile(waits.seconds, 0.5)},
               {"wait_p90_s", Percentile(waits.seconds, 0.9)},
               {"wait_max_s", waits.seconds.empty() ? 0 : *std::max_element(waits.seconds.begin(), waits.seconds.end())},
               {"virtual_s", virt},
               {"wall_s", wall},
               {"speedup", wall > 0 ? virt / wall : 0},
               {"revisions", static_cast<double>(d->revision())}};
  f.notes = absl::StrCat(w.live.size(), " tasks live at the start, ", submitted - static_cast<int64_t>(w.live.size()),
                         " submitted in the window; simulated polls every ", o.tick_ms / 1000,
                         " s, so waits are rounded up to that");
  return f;
}

}  // namespace herd::sim
