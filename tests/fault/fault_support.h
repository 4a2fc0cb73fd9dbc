// Shared by the fault suite's tests (tests/fault): the stream of writes the
// faults land in, the check that no acknowledged write was lost, and the
// count of task indexes that run on more than one machine, from the agents'
// real processes. Test-only; header-only.
#pragma once

#include <gtest/gtest.h>
#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <ctime>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "harness/harness.h"

namespace herd::fault {

using namespace std::chrono_literals;

// Faults per scenario: `short_mode` (CTest), or HERD_FAULT_ROUNDS (the long
// mode, for the note).
inline int Rounds(int short_mode) {
  const char* e = std::getenv("HERD_FAULT_ROUNDS");
  int n = e ? std::atoi(e) : 0;
  return n > 0 ? n : short_mode;
}

// A job of `tasks` sleepers owned by alice.
inline std::string JobSpec(const std::string& name, int tasks) {
  return absl::StrCat("name: ", name, "\nuser: alice\ntasks: ", tasks,
                      "\ncommand: [\"/bin/sleep\", \"3600\"]\nresources: {cpu: 1m, memory: 1Mi}\n");
}

// Streams one-task jobs (w0, w1, ...) through the CLI until stopped, and
// records those whose submit was acknowledged (exit 0). With a
// `min_interval`, at most one submit starts per interval: the stream's
// arrival rate, so that a long run does not fill the cell.
class WriteStream {
 public:
  explicit WriteStream(const harness::Cell* cell, std::chrono::milliseconds min_interval = 0ms)
      : cell_(cell), min_interval_(min_interval) {}
  ~WriteStream() { Stop(); }

