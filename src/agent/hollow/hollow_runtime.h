// Hollow agents' runtime: a machine's runs with no processes behind them, so
// that one process can hold thousands of agents that speak the real agent
// protocol (agent/server/agent_protocol.h) to a real master -- the way
// kubemark runs the real kubelet over a fake container runtime.
//
// A HollowRunTable is one machine's RunTable: runs it is handed are STARTING
// until the shared HollowRuntime "starts" them (after start_ms, at most
// max_parallel_starts at a time per machine, the rest waiting their turn),
// then ACTIVE with a made-up pid; a run ends by itself (exit 0) after run_ms
// if that is set; runs no longer desired are gone at once. No gRPC, no I/O.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <queue>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "agent/supervisor/run_table.h"
#include "base/clock.h"

namespace herd::agent {

class HollowRunTable;

// The clock and the thread that make hollow runs start and end, shared by
// every HollowRunTable of a process.
class HollowRuntime {
 public:
  struct Options {
    int64_t start_ms = 0;         // how long a start takes
    int max_parallel_starts = 8;  // per machine
    int64_t run_ms = 0;           // 0: runs until stopped
  };

  HollowRuntime(Options options, Clock* clock);
  ~HollowRuntime();
  HollowRuntime(const HollowRuntime&) = delete;
  HollowRuntime& operator=(const HollowRuntime&) = delete;

  const Options& options() const { return options_; }
  Clock* clock() const { return clock_; }

  // Runs everything due at the clock's current time on the calling thread
  // (tests on a ManualClock); Start() runs it on a thread of its own.
  void RunDue();
  void Start();

 private:
  friend class HollowRunTable;
  enum class What { kStart, kExit };
  struct Event {
    int64_t due_ms;
    HollowRunTable* table;
    std::string run_id;
    What what;
    bool operator>(const Event& o) const { return due_ms > o.due_ms; }
  };
  void At(int64_t due_ms, HollowRunTable* table, std::string run_id, What what);
  // Drops every event of `table` (it is being destroyed).
  void Forget(HollowRunTable* table);
  void Loop();

  const Options options_;
  Clock* const clock_;
  absl::Mutex mu_;
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> events_ ABSL_GUARDED_BY(mu_);
  bool busy_ ABSL_GUARDED_BY(mu_) = false;  // handing a batch of events to tables
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

class HollowRunTable final : public RunTable {
 public:
  explicit HollowRunTable(HollowRuntime* runtime);
  ~HollowRunTable() override;

  void SetDesired(const std::vector<v1::TaskRun>& desired) override;
  std::vector<v1::RunStatus> Observe(uint64_t* version = nullptr) const override;
  uint64_t WaitForChange(uint64_t last_version, int64_t timeout_ms) const override;
  uint64_t Version() const override;
  void DescribeMachine(v1::PollResponse* response) const override;
  int64_t started_ms() const override { return started_ms_; }

  // Runs ever started, and runs alive now.
  int64_t starts() const;
  int64_t live() const;

 private:
  friend class HollowRuntime;
  // From the runtime's thread.
  void Started(const std::string& run_id);
  void Exited(const std::string& run_id);
  // Hands the next waiting runs to the runtime while fewer than
  // max_parallel_starts are starting.
  void StartMoreLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  HollowRuntime* const runtime_;
  const int64_t started_ms_;
  mutable absl::Mutex mu_;
  std::map<std::string, v1::RunStatus> runs_ ABSL_GUARDED_BY(mu_);
  std::deque<std::string> waiting_ ABSL_GUARDED_BY(mu_);  // STARTING, not yet handed over
  int starting_ ABSL_GUARDED_BY(mu_) = 0;                  // handed over, not yet started
  uint64_t version_ ABSL_GUARDED_BY(mu_) = 1;
  int64_t starts_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t next_pid_ ABSL_GUARDED_BY(mu_) = 100;
};

}  // namespace herd::agent
