// The agent's cost and speed, on a real `herd agent` process with its
// containers on: what it costs to keep N idle tasks (its own RSS and CPU),
// and the task start latency from the moment the agent receives a task in a
// poll until the task's process has exec'd (herd-shim writes task.pid right
// after the exec succeeds). This benchmark plays the master: it sends Poll
// requests to the agent directly.
//
// Baseline, measured in the same run: posix_spawn of the same command
// (/bin/sleep) until it has exec'd, with no agent, shim or cgroup.
//
//   agent_bench [--tasks 100] [--starts 100] [--idle-seconds 30] [--herd PATH]
//               [--cgroup-root /sys/fs/cgroup|none]
// Prints a table and RESULT lines.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bench/proc_stats.h"
#include "herd/v1/agent.grpc.pb.h"
#include "rpc/rpc.h"

namespace {

using Clock = std::chrono::steady_clock;
double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

bool Exists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

// Resident memory of a process, in KiB (VmRSS).
long RssKib(pid_t pid) { return herd::bench::ProcStatusKib(pid, "VmRSS"); }
long CpuTicks(pid_t pid) { return herd::bench::ProcCpuTicks(pid); }

herd::v1::TaskRun MakeRun(int i) {
  herd::v1::TaskRun r;
  r.mutable_ref()->set_job("bench/idle");
  r.mutable_ref()->set_index(i);
  r.mutable_ref()->set_incarnation(1);
  r.set_run_id(absl::StrCat("bench.idle.", i, ".1"));
  r.add_argv("/bin/sleep");
  r.add_argv("3600");
  r.mutable_resources()->set_cpu_millis(10);
  r.mutable_resources()->set_memory_bytes(32ll << 20);
  r.set_grace_period_ms(1000);
  r.mutable_restart()->set_mode(herd::v1::RestartPolicy::ALWAYS);
  r.set_priority(200);
  r.set_appclass(herd::v1::LATENCY_SENSITIVE);
  r.set_user("bench");
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  int tasks = 100, starts = 100, idle_s = 30;
  std::string herd = "build/bin/herd", cgroup_root = "/sys/fs/cgroup";
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--tasks") tasks = std::atoi(argv[i + 1]);
    if (a == "--starts") starts = std::atoi(argv[i + 1]);
    if (a == "--idle-seconds") idle_s = std::atoi(argv[i + 1]);
    if (a == "--herd") herd = argv[i + 1];
    if (a == "--cgroup-root") cgroup_root = argv[i + 1];
  }
  extern char** environ;

  // Baseline: spawn /bin/sleep and wait until it has exec'd (its
  // /proc/PID/exe points at sleep).
  std::vector<double> base;
  for (int i = 0; i < starts; ++i) {
    auto t0 = Clock::now();
    pid_t pid;
    char* args[] = {const_cast<char*>("/bin/sleep"), const_cast<char*>("3600"), nullptr};
    if (posix_spawn(&pid, "/bin/sleep", nullptr, nullptr, args, environ) != 0) return 1;
    std::string exe = absl::StrCat("/proc/", pid, "/exe");
    char buf[256];
    for (;;) {
      ssize_t n = readlink(exe.c_str(), buf, sizeof(buf) - 1);
      if (n > 0 && std::string(buf, static_cast<size_t>(n)).find("sleep") != std::string::npos) break;
    }
    base.push_back(Ms(Clock::now() - t0));
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
  }