  void Start() {
    thread_ = std::thread([this] {
      for (int i = 0;; ++i) {
        const auto next = std::chrono::steady_clock::now() + min_interval_;
        const std::string name = absl::StrCat("w", i);
        cell_->WriteSpec(name + ".yaml", JobSpec(name, 1));
        harness::RunResult r = cell_->Herd({"submit", cell_->dir().Sub(name + ".yaml")}, 10s);
        std::unique_lock l(mu_);
        ++attempts_;
        if (r.exit_code == 0) {
          acked_.push_back(name);
        } else if (failures_.size() < 8) {
          failures_.push_back(name + ": " + r.Describe());  // what a refused or failed submit said
        }
        if (stop_cv_.wait_until(l, next, [this] { return stop_; })) return;
      }
    });
  }
  // Waits until `k` more submits were tried (acknowledged or not): faults
  // land at points of the write stream counted in writes, not in time, so a
  // slow machine moves the faults with the writes.
  void AfterWrites(int k) {
    int target;
    {
      std::lock_guard l(mu_);
      target = attempts_ + k;
    }
    ASSERT_TRUE(harness::Eventually([&] {
      std::lock_guard l(mu_);
      return attempts_ >= target;
    }, 120s)) << "the writer made no progress";
  }
  int RandomWrites(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  void Stop() {
    {
      std::lock_guard l(mu_);
      stop_ = true;
    }
    stop_cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }
  int attempts() {
    std::lock_guard l(mu_);
    return attempts_;
  }
  std::vector<std::string> acked() {
    std::lock_guard l(mu_);
    return acked_;
  }
  // The first few submits that were not acknowledged, and why.
  std::vector<std::string> failures() {
    std::lock_guard l(mu_);
    return failures_;
  }

 private:
  const harness::Cell* const cell_;
  const std::chrono::milliseconds min_interval_;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable stop_cv_;
  bool stop_ = false;
  int attempts_ = 0;
  std::vector<std::string> acked_;
  std::vector<std::string> failures_;
  std::mt19937 rng_{std::random_device{}()};
};

// Every job the leader has, dead ones too, by id ("alice/w3"); retried while
// no leader answers.
inline absl::StatusOr<std::map<std::string, v1::Job>> AllJobs(const harness::Cell& cell) {
  absl::StatusOr<v1::ListJobsResponse> r;
  harness::Eventually([&] { return (r = cell.Jobs(/*include_dead=*/true)).ok(); }, 60s);
  if (!r.ok()) return r.status();
  std::map<std::string, v1::Job> out;
  for (const v1::Job& j : r->jobs()) out[j.id()] = j;
  return out;
}

// How many of the acknowledged jobs (alice/NAME, one task each) the leader
// does not have; each is a test failure.
inline int CountLost(const harness::Cell& cell, const std::vector<std::string>& acked) {
  absl::StatusOr<std::map<std::string, v1::Job>> jobs = AllJobs(cell);
  if (!jobs.ok()) {
    ADD_FAILURE() << "no leader lists the jobs: " << jobs.status();
    return static_cast<int>(acked.size());
  }
  int lost = 0;
  for (const std::string& j : acked) {
    auto it = jobs->find("alice/" + j);
    if (it == jobs->end() || it->second.pending() + it->second.running() + it->second.dead() != 1) {
      ++lost;
      ADD_FAILURE() << "acknowledged job alice/" << j << " is gone"
                    << (it == jobs->end() ? "" : ": it does not have its one task");
    }
  }
  return lost;
}

// Waits until every job of `jobs` (id -> task count) has all its tasks
// running; fails naming those that do not.
inline void WaitAllRunning(const harness::Cell& cell, const std::map<std::string, int>& jobs,
                           std::chrono::milliseconds timeout = 180s) {
  std::string behind;
  const bool ok = harness::Eventually([&] {
    absl::StatusOr<std::map<std::string, v1::Job>> have = AllJobs(cell);
    if (!have.ok()) return false;
    behind.clear();
    for (const auto& [id, n] : jobs) {
      auto it = have->find(id);
      if (it == have->end() || it->second.running() != n) {
        absl::StrAppend(&behind, " ", id,
                        it == have->end() ? " (missing)" : absl::StrCat(" (", it->second.running(), "/", n, ")"));
      }
    }
    return behind.empty();
  }, timeout, 200ms);
  EXPECT_TRUE(ok) << "jobs whose tasks do not all run:" << behind;
}

// The task processes the agents really run, by "USER/JOB/INDEX": which
// machine, which pid (found under each agent's root, by the environment the
// agent gives every task).
struct TaskProcess {
  std::string machine;
  pid_t pid = 0;
  std::string run_id;
};
inline std::map<std::string, std::vector<TaskProcess>> TaskProcesses(const harness::Cell& cell) {
  std::map<std::string, std::vector<TaskProcess>> out;
  for (const std::string& machine : cell.AgentNames()) {
    for (const harness::ProcInfo& p : harness::ProcessesUnder(cell.AgentRoot(machine))) {
      if (p.cmdline.empty() || p.cmdline[0] != "/bin/sleep") continue;  // shims, helpers
      std::optional<std::string> job = harness::ProcEnv(p.pid, "HERD_JOB");
      std::optional<std::string> index = harness::ProcEnv(p.pid, "HERD_TASK_INDEX");
      if (!job || !index) continue;
      out[absl::StrCat(*job, "/", *index)].push_back(
          {machine, p.pid, harness::ProcEnv(p.pid, "HERD_RUN_ID").value_or("")});
    }
  }
  return out;
}

// Task indexes with more than one live process (on two machines, or twice
// on one); "alice/web/3 on m1 (pid 10, run alice.web.3.1), m2 (...)" each.
inline std::vector<std::string> DoubleRunning(const std::map<std::string, std::vector<TaskProcess>>& procs) {
  std::vector<std::string> out;
  for (const auto& [key, ps] : procs) {
    if (ps.size() < 2) continue;
    std::string s = key + " on";
    for (const auto& p : ps) absl::StrAppend(&s, " ", p.machine, " (pid ", p.pid, ", run ", p.run_id, ")");
    out.push_back(s);
  }
  return out;
}

// The lines of a process's log written by its latest start (after the
// harness's last "==== harness: starting" banner).
inline std::vector<std::string> LatestRunLines(const std::string& log) {
  std::string text = harness::ReadFileOrEmpty(log);
  size_t banner = text.rfind("==== harness: starting");
  if (banner != std::string::npos) text = text.substr(banner);
  return absl::StrSplit(text, '\n', absl::SkipEmpty());
}

// The time a Herd log line was written ("2026-01-02T03:04:05.678 I ..."),
// in ms on the local clock's calendar (comparable with WallMs()).
inline std::optional<int64_t> LogLineMs(const std::string& line) {
  std::tm tm{};
  const char* rest = strptime(line.c_str(), "%Y-%m-%dT%H:%M:%S", &tm);
  int ms = 0;
  if (rest == nullptr || *rest != '.' || !absl::SimpleAtoi(std::string(rest + 1, 3), &ms)) return std::nullopt;
  return static_cast<int64_t>(timegm(&tm)) * 1000 + ms;
}
// Now, in the same terms as LogLineMs.
inline int64_t WallMs() {
  const auto now = std::chrono::system_clock::now();
  const time_t s = std::chrono::system_clock::to_time_t(now);
  std::tm tm{};
  localtime_r(&s, &tm);
  const int64_t ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  return static_cast<int64_t>(timegm(&tm)) * 1000 + ms;
}
// When the first line of `lines` containing `needle` was written.
inline std::optional<int64_t> FirstLogMs(const std::vector<std::string>& lines, const std::string& needle) {
  for (const std::string& l : lines) {
    if (l.find(needle) != std::string::npos) return LogLineMs(l);
  }
  return std::nullopt;
}

}  // namespace herd::fault
