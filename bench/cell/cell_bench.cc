#include "bench/cell/cell_bench.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "agent/server/hollow_agents.h"
#include "base/log.h"
#include "base/signals.h"
#include "base/resources.h"
#include "base/status.h"
#include "bench/proc_stats.h"
#include "base/units.h"
#include "herd/v1/api.grpc.pb.h"
#include "pki/pki.h"
#include "rpc/rpc.h"

extern char** environ;

namespace herd::bench {
namespace {

using SteadyClock = std::chrono::steady_clock;

double SinceMs(SteadyClock::time_point t0, SteadyClock::time_point t) {
  return std::chrono::duration<double, std::milli>(t - t0).count();
}

double Percentile(std::vector<double>& v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5))];
}

long StatusKib(pid_t pid, const char* field) { return ProcStatusKib(pid, field); }
double CpuSeconds(pid_t pid) { return ProcCpuSeconds(pid); }

// The herd binary to run cells with: the one beside this herd-bench.
std::string SelfExe() {
  std::error_code ec;
  const std::filesystem::path p = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? "herd" : (p.parent_path() / "herd").string();
}

// One measured cell: its figures.
struct Figures {
  bool ok = false;
  std::string error;
  int64_t tasks = 0;
  int64_t running = 0;  // tasks seen running
  double seconds = 0;   // first submit to last task running
  double submit_seconds = 0;
  double tasks_per_min = 0;
  double p50_ms = 0, p99_ms = 0, max_ms = 0;
  double placed_p50_ms = 0, placed_p99_ms = 0;    // submit -> placed
  double started_p50_ms = 0, started_p99_ms = 0;  // placed -> running
  double delivered_p50_ms = 0, delivered_p99_ms = 0;  // placed -> the agent reported it STARTING
  double poll_p50_ms = 0, poll_p99_ms = 0;
  int64_t polls = 0, full_polls = 0, poll_failures = 0;
  double master_cpu_s = 0, master_cpu_cores = 0;
  double master_peak_rss_mib = 0;
  double master_rss_mib = 0;  // at the end
  int64_t machines_down = 0;
  int64_t lost = 0;
  int64_t starts = 0;  // hollow starts over all agents
  int64_t rings = 0;
  double hollow_peak_rss_mib = 0;
  double setup_seconds = 0;  // agents registered and up
};

class Cell {
 public:
  Cell(const CellBenchOptions& o, std::string full_poll_interval)
      : o_(o), full_poll_interval_(std::move(full_poll_interval)) {}
  ~Cell() { Teardown(); }

  Figures Run() {
    Figures f;
    f.tasks = o_.tasks;
    if (absl::Status st = Setup(&f); !st.ok()) {
      f.error = std::string(st.message());
      return f;
    }
    Measure(&f);
    return f;
  }