  std::string dir = absl::StrCat("/tmp/herd-bench-agent-", getpid());
  std::filesystem::create_directories(dir);
  std::string listen = "127.0.0.1:17471";
  std::string name = absl::StrCat("bench-", getpid());
  // The cell's PKI: the agent holds its machine's credential, the bench
  // polls as the master.
  auto ca = herd::pki::CreateAuthority("bench", time(nullptr), 24 * 3600);
  auto machine_cred = ca.ok() ? herd::pki::IssueCredential(*ca, {herd::pki::Role::kMachine, name}, time(nullptr), 24 * 3600)
                              : ca.status();
  auto master_cred = ca.ok() ? herd::pki::IssueCredential(*ca, {herd::pki::Role::kMaster, "master"}, time(nullptr), 24 * 3600)
                             : ca.status();
  if (!machine_cred.ok() || !master_cred.ok() ||
      !herd::pki::SaveCredential(dir + "/root/credentials.pem", *machine_cred).ok()) {
    std::fprintf(stderr, "cannot make credentials in %s\n", dir.c_str());
    return 1;
  }
  pid_t agent = 0;
  {
    std::vector<std::string> a = {herd,          "agent",        "--master",      "127.0.0.1:1",  // no master
                                  "--listen",    listen,         "--name",        name,
                                  "--root",      dir + "/root",  "--cgroup-root", cgroup_root,
                                  "--capacity",  "cpu=64,memory=64Gi", "--log-file", dir + "/agent.log"};
    std::vector<char*> av;
    for (auto& s : a) av.push_back(s.data());
    av.push_back(nullptr);
    // Its log goes to --log-file; keep the figures readable.
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    int spawned = posix_spawn(&agent, herd.c_str(), &fa, nullptr, av.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    if (spawned != 0) {
      std::fprintf(stderr, "cannot start %s\n", herd.c_str());
      return 1;
    }
  }
  auto stub = herd::v1::Agent::NewStub(herd::rpc::Channel(listen, *master_cred, herd::rpc::MachineIdentity(name)));
  herd::v1::PollRequest req;
  req.set_machine(name);
  auto poll = [&](herd::v1::PollResponse* resp) {
    auto ctx = herd::rpc::Context("", 10'000);
    return stub->Poll(ctx.get(), req, resp);
  };
  herd::v1::PollResponse resp;
  auto deadline = Clock::now() + std::chrono::seconds(20);
  while (!poll(&resp).ok()) {
    if (Clock::now() > deadline) {
      std::fprintf(stderr, "the agent did not answer (see %s/agent.log)\n", dir.c_str());
      kill(agent, SIGKILL);
      return 1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  long rss_empty = RssKib(agent);

  // Start latency: one new task per poll, the others still desired; measured
  // from just before the Poll is sent until its task.pid exists.
  std::vector<double> lat;
  int total = std::max(tasks, starts);
  for (int i = 0; i < total; ++i) {
    *req.add_desired() = MakeRun(i);
    std::string pidfile = absl::StrCat(dir, "/root/runs/", req.desired(i).run_id(), "/task.pid");
    auto t0 = Clock::now();
    grpc::Status st = poll(&resp);
    if (!st.ok()) {
      std::fprintf(stderr, "poll failed: %s\n", st.error_message().c_str());
      break;
    }
    auto give_up = Clock::now() + std::chrono::seconds(10);
    while (!Exists(pidfile) && Clock::now() < give_up) std::this_thread::sleep_for(std::chrono::microseconds(100));
    if (!Exists(pidfile)) {
      std::fprintf(stderr, "task %d did not start within 10 s\n", i);
      break;
    }
    if (i < starts) lat.push_back(Ms(Clock::now() - t0));
  }
  // Let every task settle, then keep N idle tasks with the agent polled
  // every 2 s (as a master would) and measure its CPU over the window.
  while (req.desired_size() > tasks) req.mutable_desired()->RemoveLast();
  for (int i = 0; i < 20; ++i) {
    poll(&resp);
    int active = 0;
    for (const auto& r : resp.runs()) active += r.phase() == herd::v1::Task::ACTIVE;
    if (active == tasks && resp.runs_size() == tasks) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  int active = 0;
  for (const auto& r : resp.runs()) active += r.phase() == herd::v1::Task::ACTIVE;
  long ticks0 = CpuTicks(agent);
  auto w0 = Clock::now();
  for (int s = 0; s < idle_s; s += 2) {
    poll(&resp);
    std::this_thread::sleep_for(std::chrono::seconds(2));
  }
  double window_s = Ms(Clock::now() - w0) / 1000;
  long ticks1 = CpuTicks(agent);
  long rss = RssKib(agent);
  double cpu_pct = 100.0 * static_cast<double>(ticks1 - ticks0) / static_cast<double>(sysconf(_SC_CLK_TCK)) / window_s;
  size_t reply_bytes = resp.ByteSizeLong();

  // Stop everything: an empty desired set, then the agent itself.
  req.clear_desired();
  for (int i = 0; i < 60; ++i) {
    poll(&resp);
    if (resp.runs_size() == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  kill(agent, SIGTERM);
  waitpid(agent, nullptr, 0);
  std::filesystem::remove_all(dir);

  std::printf("Agent with containers (cgroup root %s), %d idle tasks (%d active), %d starts\n", cgroup_root.c_str(),
              tasks, active, static_cast<int>(lat.size()));
  std::printf("  %-44s %10s %10s %10s\n", "", "p50 ms", "p99 ms", "max ms");
  std::printf("  %-44s %10.2f %10.2f %10.2f\n", "start: poll received -> task exec'd", Percentile(lat, 0.5),
              Percentile(lat, 0.99), Percentile(lat, 1));
  std::printf("  %-44s %10.2f %10.2f %10.2f\n", "baseline: posix_spawn -> exec'd (no agent)", Percentile(base, 0.5),
              Percentile(base, 0.99), Percentile(base, 1));
  std::printf("  agent RSS: %.1f MiB with no tasks, %.1f MiB with %d; CPU %.2f%% of a core over %.0f s idle "
              "(polled every 2 s; reply %zu bytes)\n",
              rss_empty / 1024.0, rss / 1024.0, tasks, cpu_pct, window_s, reply_bytes);
  std::printf("RESULT start_p50_ms=%.2f\nRESULT start_p99_ms=%.2f\nRESULT start_max_ms=%.2f\n", Percentile(lat, 0.5),
              Percentile(lat, 0.99), Percentile(lat, 1));
  std::printf("RESULT baseline_spawn_p50_ms=%.3f\nRESULT baseline_spawn_p99_ms=%.3f\n", Percentile(base, 0.5),
              Percentile(base, 0.99));
  std::printf("RESULT agent_rss_mib_idle_tasks=%.1f\nRESULT agent_rss_mib_no_tasks=%.1f\n", rss / 1024.0,
              rss_empty / 1024.0);
  std::printf("RESULT agent_cpu_pct_idle_tasks=%.2f\nRESULT idle_tasks=%d\nRESULT active_tasks=%d\n", cpu_pct, tasks,
              active);
  return active == tasks && static_cast<int>(lat.size()) == starts ? 0 : 1;
}
