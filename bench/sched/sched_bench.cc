#include "bench/sched/sched_bench.h"

#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/priority.h"
#include "cell/cell_state.h"
#include "sched/scheduler.h"
#include "sim/trace/google2011.h"
#include "sim/workload/synthetic.h"

namespace herd::bench {
namespace {

using Clock = std::chrono::steady_clock;
double Seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

// The Google 2011 machine table's shapes at t=0 (machine_events), used when
// the trace file is not at hand: (cpu, memory, count).
const struct {
  double cpu, mem;
  int n;
} kGoogle2011Shapes[] = {{0.5, 0.4995, 6672}, {0.5, 0.2493, 3835}, {0.5, 0.749, 992}, {1, 1, 788},
                         {0.25, 0.2498, 123}, {0.5, 0.1241, 54},   {0.5, 0.03085, 5}, {0.5, 0.9678, 4},
                         {1, 0.5, 3},         {0.5, 0.06158, 1}};

std::string FindTrace(const std::string& given) {
  if (!given.empty()) return given;
  const char* env = std::getenv("HERD_TRACES");
  std::vector<std::string> dirs;
  if (env) dirs.push_back(env);
  dirs.push_back("../shared/data/traces");
  dirs.push_back("/work/shared/data/traces");
  for (const auto& d : dirs) {
    std::string p = d + "/google-2011/machine_events/part-00000-of-00001.csv.gz";
    if (std::filesystem::exists(p)) return p;
  }
  return "";
}

std::vector<sim::TraceMachine> Shapes(const SchedBenchOptions& o, std::string* source) {
  std::string path = FindTrace(o.trace);
  if (!path.empty()) {
    auto m = sim::LoadGoogle2011Machines(path);
    if (m.ok()) {
      *source = path;
      return *m;
    }
    std::fprintf(stderr, "cannot read %s: %s; using the built-in shape table\n", path.c_str(),
                 std::string(m.status().message()).c_str());
  }
  *source = "built-in Google 2011 shape table";
  std::vector<sim::TraceMachine> out;
  int64_t id = 0;
  for (const auto& s : kGoogle2011Shapes) {
    for (int i = 0; i < s.n; ++i) out.push_back({id++, "p0", s.cpu, s.mem});
  }
  return out;
}

// A cell with machines and (pending) jobs.
struct Built {
  std::vector<v1::Machine> machines;
  cell::CellState state;
  sim::Workload workload;
  double build_s = 0;
};

void Must(const absl::Status& st) {
  if (!st.ok()) {
    std::fprintf(stderr, "bench: %s\n", st.ToString().c_str());
    std::_Exit(3);
  }
}

void Submit(cell::CellState& state, const std::vector<v1::JobSpec>& jobs) {
  for (const v1::JobSpec& j : jobs) {
    v1::Mutation m;
    m.set_time_ms(1);
    *m.mutable_jobs_submitted()->add_jobs() = j;
    Must(state.Apply(m));
  }
}

Built Build(const SchedBenchOptions& o, const std::vector<sim::TraceMachine>& shapes, int64_t tasks, double fill,
            const std::string& prefix = "j") {
  Built b;
  auto t0 = Clock::now();
  sim::CellOptions co;
  co.machines = o.machines;
  co.seed = o.seed;
  b.machines = sim::MakeMachines(shapes, co);
  for (const v1::Machine& m : b.machines) {
    v1::Mutation mut;
    *mut.mutable_machine_registered()->mutable_machine() = m;
    Must(b.state.Apply(mut));
  }
  sim::WorkloadOptions wo;
  wo.tasks = tasks;
  wo.fill = fill;
  wo.seed = o.seed;
  wo.name_prefix = prefix;
  b.workload = sim::MakeWorkload(b.machines, wo);
  Submit(b.state, b.workload.jobs);
  b.build_s = Seconds(t0, Clock::now());
  return b;
}

sched::Options SchedOptions(const SchedBenchOptions& o) {
  sched::Options so = o.scheduler;
  so.seed = o.seed;
  return so;
}

// Applies a pass's proposals; returns how many committed.
int64_t Commit(cell::CellState& state, const sched::PassResult& r) {
  int64_t ok = 0;
  v1::Mutation m;
  for (const auto& p : r.proposals) {
    *m.mutable_task_scheduled() = p;
    m.set_time_ms(2);
    if (state.Apply(m).ok()) ++ok;
  }
  return ok;
}

// ---- child processes ----------------------------------------------------------

class Report {
 public:
  explicit Report(int fd) : fd_(fd) {}
  void Put(absl::string_view key, double v) {
    std::string line = absl::StrCat(key, "=", v, "\n");
    (void)!write(fd_, line.data(), line.size());
  }