 private:
  absl::Status Setup(Figures* f) {
    const auto t0 = SteadyClock::now();
    char tmpl[] = "/tmp/herd-bench-cell-XXXXXX";
    if (mkdtemp(tmpl) == nullptr) return absl::InternalError("cannot make a temporary directory");
    dir_ = tmpl;
    const int64_t now_s = time(nullptr);
    HERD_ASSIGN_OR_RETURN(ca_, pki::CreateAuthority("bench", now_s, 30 * 24 * 3600));
    HERD_RETURN_IF_ERROR(pki::SaveAuthority(dir_ + "/pki", ca_));
    HERD_ASSIGN_OR_RETURN(pki::Credential master, pki::IssueCredential(ca_, rpc::MasterIdentity(), now_s, 7 * 86400));
    std::filesystem::create_directories(dir_ + "/master");
    HERD_RETURN_IF_ERROR(pki::SaveCredential(dir_ + "/master/credentials.pem", master));
    HERD_ASSIGN_OR_RETURN(admin_, pki::IssueCredential(ca_, pki::Subject{pki::Role::kUser, "bench", true}, now_s,
                                                       7 * 86400));
    HERD_RETURN_IF_ERROR(StartMaster());
    stub_ = v1::Herd::NewStub(rpc::Channel(master_addr_, admin_, rpc::MasterIdentity()));

    HERD_RETURN_IF_ERROR(StartHollowProcesses());
    std::printf("  %d hollow agents in %zu processes; registering with the master at %s\n", o_.agents,
                hollow_pids_.size(), master_addr_.c_str());
    std::fflush(stdout);
    // Every machine registered and UP in the master.
    const auto deadline = SteadyClock::now() + std::chrono::seconds(std::max(120, o_.agents / 20));
    int up = 0;
    auto said = SteadyClock::now();
    while (SteadyClock::now() < deadline) {
      if (SteadyClock::now() - said > std::chrono::seconds(10)) {
        said = SteadyClock::now();
        std::printf("  %d of %d machines up, %lld registered (%.0f s)\n", up, o_.agents,
                    static_cast<long long>(ReadHollowStats().registered), SinceMs(t0, said) / 1000);
        std::fflush(stdout);
      }
      v1::CellInfo info;
      auto ctx = rpc::Context("", 10'000);
      if (stub_->GetCell(ctx.get(), v1::GetCellRequest(), &info).ok()) {
        up = info.machines_up();
        if (up == o_.agents) break;
      }
      if (!MasterAlive()) return absl::InternalError(absl::StrCat("the master exited; see ", dir_, "/master.log"));
      if (!HollowAlive()) return absl::InternalError(absl::StrCat("a hollow agent process exited; see ", dir_, "/hollow-*.out"));
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    if (up != o_.agents) {
      return absl::DeadlineExceededError(
          absl::StrCat("only ", up, " of ", o_.agents, " machines came up; see ", dir_, "/master.log"));
    }
    f->setup_seconds = SinceMs(t0, SteadyClock::now()) / 1000;
    return absl::OkStatus();
  }

  struct HollowStats {
    int64_t registered = 0, starts = 0, live = 0, rings = 0;
  };

  static absl::StatusOr<pid_t> Spawn(const std::vector<std::string>& args, const std::string& out) {
    std::vector<char*> argv;
    std::vector<std::string> copy = args;
    for (auto& a : copy) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    pid_t pid = -1;
    const int rc = posix_spawn(&pid, copy[0].c_str(), &fa, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) return absl::InternalError(absl::StrCat("cannot start ", copy[0], ": ", strerror(rc)));
    return pid;
  }

  std::string Herd() const { return o_.herd.empty() ? SelfExe() : o_.herd; }

  absl::Status StartHollowProcesses() {
    const int per = std::max(1, o_.agents_per_process);
    const int width = static_cast<int>(absl::StrCat(o_.agents - 1).size());
    for (int first = 0, k = 0; first < o_.agents; first += per, ++k) {
      const int count = std::min(per, o_.agents - first);
      const std::string stats = absl::StrCat(dir_, "/hollow-", k, ".stats");
      HERD_ASSIGN_OR_RETURN(
          pid_t pid,
          Spawn({Herd(), "bench", "hollow", "--master", master_addr_, "--ca", dir_ + "/pki", "--first",
                 absl::StrCat(first), "--count", absl::StrCat(count), "--width", absl::StrCat(width),
                 "--agents-per-port", absl::StrCat(o_.agents_per_port), "--contact-threads",
                 absl::StrCat(std::max(1, o_.contact_threads * count / o_.agents)), "--capacity", o_.capacity,
                 "--start-ms", absl::StrCat(o_.start_ms), "--parallel-starts", absl::StrCat(o_.max_parallel_starts),
                 "--stats", stats},
                absl::StrCat(dir_, "/hollow-", k, ".out")));
      hollow_pids_.push_back(pid);
      hollow_stats_.push_back(stats);
    }
    return absl::OkStatus();
  }

  HollowStats ReadHollowStats() const {
    HollowStats sum;
    for (const std::string& f : hollow_stats_) {
      std::ifstream in(f);
      HollowStats h;
      if (in >> h.registered >> h.starts >> h.live >> h.rings) {
        sum.registered += h.registered;
        sum.starts += h.starts;
        sum.live += h.live;
        sum.rings += h.rings;
      }
    }
    return sum;
  }

  bool HollowAlive() {
    for (pid_t& pid : hollow_pids_) {
      int status;
      if (pid > 0 && waitpid(pid, &status, WNOHANG) == pid) {
        pid = -1;
        return false;
      }
    }
    return true;
  }

  // Peak resident memory of the hollow agents' processes, together.
  double HollowPeakRssMib() const {
    long kib = 0;
    for (pid_t pid : hollow_pids_) kib += pid > 0 ? std::max(0L, StatusKib(pid, "VmHWM")) : 0;
    return static_cast<double>(kib) / 1024;
  }

  absl::Status StartMaster() {
    const std::string out = dir_ + "/master.out";
    HERD_ASSIGN_OR_RETURN(master_pid_, Spawn({Herd(), "master", "--data", dir_ + "/master", "--listen", "127.0.0.1:0",
                                              "--ca", dir_ + "/pki", "--poll-interval", o_.poll_interval,
                                              "--full-poll-interval", full_poll_interval_, "--log-file",
                                              dir_ + "/master.log"},
                                             out));
    const std::string addr_file = dir_ + "/master/master.addr";
    for (int i = 0; i < 600; ++i) {
      std::ifstream in(addr_file);
      if (in && std::getline(in, master_addr_) && !master_addr_.empty()) return absl::OkStatus();
      if (!MasterAlive()) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return absl::InternalError(absl::StrCat("the master did not start; see ", out, " and ", dir_, "/master.log"));
  }

  bool MasterAlive() {
    if (master_pid_ <= 0) return false;
    int status;
    if (waitpid(master_pid_, &status, WNOHANG) == master_pid_) {
      master_pid_ = -1;
      return false;
    }
    return true;
  }

  void Measure(Figures* f) {
    // The change feed from now on: placements, tasks running, machines down.
    v1::CellInfo start;
    {
      auto ctx = rpc::Context("", 10'000);
      stub_->GetCell(ctx.get(), v1::GetCellRequest(), &start);
    }
    const int jobs = static_cast<int>((o_.tasks + o_.tasks_per_job - 1) / o_.tasks_per_job);
    submitted_at_.assign(jobs, SteadyClock::time_point());
    std::atomic<bool> watching{true};
    grpc::ClientContext watch_ctx;
    std::thread watcher([&] {
      v1::WatchRequest req;
      req.set_from_revision(start.revision() + 1);
      auto reader = stub_->Watch(&watch_ctx, req);
      v1::WatchResponse resp;
      while (reader->Read(&resp)) {
        const auto now = SteadyClock::now();
        std::lock_guard l(mu_);
        for (const v1::Mutation& m : resp.mutations()) {
          if (m.has_task_scheduled()) {
            const v1::TaskScheduled& t = m.task_scheduled();
            scheduled_at_.try_emplace(absl::StrCat(t.job(), "#", t.index()), now);
          } else if (m.has_task_observed() && m.task_observed().phase() == v1::Task::STARTING) {
            const v1::TaskRef& t = m.task_observed().task();
            delivered_at_.try_emplace(absl::StrCat(t.job(), "#", t.index()), now);
          } else if (m.has_task_observed() && m.task_observed().phase() == v1::Task::ACTIVE) {
            const v1::TaskRef& t = m.task_observed().task();
            auto [it, added] = running_at_.try_emplace(absl::StrCat(t.job(), "#", t.index()), now);
            if (added) last_running_ = now;
          } else if (m.has_machine_down()) {
            ++machines_down_;
            std::fprintf(stderr, "  machine %s marked down: %s\n", m.machine_down().name().c_str(),
                         m.machine_down().reason().c_str());
          } else if (m.has_task_lost() || m.has_task_rescheduled()) {
            ++lost_;
          }
        }
      }
      watching = false;
    });
    // The master's CPU while the burst lasts.
    const double cpu0 = CpuSeconds(master_pid_);
    const auto t0 = SteadyClock::now();
    std::atomic<int> next_job{0};
    std::atomic<bool> submit_failed{false};
    std::string submit_error;
    std::vector<std::thread> submitters;
    for (int s = 0; s < std::max(1, o_.submitters); ++s) {
      submitters.emplace_back([&] {
        while (!submit_failed) {
          const int j = next_job++;
          if (j >= jobs) return;
          v1::SubmitRequest req;
          req.set_request_id(absl::StrCat("bench-", j));
          v1::JobSpec* spec = req.add_jobs();
          spec->set_name(absl::StrCat("b", j));
          spec->set_user("bench");
          spec->set_priority(100);
          spec->set_task_count(static_cast<int32_t>(std::min<int64_t>(o_.tasks_per_job, o_.tasks - int64_t{j} * o_.tasks_per_job)));
          spec->mutable_task()->add_command("sleep");
          spec->mutable_task()->add_command("3600");
          spec->mutable_task()->mutable_resources()->set_cpu_millis(o_.task_cpu_millis);
          spec->mutable_task()->mutable_resources()->set_memory_bytes(o_.task_memory_mib << 20);
          spec->set_grace_period_ms(1000);
          if (o_.rate > 0) {
            // A steady arrival: job j goes at t0 + j * tasks_per_job / rate.
            std::this_thread::sleep_until(
                t0 + std::chrono::microseconds(static_cast<int64_t>(1e6 * j * o_.tasks_per_job / o_.rate)));
          }
          submitted_at_[j] = SteadyClock::now();
          for (int attempt = 0;; ++attempt) {
            v1::SubmitResponse resp;
            auto ctx = rpc::Context("", 60'000);
            grpc::Status st = stub_->Submit(ctx.get(), req, &resp);
            if (st.ok()) break;
            const bool transient = st.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED ||
                                   st.error_code() == grpc::StatusCode::UNAVAILABLE ||
                                   st.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED;
            if (!transient || attempt >= 20) {
              std::lock_guard l(mu_);
              submit_error = absl::StrCat("submit of job b", j, ": ", st.error_message());
              submit_failed = true;
              return;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(50 << std::min(attempt, 5)));
          }
        }
      });
    }
    for (auto& t : submitters) t.join();
    f->submit_seconds = SinceMs(t0, SteadyClock::now()) / 1000;
    // Until every task runs, or nothing moves for a while, or the timeout.
    const auto deadline = t0 + std::chrono::seconds(o_.timeout_s);
    size_t last_count = 0;
    auto last_progress = SteadyClock::now();
    while (!submit_failed && watching && SteadyClock::now() < deadline) {
      size_t n;
      {
        std::lock_guard l(mu_);
        n = running_at_.size();
      }
      if (static_cast<int64_t>(n) >= o_.tasks) break;
      if (n != last_count) {
        last_count = n;
        last_progress = SteadyClock::now();
      } else if (SteadyClock::now() - last_progress > std::chrono::seconds(180)) {
        break;
      }
      if (!MasterAlive()) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    const double cpu1 = CpuSeconds(master_pid_);
    v1::CellInfo end;
    {
      auto ctx = rpc::Context("", 10'000);
      stub_->GetCell(ctx.get(), v1::GetCellRequest(), &end);
    }
    f->master_peak_rss_mib = static_cast<double>(StatusKib(master_pid_, "VmHWM")) / 1024;
    f->master_rss_mib = static_cast<double>(StatusKib(master_pid_, "VmRSS")) / 1024;
    watch_ctx.TryCancel();
    watcher.join();

    std::lock_guard l(mu_);
    f->running = static_cast<int64_t>(running_at_.size());
    f->ok = !submit_failed && f->running == o_.tasks;
    if (submit_failed) f->error = submit_error;
    if (!f->ok && f->error.empty()) {
      f->error = absl::StrCat("only ", f->running, " of ", o_.tasks, " tasks ran; see ", dir_, "/master.log");
      o_keep_ = true;
    }
    f->seconds = f->running > 0 ? SinceMs(t0, last_running_) / 1000 : 0;
    f->tasks_per_min = f->seconds > 0 ? static_cast<double>(f->running) / f->seconds * 60 : 0;
    std::vector<double> lat;
    lat.reserve(running_at_.size());
    for (const auto& [key, at] : running_at_) {
      const std::string job = key.substr(0, key.find('#'));
      const int j = std::atoi(job.c_str() + job.find("/b") + 2);
      if (j >= 0 && j < jobs) lat.push_back(SinceMs(submitted_at_[j], at));
    }
    // Where the time goes: waiting to be placed, then placed to running.
    std::vector<double> to_placed, placed_to_running;
    for (const auto& [key, at] : running_at_) {
      auto it = scheduled_at_.find(key);
      if (it == scheduled_at_.end()) continue;
      const std::string job = key.substr(0, key.find('#'));
      const int j = std::atoi(job.c_str() + job.find("/b") + 2);
      if (j >= 0 && j < jobs) to_placed.push_back(SinceMs(submitted_at_[j], it->second));
      placed_to_running.push_back(SinceMs(it->second, at));
    }
    std::vector<double> to_delivered;
    for (const auto& [key, at] : delivered_at_) {
      auto it = scheduled_at_.find(key);
      if (it != scheduled_at_.end()) to_delivered.push_back(SinceMs(it->second, at));
    }
    f->delivered_p50_ms = Percentile(to_delivered, 0.5);
    f->delivered_p99_ms = Percentile(to_delivered, 0.99);
    f->placed_p50_ms = Percentile(to_placed, 0.5);
    f->placed_p99_ms = Percentile(to_placed, 0.99);
    f->started_p50_ms = Percentile(placed_to_running, 0.5);
    f->started_p99_ms = Percentile(placed_to_running, 0.99);
    f->p50_ms = Percentile(lat, 0.5);
    f->p99_ms = Percentile(lat, 0.99);
    f->max_ms = lat.empty() ? 0 : lat.back();
    f->poll_p50_ms = end.link().latency_p50_ms();
    f->poll_p99_ms = end.link().latency_p99_ms();
    f->polls = end.link().polls() - start.link().polls();
    f->full_polls = end.link().full_polls() - start.link().full_polls();
    f->poll_failures = end.link().failures() - start.link().failures();
    f->master_cpu_s = cpu1 - cpu0;
    f->master_cpu_cores = f->seconds > 0 ? f->master_cpu_s / (SinceMs(t0, SteadyClock::now()) / 1000) : 0;
    f->machines_down = machines_down_;
    f->lost = lost_;
    // Figures the hollow processes wrote after the burst ended.
    const auto written_after = std::filesystem::file_time_type::clock::now();
    for (int i = 0; i < 100; ++i) {
      bool fresh = true;
      for (const std::string& file : hollow_stats_) {
        std::error_code ec;
        fresh &= std::filesystem::last_write_time(file, ec) > written_after && !ec;
      }
      if (fresh) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    const HollowStats h = ReadHollowStats();
    f->starts = h.starts;
    f->rings = h.rings;
    f->hollow_peak_rss_mib = HollowPeakRssMib();
  }

  void Teardown() {
    if (master_pid_ > 0) {
      kill(master_pid_, SIGTERM);
      for (int i = 0; i < 300 && MasterAlive(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
      if (master_pid_ > 0) {
        kill(master_pid_, SIGKILL);
        waitpid(master_pid_, nullptr, 0);
        master_pid_ = -1;
      }
    }
    for (pid_t pid : hollow_pids_) {
      if (pid > 0) kill(pid, SIGTERM);
    }
    for (pid_t& pid : hollow_pids_) {
      if (pid <= 0) continue;
      for (int i = 0; i < 300; ++i) {
        if (waitpid(pid, nullptr, WNOHANG) == pid) {
          pid = -1;
          break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
      if (pid > 0) {
        kill(pid, SIGKILL);
        waitpid(pid, nullptr, 0);
        pid = -1;
      }
    }
    if (!dir_.empty()) {
      if (o_.keep || o_keep_) {
        std::printf("  data kept in %s\n", dir_.c_str());
      } else {
        std::error_code ec;
        std::filesystem::remove_all(dir_, ec);
      }
      dir_.clear();
    }
  }

  const CellBenchOptions& o_;
  const std::string full_poll_interval_;
  bool o_keep_ = false;
  std::string dir_;
  pki::Authority ca_;
  pki::Credential admin_;
  pid_t master_pid_ = -1;
  std::string master_addr_;
  std::unique_ptr<v1::Herd::Stub> stub_;
  std::vector<pid_t> hollow_pids_;
  std::vector<std::string> hollow_stats_;
  std::vector<SteadyClock::time_point> submitted_at_;
  std::mutex mu_;
  absl::flat_hash_map<std::string, SteadyClock::time_point> running_at_;
  absl::flat_hash_map<std::string, SteadyClock::time_point> scheduled_at_;
  absl::flat_hash_map<std::string, SteadyClock::time_point> delivered_at_;  // seen STARTING
  SteadyClock::time_point last_running_;
  int64_t machines_down_ = 0;
  int64_t lost_ = 0;
};

void Print(const std::string& label, const std::string& prefix, const Figures& f) {
  std::printf("%s: %lld of %lld tasks running in %.1f s (submitted in %.1f s) = %.0f tasks/min\n", label.c_str(),
              static_cast<long long>(f.running), static_cast<long long>(f.tasks), f.seconds, f.submit_seconds,
              f.tasks_per_min);
  std::printf("  submit->running p50 %.0f ms, p99 %.0f ms, max %.0f ms (submit->placed p50 %.0f p99 %.0f; "
              "placed->running p50 %.0f p99 %.0f, of which placed->at the agent p50 %.0f p99 %.0f)\n",
              f.p50_ms, f.p99_ms, f.max_ms, f.placed_p50_ms, f.placed_p99_ms, f.started_p50_ms, f.started_p99_ms,
              f.delivered_p50_ms, f.delivered_p99_ms);
  std::printf("  polls %lld (%lld full, %lld failed), round trip p50 %.1f ms p99 %.1f ms; doorbells %lld\n",
              static_cast<long long>(f.polls), static_cast<long long>(f.full_polls),
              static_cast<long long>(f.poll_failures), f.poll_p50_ms, f.poll_p99_ms, static_cast<long long>(f.rings));
  std::printf("  master: %.1f CPU-s (%.2f cores), peak RSS %.0f MiB (%.0f MiB at the end); machines marked down %lld; tasks lost or moved "
              "%lld; hollow starts %lld\n",
              f.master_cpu_s, f.master_cpu_cores, f.master_peak_rss_mib, f.master_rss_mib,
              static_cast<long long>(f.machines_down),
              static_cast<long long>(f.lost), static_cast<long long>(f.starts));
  if (!f.error.empty()) std::printf("  FAILED: %s\n", f.error.c_str());
  auto r = [&prefix](const char* name, double v) { std::printf("RESULT %s%s=%.6g\n", prefix.c_str(), name, v); };
  r("tasks_per_min", f.tasks_per_min);
  r("submit_to_running_p50_ms", f.p50_ms);
  r("submit_to_running_p99_ms", f.p99_ms);
  r("submit_to_placed_p50_ms", f.placed_p50_ms);
  r("submit_to_placed_p99_ms", f.placed_p99_ms);
  r("placed_to_running_p50_ms", f.started_p50_ms);
  r("placed_to_running_p99_ms", f.started_p99_ms);
  r("poll_latency_p50_ms", f.poll_p50_ms);
  r("poll_latency_p99_ms", f.poll_p99_ms);
  r("polls", static_cast<double>(f.polls));
  r("full_polls", static_cast<double>(f.full_polls));
  r("poll_failures", static_cast<double>(f.poll_failures));
  r("master_cpu_seconds", f.master_cpu_s);
  r("master_cpu_cores", f.master_cpu_cores);
  r("master_peak_rss_mib", f.master_peak_rss_mib);
  r("master_rss_mib", f.master_rss_mib);
  r("machines_marked_down", static_cast<double>(f.machines_down));
  r("tasks_lost_or_moved", static_cast<double>(f.lost));
  r("tasks_started_more_than_once", static_cast<double>(std::max<int64_t>(0, f.starts - f.running)));
  r("tasks_not_running", static_cast<double>(f.tasks - f.running));
  r("setup_seconds", f.setup_seconds);
  r("hollow_agents_peak_rss_mib", f.hollow_peak_rss_mib);
  std::fflush(stdout);
}

}  // namespace

int RunCellBench(const CellBenchOptions& o) {
  InitLogging("bench", "", "warning");
  // Thousands of channels and connections: raise the descriptor limit (the
  // master inherits it).
  std::printf("herd bench cell: %d hollow agents, %lld tasks in jobs of %d, polls every %s (full every %s), "
              "machines %s, tasks cpu=%lldm memory=%lldMi\n",
              o.agents, static_cast<long long>(o.tasks), o.tasks_per_job, o.poll_interval.c_str(),
              o.full_poll_interval.c_str(), o.capacity.c_str(), static_cast<long long>(o.task_cpu_millis),
              static_cast<long long>(o.task_memory_mib));
  std::fflush(stdout);
  // Each hollow agent holds a channel to the master and a connection from
  // it: two descriptors per agent here, and two per machine in the master.
  rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
    const rlim_t want = static_cast<rlim_t>(4) * o.agents + 4096;
    if (rl.rlim_max < want) {
      rlimit raised{want, want};  // root (CAP_SYS_RESOURCE) may raise the hard limit
      if (setrlimit(RLIMIT_NOFILE, &raised) == 0) rl = raised;
    }
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
    if (rl.rlim_cur < want) {
      std::printf("  warning: %llu descriptors allowed, %llu wanted for %d agents (raise ulimit -n)\n",
                  static_cast<unsigned long long>(rl.rlim_cur), static_cast<unsigned long long>(want), o.agents);
    }
  }
  bool ok;
  {
    Cell cell(o, o.full_poll_interval);
    Figures f = cell.Run();
    Print("delta polls", "", f);
    ok = f.ok;
  }
  if (o.baseline == "full-polls") {
    Cell cell(o, "0");
    Figures f = cell.Run();
    Print("baseline, every poll full", "full_polls_", f);
  }
  return ok ? 0 : 1;
}

int RunHollowAgents(const HollowProcessOptions& o) {
  InitLogging("hollow", "", "warning");
  InstallStopSignalHandlers(Hangup::kIgnore);
  rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
  absl::StatusOr<pki::Authority> ca = pki::LoadAuthority(o.ca_dir);
  if (!ca.ok()) {
    std::fprintf(stderr, "herd bench hollow: %s\n", std::string(ca.status().message()).c_str());
    return 1;
  }
  agent::HollowOptions h;
  h.agents = o.count;
  h.first = o.first;
  h.width = o.width;
  h.agents_per_port = o.agents_per_port;
  h.contact_threads = o.contact_threads;
  h.master = o.master;
  absl::StatusOr<ResourceVector> capacity = ParseResourceList(o.capacity);
  if (!capacity.ok()) {
    std::fprintf(stderr, "herd bench hollow: --capacity: %s\n", std::string(capacity.status().message()).c_str());
    return 2;
  }
  h.capacity = *capacity;
  h.runtime.start_ms = o.start_ms;
  h.runtime.max_parallel_starts = o.max_parallel_starts;
  absl::StatusOr<std::unique_ptr<agent::HollowAgents>> agents = agent::HollowAgents::Start(h, *ca);
  if (!agents.ok()) {
    std::fprintf(stderr, "herd bench hollow: %s\n", std::string(agents.status().message()).c_str());
    return 1;
  }
  auto write_stats = [&] {
    if (o.stats_file.empty()) return;
    const std::string tmp = o.stats_file + ".tmp";
    {
      std::ofstream out(tmp);
      out << (*agents)->registered() << " " << (*agents)->starts() << " " << (*agents)->live() << " "
          << (*agents)->rings() << "\n";
    }
    std::rename(tmp.c_str(), o.stats_file.c_str());
  };
  while (WaitForStopSignal(500) == 0) write_stats();
  write_stats();
  agents->reset();
  return 0;
}

}  // namespace herd::bench
