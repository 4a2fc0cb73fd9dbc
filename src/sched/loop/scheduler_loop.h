// SchedulerLoop: the scheduler as a service (Borg §3.4). It keeps its own
// replica of the cell -- bootstrapped from a snapshot, then kept current by
// applying the same mutations the master applied, with the same code
// (CellState::Apply) -- runs a pass when something that matters changed, and
// proposes the placements (and why the rest stays pending) to the master,
// which commits those still valid. Rejected (stale) proposals are not an
// error: the loop catches up and the tasks come back in the next pass.
//
// The same loop runs in two places, behind two small interfaces:
//  - in the master (`herd master --scheduler internal`): the change source is
//    the committer's durable change feed and the sink commits through the
//    committer (adapters in master/core/sched_adapters.h);
//  - in its own process (`herd scheduler`): the source is ExportCheckpoint +
//    Watch and the sink is the Propose RPC (adapters in sched/server/).
// No gRPC, store or master here: threads and the pure core only.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "base/clock.h"
#include "cell/cell_state.h"
#include "herd/v1/api.pb.h"
#include "herd/v1/mutation.pb.h"
#include "sched/scheduler.h"

namespace herd::sched {

// Where the replica comes from.
class ChangeSource {
 public:
  virtual ~ChangeSource() = default;
  // The whole cell as of some revision; the replica starts (and, after
  // OUT_OF_RANGE, restarts) from it. An error is transient: the loop backs
  // off and asks again.
  virtual absl::StatusOr<cell::CellState> Bootstrap() = 0;
  // The mutations with revision > `after`, in order and without gaps,
  // waiting up to `timeout_ms` for the first one (empty: nothing new).
  // OUT_OF_RANGE: the source cannot continue from `after` (it is gone from
  // the feed, the stream broke): the loop bootstraps again. Any other error
  // is transient (backoff, then the same question).
  virtual absl::StatusOr<std::vector<v1::Mutation>> Next(int64_t after, int64_t timeout_ms) = 0;
  // Makes a waiting Next() return soon (called by Stop()). Optional.
  virtual void Interrupt() {}
};

// Where proposals go.
class ProposalSink {
 public:
  virtual ~ProposalSink() = default;
  // Placements computed at request.based_on_revision() plus the diagnoses of
  // the classes left pending. One result per placement, in order. An error
  // means nothing was decided; the loop retries the pass later.
  virtual absl::StatusOr<v1::ProposeResponse> Propose(const v1::ProposeRequest& request) = 0;
};

struct LoopOptions {
  // How long one wait for changes lasts when there is nothing to do (only
  // bounds how quickly Stop() is noticed; changes wake the loop at once).
  int64_t idle_wait_ms = 500;
  // After stale proposals: how long to wait for the replica to catch up
  // before the next pass. Doubles (up to max_retry_wait_ms) while passes keep
  // being rejected with nothing new arriving, so a scheduler that disagrees
  // with the master does not spin.
  int64_t retry_wait_ms = 20;
  int64_t max_retry_wait_ms = 2'000;
  // After a source or sink error (master unreachable): first wait, doubling
  // up to max_error_backoff_ms.
  int64_t error_backoff_ms = 100;
  int64_t max_error_backoff_ms = 5'000;
  // Log each pass that proposed something at INFO (else DEBUG).
  bool log_passes = false;
  // For metrics (null: none): after each pass, how long it took (seconds)
  // and its result (before its proposals are sent). On the loop's thread.
  std::function<void(double seconds, const PassResult& result)> on_pass;
};

class SchedulerLoop {
 public:
  struct Stats {
    int64_t passes = 0;
    int64_t proposed = 0;
    int64_t accepted = 0;
    int64_t rejected = 0;     // stale proposals the master refused
    int64_t bootstraps = 0;   // replica (re)loads, the first included
    int64_t errors = 0;       // source or sink failures
    int64_t last_pass_us = 0;
    int64_t last_pass_ms = 0;  // wall time (Clock) of the last pass
    int64_t revision = 0;      // the replica's revision
    int64_t pending = 0;       // tasks left pending by the last pass
  };

  // `source`, `sink` and `clock` must outlive the loop.
  SchedulerLoop(ChangeSource* source, ProposalSink* sink, Clock* clock, Options options, LoopOptions loop = {});
  ~SchedulerLoop();
  SchedulerLoop(const SchedulerLoop&) = delete;
  SchedulerLoop& operator=(const SchedulerLoop&) = delete;

  // Runs Step() on a thread of its own until Stop(), backing off on errors.
  void Start();
  void Stop();

  // One round, for Start()'s thread and for tests that drive the loop by
  // hand: bootstrap the replica if there is none; wait for and apply the next
  // mutations; run a pass and propose if something other than an agent's
  // report (TaskObserved) changed since the last pass, or the last pass had
  // stale proposals. Errors are the source's or the sink's (transient).
  absl::Status Step();

  Stats stats() const;
  const std::string& name() const { return options_.name; }
  // The replica (for tests; not while Start()'s thread runs).
  const cell::CellState& replica() const { return replica_; }

 private:
  // How the master answered one pass's proposals.
  struct Outcome {
    int64_t accepted = 0;
    int64_t rejected = 0;
    std::string first_reason;  // of the first rejection
  };

  absl::Status Bootstrap();
  // One pass over the replica: schedule, propose, learn from the answer.
  absl::Status Pass();
  // The pass's placements and why-pending diagnoses as one request.
  v1::ProposeRequest ToProposal(PassResult& result, int64_t revision) const;
  static Outcome Tally(const v1::ProposeRequest& req, const v1::ProposeResponse& resp, absl::string_view name);
  // Stale proposals: retry once the replica has caught up (backing off if a
  // retry found nothing new); otherwise retry quickly next time.
  void AfterProposal(const Outcome& outcome, bool was_retry);
  void LogPass(int64_t revision, const v1::ProposeRequest& req, const Outcome& outcome, int64_t unplaced,
               int64_t us) const;
  bool stopping() const;

  ChangeSource* const source_;
  ProposalSink* const sink_;
  Clock* const clock_;
  const Options options_;
  const LoopOptions loop_;

  // Owned by the thread running Step().
  Scheduler scheduler_;
  cell::CellState replica_;
  bool have_replica_ = false;
  bool dirty_ = true;          // something changed since the last pass
  bool retry_ = false;         // the last pass had stale proposals
  int64_t retry_wait_ms_;      // current wait before retrying them

  mutable absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  Stats stats_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace herd::sched