 private:
  int fd_;
};

struct ChildResult {
  std::map<std::string, double> values;
  bool timed_out = false;
  bool failed = false;
  double peak_rss_mib = 0;
  double elapsed_s = 0;
};

// Runs fn in a child process; collects its key=value lines until it exits or
// `limit_s` passes (then kills it).
template <typename Fn>
ChildResult InChild(double limit_s, Fn fn) {
  int p[2];
  if (pipe(p) != 0) std::abort();
  std::fflush(stdout);
  auto t0 = Clock::now();
  pid_t pid = fork();
  if (pid == 0) {
    close(p[0]);
    Report rep(p[1]);
    fn(rep);
    close(p[1]);
    std::_Exit(0);
  }
  close(p[1]);
  ChildResult res;
  std::string buf;
  char chunk[4096];
  while (true) {
    double left = limit_s - Seconds(t0, Clock::now());
    if (left <= 0) {
      kill(pid, SIGKILL);
      res.timed_out = true;
      break;
    }
    struct pollfd pfd = {p[0], POLLIN, 0};
    int r = poll(&pfd, 1, static_cast<int>(std::min(left, 1.0) * 1000) + 1);
    if (r <= 0) continue;
    ssize_t n = read(p[0], chunk, sizeof(chunk));
    if (n <= 0) break;
    buf.append(chunk, static_cast<size_t>(n));
  }
  close(p[0]);
  int status = 0;
  struct rusage ru;
  wait4(pid, &status, 0, &ru);
  res.elapsed_s = Seconds(t0, Clock::now());
  res.peak_rss_mib = static_cast<double>(ru.ru_maxrss) / 1024.0;
  if (!res.timed_out && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) res.failed = true;
  for (absl::string_view line : absl::StrSplit(buf, '\n', absl::SkipEmpty())) {
    std::pair<absl::string_view, absl::string_view> kv = absl::StrSplit(line, absl::MaxSplits('=', 1));
    double v = 0;
    if (absl::SimpleAtod(kv.second, &v)) res.values[std::string(kv.first)] = v;
  }
  return res;
}

// From scratch: build, one pass over everything, commit, check.
void ScratchChild(const SchedBenchOptions& o, const std::vector<sim::TraceMachine>& shapes, const sched::Options& so,
                  int64_t chunk, Report& rep) {
  Built b = Build(o, shapes, o.tasks, o.fill);
  rep.Put("build_s", b.build_s);
  rep.Put("tasks", static_cast<double>(b.workload.tasks));
  rep.Put("jobs", static_cast<double>(b.workload.jobs.size()));
  sched::Options opt = so;
  opt.max_tasks_per_pass = chunk;
  sched::Scheduler s(opt);
  double wall = 0, commit = 0;
  int64_t placed = 0, considered = 0, classes = 0, evals = 0, scores = 0;
  int64_t unplaced = 0;
  std::map<std::string, double> why;  // main reason of the last pass's pending tasks
  while (true) {
    auto t0 = Clock::now();
    sched::PassResult r = s.RunPass(b.state, 0);
    auto t1 = Clock::now();
    int64_t ok = Commit(b.state, r);
    auto t2 = Clock::now();
    wall += Seconds(t0, t1);
    commit += Seconds(t1, t2);
    placed += ok;
    considered += r.tasks_considered;
    classes += r.classes;
    evals += r.machines_evaluated;
    scores += r.scores_computed;
    unplaced = r.unplaced;
    why.clear();
    for (const auto& p : r.pending) {
      std::string top = "other";
      int64_t best = -1;
      for (const auto& [k, v] : p.why.reasons) {
        if (v > best) {
          best = v;
          top = k;
        }
      }
      why[top] += static_cast<double>(p.indexes.size());
    }
    if (ok != static_cast<int64_t>(r.proposals.size())) {
      std::fprintf(stderr, "bench: %zu proposals, %lld committed\n", r.proposals.size(), static_cast<long long>(ok));
      std::_Exit(4);
    }
    if (chunk > 0) {
      rep.Put("progress_placed", static_cast<double>(placed));
      rep.Put("progress_wall_s", wall);
    }
    if (chunk == 0 || ok == 0) break;
  }
  for (const cell::Machine* m : b.state.machines()) {
    if (!m->allocated().FitsIn(m->capacity())) {
      std::fprintf(stderr, "bench: machine %s over-committed\n", m->name().c_str());
      std::_Exit(5);
    }
  }
  for (const auto& [k, v] : why) rep.Put(absl::StrCat("why:", k), v);
  rep.Put("wall_s", wall);
  rep.Put("commit_s", commit);
  rep.Put("placed", static_cast<double>(placed));
  rep.Put("pending", static_cast<double>(b.state.task_count(v1::Task::PENDING)));
  rep.Put("classes", static_cast<double>(classes));
  rep.Put("machines_evaluated", static_cast<double>(evals));
  rep.Put("scores_computed", static_cast<double>(scores));
  (void)unplaced;
  (void)considered;
}

struct Config {
  std::string name;  // "" for the full run, "no_equiv", ...
  sched::Options so;
};

int Scratch(const SchedBenchOptions& o, const std::vector<sim::TraceMachine>& shapes) {
  std::vector<Config> configs = {{"", SchedOptions(o)}};
  if (o.ablations) {
    Config a{"no_equiv", SchedOptions(o)}, b{"no_cache", SchedOptions(o)}, c{"no_random", SchedOptions(o)};
    a.so.equivalence_classes = false;
    b.so.score_cache = false;
    c.so.relaxed_randomization = false;
    Config d{"no_all", SchedOptions(o)};
    d.so.equivalence_classes = d.so.score_cache = d.so.relaxed_randomization = false;
    configs.insert(configs.end(), {a, b, c, d});
  }
  std::printf("scheduling from scratch: %d machines, %lld tasks, fill %.0f%%, policy %s, seed %llu\n", o.machines,
              static_cast<long long>(o.tasks), o.fill * 100, std::string(sched::PackingPolicyName(o.scheduler.policy)).c_str(), static_cast<unsigned long long>(o.seed));
  std::printf("%-22s %10s %12s %10s %10s %9s %12s %14s\n", "configuration", "wall s", "placements/s", "pending",
              "peak MiB", "classes", "evaluated", "scores");
  double base_wall = 0;
  for (const Config& c : configs) {
    const bool full = c.name.empty();
    // The full run is one pass; ablations run in passes of 5,000 tasks so a
    // time limit still yields a rate.
    const int64_t chunk = full ? 0 : 5'000;
    const double limit = full ? std::max(600.0, o.time_limit_s) : o.time_limit_s;
    ChildResult r = InChild(limit, [&](Report& rep) { ScratchChild(o, shapes, c.so, chunk, rep); });
    std::string label = full ? "all techniques"
                        : c.name == "no_all" ? "without all three"
                                             : absl::StrCat("without ", c.name.substr(3));
    std::string prefix = full ? "" : c.name + "_";
    if (r.failed) {
      std::printf("%-22s failed\n", label.c_str());
      return 1;
    }
    double placed = r.values.count("placed") ? r.values["placed"] : r.values["progress_placed"];
    double wall = r.values.count("wall_s") ? r.values["wall_s"] : r.values["progress_wall_s"];
    double rate = wall > 0 ? placed / wall : 0;
    if (r.timed_out) {
      double total = r.values["tasks"];
      double est = rate > 0 ? total / rate : 0;
      std::printf("%-22s  did not finish in %.0f s: %.0f placed at %.0f/s (all %.0f would take ~%.0f s)\n",
                  label.c_str(), limit, placed, rate, total, est);
      std::printf("RESULT %sfinished=0\n", prefix.c_str());
      std::printf("RESULT %splacements_per_s=%.0f\n", prefix.c_str(), rate);
      std::printf("RESULT %sestimated_wall_s=%.0f\n", prefix.c_str(), est);
      if (base_wall > 0 && est > 0) std::printf("RESULT %sslowdown=%.1f\n", prefix.c_str(), est / base_wall);
      continue;
    }
    std::printf("%-22s %10.2f %12.0f %10.0f %10.0f %9.0f %12.0f %14.0f\n", label.c_str(), wall, rate,
                r.values["pending"], r.peak_rss_mib, r.values["classes"], r.values["machines_evaluated"],
                r.values["scores_computed"]);
    for (const auto& [k, v] : r.values) {
      if (k.rfind("why:", 0) == 0) std::printf("  pending %.0f: mostly %s\n", v, k.substr(4).c_str());
    }
    if (full) {
      base_wall = wall;
      std::printf("  (built the cell in %.1f s; committing the placements took %.1f s; %.0f jobs)\n",
                  r.values["build_s"], r.values["commit_s"], r.values["jobs"]);
    }
    std::printf("RESULT %swall_s=%.2f\n", prefix.c_str(), wall);
    std::printf("RESULT %splacements_per_s=%.0f\n", prefix.c_str(), rate);
    std::printf("RESULT %speak_rss_mib=%.0f\n", prefix.c_str(), r.peak_rss_mib);
    std::printf("RESULT %spending=%.0f\n", prefix.c_str(), r.values["pending"]);
    if (!full) std::printf("RESULT %sfinished=1\n", prefix.c_str());
    if (!full && base_wall > 0) std::printf("RESULT %sslowdown=%.1f\n", prefix.c_str(), wall / base_wall);
  }
  return 0;
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5))];
}

