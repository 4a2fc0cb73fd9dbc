// Recorder: fills the history database (history_db.h) from what the master
// already has: the cell's committed mutations (job submissions, updates,
// kills, task and machine events) and the usage its agents report in their
// poll replies.
//
// Mutations are read from the committer's durable change feed on a thread
// of the recorder's own (from the store when the feed has moved past them),
// starting after the revision the database says it has recorded, so a
// master that restarts records what it missed, and a follower records the
// same events as the leader. Usage reaches only the leader (it polls the
// agents): OnReply adds each run's sample to an in-memory accumulator, and
// once per sample interval each task that reported gets one row. Nothing
// here blocks the link or the committer: replies are summed under a short
// lock, and the database is written on the recorder's thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "base/clock.h"
#include "cell/cell_state.h"
#include "herd/v1/agent.pb.h"
#include "herd/v1/mutation.pb.h"
#include "master/history/history_db.h"

namespace herd::master {
class Committer;
}
namespace herd::store {
class LogStore;
}

namespace herd::master::history {

// Turns mutations into rows. Keeps, per task, the machine it was last
// placed on and its incarnation, and per job its version, so that rows
// name them; Seed() fills these from a state, Add() keeps them current.
class EventMapper {
 public:
  void Seed(const cell::CellState& state);
  void Add(const v1::Mutation& m, Batch* out);

 private:
  struct TaskInfo {
    std::string machine;
    int64_t incarnation = 0;
  };
  static constexpr size_t kMaxIndex = 100'000;
  TaskInfo& Info(const std::string& job, int32_t index);
  TaskEventRow Row(const v1::Mutation& m, const std::string& job, int32_t index, const char* event);
  int64_t VersionOf(const std::string& job) const;
  JobRow* AddJobRow(const v1::Mutation& m, Batch* out, const std::string& job, const char* event, int64_t version,
                    std::string reason);
  TaskEventRow& AddRunRow(const v1::Mutation& m, Batch* out, const v1::TaskRef& ref, const char* event);
  void AddPlaced(const v1::Mutation& m, Batch* out, const std::string& job, int32_t index, const std::string& machine);
  // One per mutation kind that takes more than a few lines.
  void JobsSubmitted(const v1::Mutation& m, Batch* out);
  void ScheduleTriggered(const v1::Mutation& m, Batch* out);
  void JobUpdated(const v1::Mutation& m, Batch* out);
  void TaskObserved(const v1::Mutation& m, Batch* out);
  void TaskExited(const v1::Mutation& m, Batch* out);
  static MachineEventRow MachineEvent(const v1::Mutation& m);
  absl::flat_hash_map<std::string, int64_t> versions_;              // job -> version
  absl::flat_hash_map<std::string, std::vector<TaskInfo>> tasks_;  // job -> by task index
  // Scheduled jobs' specs, for the runs they start (ScheduleTriggered
  // names only the run).
  absl::flat_hash_map<std::string, v1::JobSpec> schedules_;
};

// Sums usage samples per task and machine until the period ends.
class UsageAccumulator {
 public:
  // At most this many tasks are summed per period; samples of others are
  // dropped (and counted), so a flood of replies cannot grow the master.
  explicit UsageAccumulator(size_t max_tasks = 2'000'000) : max_tasks_(max_tasks) {}
  void Add(const std::string& machine, const v1::PollResponse& reply);
  // The rows of the period [start_ms, start_ms + period_ms), and a fresh
  // period.
  void Flush(int64_t start_ms, int64_t period_ms, Batch* out);
  int64_t dropped() const { return dropped_.load(std::memory_order_relaxed); }

 private:
  struct Sum {
    std::string machine;
    double cpu = 0, memory = 0;
    int64_t cpu_max = 0, memory_max = 0, disk = 0;
    int32_t samples = 0;
    void Add(const v1::Usage& u);
  };
  const size_t max_tasks_;
  absl::Mutex mu_;
  absl::flat_hash_map<std::pair<std::string, int32_t>, Sum> tasks_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, Sum> machines_ ABSL_GUARDED_BY(mu_);
  std::atomic<int64_t> dropped_{0};
};

class Recorder {
 public:
  struct Stats {
    int64_t mutations = 0;      // recorded
    int64_t rows = 0;           // written
    int64_t dropped_samples = 0;
    int64_t errors = 0;         // failed writes (retried with the next batch)
    int64_t recorded_revision = 0;
    double busy_seconds = 0;    // the recorder thread's time building and writing
  };
  // `db`, `clock` must outlive the Recorder.
  Recorder(HistoryDb* db, Clock* clock);
  ~Recorder();

  // Starts recording `committer`'s mutations (the store is read for those
  // the in-memory feed no longer has). Both must outlive Stop().
  void Start(Committer* committer, store::LogStore* store);
  void Stop();
  // An agent's poll reply: any thread.
  void OnReply(const std::string& machine, const v1::PollResponse& reply) { usage_.Add(machine, reply); }
  // Waits until everything up to `revision` is recorded (false on timeout).
  bool WaitRecorded(int64_t revision, absl::Duration timeout);
  // Ends the current usage period now and writes it (tests, shutdown).
  void FlushUsage();
  Stats stats() const;

 private:
  void Loop();
  // Reads mutations after `after` from the feed or the store into `out`.
  absl::Status Fetch(int64_t after, std::vector<v1::Mutation>* out);
  void WriteBatch(Batch& batch);

  HistoryDb* const db_;
  Clock* const clock_;
  Committer* committer_ = nullptr;
  store::LogStore* store_ = nullptr;
  EventMapper mapper_;  // the recorder thread's
  UsageAccumulator usage_;
  std::thread thread_;

  mutable absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool flush_wanted_ ABSL_GUARDED_BY(mu_) = false;
  int64_t period_start_ms_ ABSL_GUARDED_BY(mu_) = 0;
  Stats stats_ ABSL_GUARDED_BY(mu_);
};

}  // namespace herd::master::history
