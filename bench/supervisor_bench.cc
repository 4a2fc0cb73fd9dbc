// supervisor_bench: how fast the agent's Supervisor starts and stops tasks,
// in process (no gRPC, no master), beside the machine's own limit.
//
//   start latency   SetDesired(one more run) -> the run is ACTIVE (its task
//                   has exec'd under its herd-shim), one run at a time
//   burst           N runs asked for at once -> all ACTIVE; the slowest
//                   Observe() meanwhile (the agent answers polls with it)
//   stop            all N runs no longer desired -> all gone
//
// Baseline, measured in the same run: posix_spawn of the same command until
// it has exec'd (its /proc/PID/exe is the command), which is what a start
// costs without a supervisor or a shim.
//
// With --cgroups ROOT (as root, e.g. /sys/fs/cgroup), the same runs start in
// containers (the cgroup extension), and two more figures: what the
// extension's Prepare (creating and configuring a run's groups) costs per
// run, and what one usage sample of every run's group costs.
//
//   build/bin/supervisor_bench [--starts 20] [--burst 100] [--shim PATH] [--cgroups ROOT]
//
// Prints a table and one `RESULT name=value` line per figure. Moved here from
// supervisor_test (SupervisorTest.StartLatency/StartThroughput), which printed
// these figures but asserted nothing.
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "agent/cgroup/cgroup_extension.h"
#include "agent/supervisor/supervisor.h"
#include "base/log.h"

extern char** environ;

namespace herd::agent {
namespace {

using Clock = std::chrono::steady_clock;

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

v1::TaskRun SleepRun(const std::string& id) {
  v1::TaskRun run;
  run.set_run_id(id);
  run.mutable_ref()->set_job("bench/sleep");
  run.add_argv("/bin/sleep");
  run.add_argv("3600");
  run.mutable_restart()->set_mode(v1::RestartPolicy::NEVER);
  run.set_grace_period_ms(1000);
  return run;
}

// Calls Observe() until `done` holds for the runs; returns the slowest
// Observe() seen (ms).
template <typename Done>
double WaitUntil(Supervisor& sup, Done done) {
  double slowest = 0;
  uint64_t version = 0;
  const auto deadline = Clock::now() + std::chrono::minutes(5);
  while (Clock::now() < deadline) {
    auto t0 = Clock::now();
    std::vector<v1::RunStatus> all = sup.Observe(&version);
    slowest = std::max(slowest, Ms(Clock::now() - t0));
    if (done(all)) return slowest;
    sup.WaitForChange(version, 100);
  }
  std::fprintf(stderr, "supervisor_bench: gave up waiting after 5 minutes\n");
  std::exit(1);
}

bool Active(const std::vector<v1::RunStatus>& all, const std::string& id) {
  for (const auto& s : all) {
    if (s.run_id() == id) return s.phase() == v1::Task::ACTIVE;
  }
  return false;
}

std::vector<double> BaselineSpawns(int n) {
  std::vector<double> out;
  for (int i = 0; i < n; ++i) {
    auto t0 = Clock::now();
    pid_t pid;
    char* args[] = {const_cast<char*>("/bin/sleep"), const_cast<char*>("3600"), nullptr};
    if (posix_spawn(&pid, "/bin/sleep", nullptr, nullptr, args, environ) != 0) std::exit(1);
    const std::string exe = absl::StrCat("/proc/", pid, "/exe");
    char buf[256];
    for (;;) {
      ssize_t len = readlink(exe.c_str(), buf, sizeof(buf) - 1);
      if (len > 0 && std::string(buf, static_cast<size_t>(len)).find("sleep") != std::string::npos) break;
    }
    out.push_back(Ms(Clock::now() - t0));
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
  }
  return out;
}

// What Prepare and a usage sample cost per run, with real cgroups.
void CgroupCosts(const std::string& cgroup_root, const std::string& dir, int runs) {
  CgroupOptions o;
  o.root = cgroup_root;
  o.parent = "herd-bench";
  o.agent_name = absl::StrCat("bench-", getpid());
  o.owner_dir = dir;
  std::shared_ptr<CgroupExtension> ext = CgroupExtension::Create(o);
  if (ext->driver() == nullptr) {
    std::fprintf(stderr, "supervisor_bench: no cgroups at %s\n", cgroup_root.c_str());
    std::exit(1);
  }
  RunDir run_dir(dir);
  std::vector<v1::TaskRun> specs;
  std::vector<double> prepare;
  for (int i = 0; i < runs; ++i) {
    v1::TaskRun run = SleepRun(absl::StrCat("cost.", i));
    run.mutable_resources()->set_cpu_millis(500);
    run.mutable_resources()->set_memory_bytes(64 << 20);
    run.set_priority(200);
    AttemptSetup setup;
    auto t0 = Clock::now();
    absl::Status st = ext->Prepare(RunView{run, run_dir, v1::Task::STARTING, ProcessId{}, true}, &setup);
    prepare.push_back(Ms(Clock::now() - t0));
    if (!st.ok()) {
      std::fprintf(stderr, "supervisor_bench: Prepare: %s\n", st.ToString().c_str());
      std::exit(1);
    }
    specs.push_back(run);
  }
  auto t0 = Clock::now();
  for (const v1::TaskRun& run : specs) (void)ext->driver()->Sample(ext->GroupOf(run));
  const double sample_ms = Ms(Clock::now() - t0);
  for (const v1::TaskRun& run : specs) ext->Released(RunView{run, run_dir, v1::Task::EXITED, ProcessId{}, false});
  ext->Shutdown();
  std::printf("  cgroups (%s): Prepare p50 %.3f ms, p99 %.3f ms; sampling all %d groups %.3f ms\n",
              ext->version().c_str(), Percentile(prepare, 0.5), Percentile(prepare, 0.99), runs, sample_ms);
  std::printf("RESULT cgroup_prepare_p50_ms=%.3f\nRESULT cgroup_prepare_p99_ms=%.3f\n", Percentile(prepare, 0.5),
              Percentile(prepare, 0.99));
  std::printf("RESULT cgroup_sample_all_ms=%.3f\nRESULT cgroup_sample_runs=%d\n", sample_ms, runs);
}

int Main(int argc, char** argv) {
  int starts = 20, burst = 100;
  std::string shim, cgroups;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--starts") starts = std::max(1, std::atoi(argv[i + 1]));
    if (a == "--burst") burst = std::max(1, std::atoi(argv[i + 1]));
    if (a == "--shim") shim = argv[i + 1];
    if (a == "--cgroups") cgroups = argv[i + 1];
  }
  InitLogging("supervisor_bench", "", "warn");

