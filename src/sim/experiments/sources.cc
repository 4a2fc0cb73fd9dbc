#include "sim/experiments/sources.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/status.h"
#include "cell/checkpoint_codec.h"
#include "sched/scheduler.h"
#include "sim/core/questions.h"
#include "sim/trace/google2011.h"
#include "sim/trace/google2011_tasks.h"
#include "sim/trace/openb.h"
#include "sim/workload/synthetic.h"

namespace herd::sim {

std::string FindMachineEvents() {
  std::vector<std::string> dirs;
  if (const char* env = std::getenv("HERD_TRACES")) dirs.push_back(env);
  dirs.push_back("../shared/data/traces");
  dirs.push_back("/work/shared/data/traces");
  for (const auto& d : dirs) {
    std::string p = d + "/google-2011/machine_events/part-00000-of-00001.csv.gz";
    if (std::filesystem::exists(p)) return p;
  }
  return "";
}

namespace {

// The Google 2011 machine table's shapes at t=0, for when the file is absent.
std::vector<TraceMachine> BuiltInShapes() {
  const struct {
    double cpu, mem;
    int n;
  } kShapes[] = {{0.5, 0.4995, 6672}, {0.5, 0.2493, 3835}, {0.5, 0.749, 992}, {1, 1, 788},
                 {0.25, 0.2498, 123}, {0.5, 0.1241, 54},   {0.5, 0.03085, 5}, {0.5, 0.9678, 4},
                 {1, 0.5, 3},         {0.5, 0.06158, 1}};
  std::vector<TraceMachine> out;
  int64_t id = 0;
  for (const auto& s : kShapes) {
    for (int i = 0; i < s.n; ++i) out.push_back({id++, "p0", s.cpu, s.mem});
  }
  return out;
}

}  // namespace

absl::StatusOr<SimWorkload> SyntheticWorkload(absl::string_view spec, const std::string& machine_events) {
  CellOptions co;
  WorkloadOptions wo;
  for (absl::string_view item : absl::StrSplit(spec, absl::ByAnyChar(", "), absl::SkipEmpty())) {
    std::pair<absl::string_view, absl::string_view> kv = absl::StrSplit(item, absl::MaxSplits('=', 1));
    double v = 0;
    if (!absl::SimpleAtod(kv.second, &v) || v < 0) {
      return absl::InvalidArgumentError(absl::StrCat("synthetic spec: '", item, "' is not KEY=NUMBER"));
    }
    if (kv.first == "machines") {
      co.machines = static_cast<int>(v);
    } else if (kv.first == "tasks") {
      wo.tasks = static_cast<int64_t>(v);
    } else if (kv.first == "fill") {
      wo.fill = v;
    } else if (kv.first == "seed") {
      co.seed = wo.seed = static_cast<uint64_t>(v);
    } else if (kv.first == "constrained") {
      wo.constrained_jobs = v;
    } else if (kv.first == "anti_affinity") {
      wo.anti_affinity_jobs = v;
    } else if (kv.first == "shapes") {
      if (v != 2011 && v != 2015) {
        return absl::InvalidArgumentError(absl::StrCat(
            "synthetic spec: shapes=", kv.second, ": 2015 (the Borg paper's) or 2011 (the Google 2011 trace's)"));
      }
      wo.shapes = static_cast<int>(v);
      if (wo.shapes == 2011) wo.tiny_nonprod_tasks = 0.01;
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("synthetic spec: unknown key '", kv.first,
                       "' (machines, tasks, fill, seed, constrained, anti_affinity, shapes)"));
    }
  }
  if (co.machines < 1 || wo.tasks < 1 || wo.fill <= 0 || wo.fill > 2) {
    return absl::InvalidArgumentError("synthetic spec: machines and tasks must be positive and fill in (0, 2]");
  }
  std::string path = machine_events.empty() ? FindMachineEvents() : machine_events;
  std::vector<TraceMachine> shapes;
  if (!path.empty()) {
    HERD_ASSIGN_OR_RETURN(shapes, LoadGoogle2011Machines(path));
  } else {
    shapes = BuiltInShapes();
  }
  SimWorkload w;
  w.machines = MakeMachines(shapes, co);
  Workload wl = MakeWorkload(w.machines, wo);
  w.jobs = std::move(wl.jobs);
  w.name = absl::StrCat("synthetic: ", co.machines, " machines, ", wl.tasks, " tasks, fill ", wo.fill, ", seed ",
                        wo.seed, wo.shapes == 2011 ? ", 2011 shapes" : "");
  return w;
}