int Online(const SchedBenchOptions& o, const std::vector<sim::TraceMachine>& shapes) {
  ChildResult r = InChild(3600, [&](Report& rep) {
    int64_t base_tasks = static_cast<int64_t>(static_cast<double>(o.tasks) * o.online_fill / o.fill);
    Built b = Build(o, shapes, base_tasks, o.online_fill);
    sched::Scheduler s(SchedOptions(o));
    sched::PassResult first = s.RunPass(b.state, 0);
    Commit(b.state, first);
    double used_cpu = 0, cap_cpu = 0, used_mem = 0, cap_mem = 0;
    for (const cell::Machine* m : b.state.machines()) {
      used_cpu += m->allocated().cpu_millis;
      cap_cpu += m->capacity().cpu_millis;
      used_mem += m->allocated().memory_bytes;
      cap_mem += m->capacity().memory_bytes;
    }
    rep.Put("cell_cpu_pct", 100 * used_cpu / cap_cpu);
    rep.Put("cell_mem_pct", 100 * used_mem / cap_mem);
    rep.Put("backlog", static_cast<double>(b.state.task_count(v1::Task::PENDING)));
    std::vector<double> ms;
    double placed = 0;
    for (int trial = 0; trial < o.trials; ++trial) {
      SchedBenchOptions to = o;
      to.seed = o.seed * 1000 + static_cast<uint64_t>(trial) + 1;
      sim::WorkloadOptions wo;
      wo.tasks = o.online_tasks;
      wo.fill = o.online_fill * static_cast<double>(o.online_tasks) / static_cast<double>(base_tasks);
      wo.seed = to.seed;
      wo.name_prefix = absl::StrCat("t", trial, "-");
      sim::Workload w = sim::MakeWorkload(b.machines, wo);
      Submit(b.state, w.jobs);
      auto t0 = Clock::now();
      sched::PassResult r = s.RunPass(b.state, 0);
      ms.push_back(Seconds(t0, Clock::now()) * 1000);
      placed += static_cast<double>(Commit(b.state, r));
      for (const v1::JobSpec& j : w.jobs) {
        v1::Mutation k;
        k.mutable_job_killed()->set_job(j.user() + "/" + j.name());
        Must(b.state.Apply(k));
      }
    }
    rep.Put("p50_ms", Percentile(ms, 0.5));
    rep.Put("p99_ms", Percentile(ms, 0.99));
    rep.Put("max_ms", *std::max_element(ms.begin(), ms.end()));
    rep.Put("placed_per_trial", placed / o.trials);
  });
  if (r.failed || r.timed_out) {
    std::printf("online benchmark failed\n");
    return 1;
  }
  std::printf("online passes: %lld new pending tasks into a cell %.0f%% full (CPU) / %.0f%% (memory), "
              "%.0f tasks already waiting; %d trials\n",
              static_cast<long long>(o.online_tasks), r.values["cell_cpu_pct"], r.values["cell_mem_pct"],
              r.values["backlog"], o.trials);
  std::printf("  pass latency p50 %.1f ms, p99 %.1f ms, max %.1f ms; %.0f of %lld placed per pass\n",
              r.values["p50_ms"], r.values["p99_ms"], r.values["max_ms"], r.values["placed_per_trial"],
              static_cast<long long>(o.online_tasks));
  std::printf("RESULT online_pass_p50_ms=%.1f\n", r.values["p50_ms"]);
  std::printf("RESULT online_pass_p99_ms=%.1f\n", r.values["p99_ms"]);
  std::printf("RESULT online_cell_cpu_pct=%.1f\n", r.values["cell_cpu_pct"]);
  std::printf("RESULT online_placed_per_pass=%.0f\n", r.values["placed_per_trial"]);
  return 0;
}

