// SchedulerLoop: runs the scheduler against a cached copy of the cell
// (Borg §3.4): it follows the master's durable change feed, applying each
// mutation to its own CellState with the same code the master runs, runs a
// pass when something that matters changed, and proposes the placements to
// the committer, which accepts those still valid. Rejected (stale) proposals
// are simply reconsidered in the next pass, once the copy has caught up.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "master/core/committer.h"
#include "sched/scheduler.h"

namespace herd::master {

class SchedulerLoop {
 public:
  struct Stats {
    int64_t passes = 0;
    int64_t proposed = 0;
    int64_t accepted = 0;
    int64_t rejected = 0;
    int64_t last_pass_us = 0;
  };

  SchedulerLoop(Committer* committer, store::LogStore* store, sched::Options options);
  ~SchedulerLoop();
  void Start();
  void Stop();

  Stats stats() const;
  // Why each unplaced task was left pending in the last pass ("job/index" ->
  // diagnosis text).
  std::map<std::string, std::string> WhyPending(const std::string& job) const;

 private:
  void Loop();
  bool Resync();  // reload the cached copy from the master (feed fell behind)

  Committer* const committer_;
  store::LogStore* const store_;
  sched::Scheduler scheduler_;
  cell::CellState cache_;

  mutable absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  Stats stats_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::string> why_ ABSL_GUARDED_BY(mu_);  // "job/index" -> text
  std::thread thread_;
};

}  // namespace herd::master