absl::StatusOr<SimWorkload> Google2011Workload(const std::string& dir, double at_s) {
  std::string machines = dir + "/machine_events";
  std::string tasks = dir + "/task_events";
  if (!std::filesystem::exists(machines) || !std::filesystem::exists(tasks)) {
    return absl::NotFoundError(absl::StrCat(dir, " must hold machine_events/ and task_events/"));
  }
  int64_t at_us = static_cast<int64_t>(at_s * 1e6);
  if (at_s < 0) {
    TasksAtStats stats;
    HERD_RETURN_IF_ERROR(TasksAt(tasks, INT64_MAX / 2, &stats).status());
    at_us = (stats.window_start_us + stats.window_end_us) / 2;
  }
  HERD_ASSIGN_OR_RETURN(std::vector<std::string> files, TracePartFiles(machines));
  if (files.empty()) return absl::NotFoundError(absl::StrCat("no machine_events files in ", machines));
  HERD_ASSIGN_OR_RETURN(std::vector<TraceMachine> shapes, LoadGoogle2011Machines(files[0], at_us));
  CellOptions co;
  co.machines = static_cast<int>(shapes.size());
  SimWorkload w;
  w.machines = MakeMachines(shapes, co);
  TasksAtStats stats;
  HERD_ASSIGN_OR_RETURN(std::vector<TraceTask> live, TasksAt(tasks, at_us, &stats));
  w.jobs = JobsFromTasks(live, ScaleOptions());
  w.name = absl::StrCat("google-2011 at ", at_us / 1'000'000, " s: ", w.machines.size(), " machines, ",
                        stats.live, " live tasks (", stats.running, " running, ", stats.pending, " pending) in ",
                        w.jobs.size(), " jobs");
  return w;
}

absl::StatusOr<SimWorkload> OpenbWorkload(const std::string& nodes, const std::string& pods, double fraction) {
  if (!(fraction > 0 && fraction <= 1)) {
    return absl::InvalidArgumentError(absl::StrCat("--pods: the share of pods must be in (0, 1], not ", fraction));
  }
  SimWorkload w;
  HERD_ASSIGN_OR_RETURN(w.machines, LoadOpenbNodes(nodes));
  HERD_ASSIGN_OR_RETURN(std::vector<OpenbPod> p, LoadOpenbPods(pods));
  size_t total = p.size();
  if (fraction < 1) {
    // The first pods to arrive, as the trace's own simulator inflates a
    // cluster: the lists ask for nearly every GPU of the cell together.
    std::stable_sort(p.begin(), p.end(),
                     [](const OpenbPod& a, const OpenbPod& b) { return a.creation_time < b.creation_time; });
    p.resize(static_cast<size_t>(std::ceil(fraction * static_cast<double>(p.size()))));
  }
  w.jobs = JobsFromPods(p);
  w.name = absl::StrCat("openb: ", w.machines.size(), " nodes, ", w.jobs.size(), " pods from ",
                        std::filesystem::path(pods).filename().string());
  if (p.size() < total) absl::StrAppend(&w.name, " (the first ", p.size(), " of ", total, ")");
  return w;
}

absl::StatusOr<cell::CellState> CheckpointState(const std::string& path, int64_t revision) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  HERD_ASSIGN_OR_RETURN(cell::Checkpoint cp, cell::ReadCheckpoint(in, path));
  HERD_ASSIGN_OR_RETURN(cell::CellState s, cell::CellState::FromSnapshot(cp.snapshot));
  if (revision > 0 && revision < s.revision()) {
    return absl::OutOfRangeError(absl::StrCat(path, " starts at revision ", s.revision(), "; ", revision,
                                              " is older than its snapshot"));
  }
  for (const v1::Mutation& m : cp.log) {
    if (revision > 0 && m.revision() > revision) break;
    if (absl::Status st = s.Apply(m); !st.ok()) {
      return absl::DataLossError(absl::StrCat(path, ": revision ", m.revision(), ": ", st.message()));
    }
  }
  return s;
}

absl::StatusOr<SimWorkload> CheckpointWorkload(const std::string& path, int64_t revision) {
  HERD_ASSIGN_OR_RETURN(cell::CellState s, CheckpointState(path, revision));
  SimWorkload w;
  for (const cell::Machine* m : s.machines()) w.machines.push_back(m->ToProto());
  for (const auto& [id, j] : s.jobs()) {
    if (j->state != v1::Job::DEAD) w.jobs.push_back(j->spec);
  }
  w.name = absl::StrCat("checkpoint ", std::filesystem::path(path).filename().string(), " at revision ",
                        s.revision(), ": ", w.machines.size(), " machines, ", w.jobs.size(), " live jobs");
  return w;
}

absl::StatusOr<cell::CellState> ScheduledState(const SimWorkload& w, const sched::Options& options) {
  cell::CellState s("sim");
  v1::Mutation m;
  for (const v1::Machine& mach : w.machines) {
    *m.mutable_machine_registered()->mutable_machine() = mach;
    HERD_RETURN_IF_ERROR(s.Apply(m));
  }
  for (const v1::JobSpec& j : w.jobs) {
    m.Clear();
    *m.mutable_jobs_submitted()->add_jobs() = j;
    HERD_RETURN_IF_ERROR(s.Apply(m));
  }
  sched::Scheduler sch(options);
  ScheduleAll(s, sch);
  return s;
}

}  // namespace herd::sim