int Packing(const SchedBenchOptions& o, const std::vector<sim::TraceMachine>& shapes) {
  std::printf("packing: %lld tasks asking %.0f%% of %d machines, one pass each\n",
              static_cast<long long>(o.packing_tasks), o.packing_fill * 100, o.machines);
  std::printf("%-12s %10s %14s %14s %10s\n", "policy", "pending", "stranded cpu", "stranded mem", "wall s");
  for (const char* policy : {"worst", "best", "hybrid"}) {
    ChildResult r = InChild(3600, [&](Report& rep) {
      SchedBenchOptions po = o;
      po.scheduler.policy = *sched::ParsePackingPolicy(policy);
      Built b = Build(po, shapes, o.packing_tasks, o.packing_fill);
      // What a typical task needs: the median request.
      std::vector<int64_t> cpus, mems;
      for (const v1::JobSpec& j : b.workload.jobs) {
        cpus.push_back(j.task().resources().cpu_millis());
        mems.push_back(j.task().resources().memory_bytes());
      }
      std::sort(cpus.begin(), cpus.end());
      std::sort(mems.begin(), mems.end());
      int64_t med_cpu = cpus[cpus.size() / 2], med_mem = mems[mems.size() / 2];
      sched::Scheduler s(SchedOptions(po));
      auto t0 = Clock::now();
      sched::PassResult r = s.RunPass(b.state, 0);
      rep.Put("wall_s", Seconds(t0, Clock::now()));
      Commit(b.state, r);
      // Stranded: free CPU on machines without memory for a typical task, and
      // free memory on machines without CPU for one.
      double cap_cpu = 0, cap_mem = 0, s_cpu = 0, s_mem = 0;
      for (const cell::Machine* m : b.state.machines()) {
        ResourceVector f = m->Free();
        cap_cpu += m->capacity().cpu_millis;
        cap_mem += m->capacity().memory_bytes;
        if (f.memory_bytes < med_mem) s_cpu += f.cpu_millis;
        if (f.cpu_millis < med_cpu) s_mem += f.memory_bytes;
      }
      rep.Put("pending", static_cast<double>(b.state.task_count(v1::Task::PENDING)));
      rep.Put("stranded_cpu_pct", 100 * s_cpu / cap_cpu);
      rep.Put("stranded_mem_pct", 100 * s_mem / cap_mem);
    });
    if (r.failed || r.timed_out) {
      std::printf("%-12s failed\n", policy);
      return 1;
    }
    std::printf("%-12s %10.0f %13.2f%% %13.2f%% %10.2f\n", policy, r.values["pending"], r.values["stranded_cpu_pct"],
                r.values["stranded_mem_pct"], r.values["wall_s"]);
    std::printf("RESULT packing_%s_pending=%.0f\n", policy, r.values["pending"]);
    std::printf("RESULT packing_%s_stranded_cpu_pct=%.2f\n", policy, r.values["stranded_cpu_pct"]);
    std::printf("RESULT packing_%s_stranded_mem_pct=%.2f\n", policy, r.values["stranded_mem_pct"]);
  }
  return 0;
}

}  // namespace

int RunSchedulerBench(const SchedBenchOptions& o) {
  std::string source;
  std::vector<sim::TraceMachine> shapes = Shapes(o, &source);
  std::printf("machine shapes from %s (%zu machines)\n", source.c_str(), shapes.size());
  int rc = 0;
  if (o.mode == "scratch" || o.mode == "all") rc |= Scratch(o, shapes);
  if (o.mode == "online" || o.mode == "all") rc |= Online(o, shapes);
  if (o.mode == "packing" || o.mode == "all") rc |= Packing(o, shapes);
  return rc;
}

}  // namespace herd::bench