  std::vector<double> base = BaselineSpawns(starts);

  const std::string root = absl::StrCat("/tmp/herd-bench-supervisor-", getpid());
  std::filesystem::create_directories(root);
  Supervisor::Options opts;
  opts.root_dir = root;
  opts.shim_path = shim;
  if (!cgroups.empty()) {
    CgroupOptions co;
    co.root = cgroups;
    co.parent = "herd-bench";
    co.agent_name = absl::StrCat("supervisor-", getpid());
    co.owner_dir = root;
    co.memory_reserve_bytes = 0;
    opts.extensions.push_back(CgroupExtension::Create(co));
  }
  absl::StatusOr<std::unique_ptr<Supervisor>> created = Supervisor::Create(opts);
  if (!created.ok()) {
    std::fprintf(stderr, "supervisor_bench: %s\n", created.status().ToString().c_str());
    return 1;
  }
  Supervisor& sup = **created;

  // One at a time.
  std::vector<v1::TaskRun> runs;
  std::vector<double> latency;
  for (int i = 0; i < starts; ++i) {
    runs.push_back(SleepRun(absl::StrCat("lat.", i)));
    const std::string id = runs.back().run_id();
    auto t0 = Clock::now();
    sup.SetDesired(runs);
    WaitUntil(sup, [&](const std::vector<v1::RunStatus>& all) { return Active(all, id); });
    latency.push_back(Ms(Clock::now() - t0));
  }
  sup.SetDesired({});
  WaitUntil(sup, [](const std::vector<v1::RunStatus>& all) { return all.empty(); });

  // A burst.
  runs.clear();
  for (int i = 0; i < burst; ++i) runs.push_back(SleepRun(absl::StrCat("burst.", i)));
  auto t0 = Clock::now();
  sup.SetDesired(runs);
  double slowest_observe = WaitUntil(sup, [&](const std::vector<v1::RunStatus>& all) {
    return std::count_if(all.begin(), all.end(),
                         [](const v1::RunStatus& s) { return s.phase() == v1::Task::ACTIVE; }) == burst;
  });
  const double burst_ms = std::max(1e-3, Ms(Clock::now() - t0));
  t0 = Clock::now();
  sup.SetDesired({});
  WaitUntil(sup, [](const std::vector<v1::RunStatus>& all) { return all.empty(); });
  const double stop_ms = Ms(Clock::now() - t0);
  for (const auto& ext : opts.extensions) ext->Shutdown();
  created->reset();

  std::printf("supervisor_bench: %d single starts, a burst of %d, %s\n", starts, burst,
              cgroups.empty() ? "no containers" : "in cgroups");
  std::printf("  %-46s %10s %10s %10s\n", "ms", "p50", "p99", "max");
  std::printf("  %-46s %10.2f %10.2f %10.2f\n", "start: SetDesired -> ACTIVE (under herd-shim)", Percentile(latency, 0.5),
              Percentile(latency, 0.99), Percentile(latency, 1));
  std::printf("  %-46s %10.2f %10.2f %10.2f\n", "baseline: posix_spawn -> exec'd (no shim)", Percentile(base, 0.5),
              Percentile(base, 0.99), Percentile(base, 1));
  std::printf("  burst: %d runs ACTIVE in %.0f ms (%.0f starts/s); slowest Observe() meanwhile %.2f ms\n", burst,
              burst_ms, burst * 1000.0 / burst_ms, slowest_observe);
  std::printf("  stop: %d runs gone in %.0f ms\n", burst, stop_ms);
  if (!cgroups.empty()) CgroupCosts(cgroups, root, std::max(burst, 50));
  std::filesystem::remove_all(root);
  std::printf("RESULT start_p50_ms=%.2f\nRESULT start_p99_ms=%.2f\nRESULT start_max_ms=%.2f\n", Percentile(latency, 0.5),
              Percentile(latency, 0.99), Percentile(latency, 1));
  std::printf("RESULT baseline_spawn_p50_ms=%.3f\nRESULT baseline_spawn_p99_ms=%.3f\n", Percentile(base, 0.5),
              Percentile(base, 0.99));
  std::printf("RESULT start_p50_over_baseline=%.1f\n",
              Percentile(latency, 0.5) / std::max(1e-3, Percentile(base, 0.5)));
  std::printf("RESULT burst_starts_per_s=%.0f\nRESULT burst_slowest_observe_ms=%.2f\nRESULT stop_all_ms=%.0f\n",
              burst * 1000.0 / burst_ms, slowest_observe, stop_ms);
  return 0;
}

}  // namespace
}  // namespace herd::agent

int main(int argc, char** argv) { return herd::agent::Main(argc, argv); }
