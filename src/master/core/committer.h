// Committer: the master's single writer of cell state.
//
// Every change goes through Commit(): under the state lock the caller's
// function looks at the state and returns mutations; each is stamped (revision,
// time, actor), applied to the in-memory CellState and queued on the group-
// commit log; then, outside the lock, the caller waits until the mutations are
// durable before answering anyone. Nothing leaves the master before it is
// durable: readers of the change feed (Watch, the scheduler's cache) see only
// durable revisions, and a poll waits for the revision it was built from.
// A crash at any moment therefore loses only unacknowledged mutations.
//
// If the store fails, memory is ahead of disk: the committer reports the
// failure and the master exits (recovery rebuilds from the store).
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "base/clock.h"
#include "cell/cell_state.h"
#include "store/group_commit.h"
#include "store/log_store.h"

namespace herd::master {

class Committer {
 public:
  struct Options {
    int64_t snapshot_every = 10'000;  // mutations between snapshots (0 = never)
    // ... and at least this many per task and machine in the cell: a
    // snapshot costs time in proportion to the cell, so in a big cell they
    // come in proportion to it too (1M tasks: one per 1M mutations, not per
    // 10k), which keeps the cost per mutation flat and recovery bounded by
    // about twice the state.
    double snapshot_per_object = 1.0;
    size_t feed_size = 100'000;       // recent mutations kept in memory for watchers
    // Free space on the store's disk (bytes), or -1 if unknown; null: not
    // checked. Below min_free_bytes every change is refused with
    // RESOURCE_EXHAUSTED before it touches the state, and reads go on (as
    // etcd's space alarm does): a store that runs out of space mid-write
    // would otherwise leave memory ahead of disk and stop the master.
    std::function<int64_t()> free_bytes;
    int64_t min_free_bytes = 64ll << 20;
    // For metrics (null: none). on_applied: each mutation this committer
    // applies as the leader, under the state lock (keep it cheap).
    // on_durable: for each Commit or CommitEach, the seconds from the call
    // until its mutations were durable.
    std::function<void(const v1::Mutation&)> on_applied;
    std::function<void(double seconds)> on_durable;
  };
  using BuildFn = std::function<absl::StatusOr<std::vector<v1::Mutation>>(const cell::CellState&)>;
  using EffectsFn = std::function<void(const cell::Effects&)>;

  // `state` is the recovered state; its revision must equal the store's last.
  Committer(cell::CellState state, store::LogStore* store, Clock* clock, Options opts);
  // A follower's committer (a replica that is not the leader): it writes
  // nothing; Follow() applies what the leader made durable, so reads and the
  // change feed are served from a hot state, and Promote() makes it the
  // writer when this replica wins the leader lease.
  struct FollowerTag {};
  Committer(FollowerTag, cell::CellState state, Clock* clock, Options opts);
  ~Committer();

  // Follower: applies mutations the leader made durable (already stamped;
  // those at or below the current revision are skipped). DATA_LOSS if one
  // does not continue the state or does not apply.
  absl::Status Follow(const std::vector<v1::Mutation>& committed);
  // Follower: starts again from `state` (the log it would follow was
  // compacted away); watchers behind it are told to read the store.
  void Reset(cell::CellState state);
  // Follower -> leader: from now on changes are written to `store`, whose
  // last revision must be this state's (catch up with Follow first).
  absl::Status Promote(store::LogStore* store);
  // False on a follower until Promote().
  bool leading() const { return log_ptr_.load(std::memory_order_acquire) != nullptr; }

  // Applies the mutations `build` returns, all or nothing: if one fails its
  // check, none is applied and its error is returned. Waits until durable.
  // Returns the cell revision after them (unchanged if there were none).
  absl::StatusOr<int64_t> Commit(absl::string_view actor, const BuildFn& build);

  // Applies each mutation independently (scheduler proposals, agent
  // reports): one failing does not stop the others. Waits until the accepted
  // ones are durable. Returns one status per mutation.
  std::vector<absl::Status> CommitEach(absl::string_view actor, std::vector<v1::Mutation> mutations);
  // The same, returning once the mutations are applied, without waiting for
  // them to be durable: for what a later poll would report again if it were
  // lost (agents' observations), so the link never waits on the disk. The
  // log keeps their order, so nothing after them is durable before them.
  std::vector<absl::Status> CommitEachNoWait(absl::string_view actor, std::vector<v1::Mutation> mutations);

  // Runs fn with the state under the lock (for reads: keep it short).
  template <typename Fn>
  auto Read(Fn&& fn) const {
    absl::ReaderMutexLock l(&mu_);
    return fn(state_);
  }

  // Durable mutations with revision > after, at most `max`, waiting up to
  // timeout_ms for one to arrive. OUT_OF_RANGE if `after` is older than the
  // in-memory feed (read the store instead).
  absl::StatusOr<std::vector<v1::Mutation>> WaitForMutations(int64_t after, int64_t timeout_ms, size_t max);
  // Oldest revision the in-memory feed can serve from (after >= this - 1).
  int64_t FeedStart() const;

  absl::Status WaitDurable(int64_t revision);
  // Waits up to `timeout` until `revision` is durable here (on a follower:
  // applied); false if it is not.
  bool WaitApplied(int64_t revision, absl::Duration timeout);
  // Calls `fn` each time the durable revision advances (on a follower:
  // each applied batch), under an internal lock: `fn` must only signal
  // something (the server's stream pump wakes its parked streams). Returns
  // an id for RemoveDurableListener, after which `fn` is never called.
  int AddDurableListener(std::function<void()> fn);
  void RemoveDurableListener(int id);
  // On a follower: what it has applied (all of it durable at the leader).
  int64_t durable_revision() const {
    const store::GroupCommitLog* log = log_ptr_.load(std::memory_order_acquire);
    return log ? log->DurableRevision() : followed_.load(std::memory_order_acquire);
  }
  int64_t revision() const;

  // Called under the state lock after each applied mutation (keep it cheap:
  // e.g. kick a poll). Set before traffic starts.
  void SetEffectsListener(EffectsFn fn) { effects_fn_ = std::move(fn); }
  // Called once if the store fails (the master should exit).
  void SetFatalListener(std::function<void(const absl::Status&)> fn) { fatal_fn_ = std::move(fn); }

  // Writes a snapshot of the current state now (also done every
  // snapshot_every mutations in the background).
  absl::Status WriteSnapshot();

 private:
  std::vector<absl::Status> CommitEachImpl(absl::string_view actor, std::vector<v1::Mutation> mutations, bool wait);
  // Asks the snapshot thread for a snapshot if enough has changed.
  void MaybeWantSnapshot();
  // Stamps, applies and queues; returns the last revision or the error.
  int64_t ApplyLocked(v1::Mutation& m, absl::string_view actor) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status WaitAndCheck(int64_t revision);
  // FAILED_PRECONDITION on a follower.
  absl::Status CheckLeading() const;
  void SetDurableSeen(int64_t rev);
  void DurableAdvancedLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(feed_mu_);
  void InstallLog(std::unique_ptr<store::GroupCommitLog> log, store::LogStore* store)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // OK, or RESOURCE_EXHAUSTED while the disk is below its reserve -- unless
  // `m` frees space or records what a machine did (AllowedBelowReserve).
  absl::Status CheckSpace(const v1::Mutation* m) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void SnapshotLoop();

  store::LogStore* store_;  // null on a follower; set once by Promote()
  Clock* const clock_;
  const Options opts_;
  std::unique_ptr<store::GroupCommitLog> log_;  // null on a follower; set once by Promote()
  std::atomic<store::GroupCommitLog*> log_ptr_{nullptr};
  std::atomic<int64_t> followed_{0};  // a follower's applied (= durable) revision
  EffectsFn effects_fn_;
  std::function<void(const absl::Status&)> fatal_fn_;

  mutable absl::Mutex mu_;
  cell::CellState state_ ABSL_GUARDED_BY(mu_);
  std::deque<v1::Mutation> feed_ ABSL_GUARDED_BY(mu_);  // applied, newest last
  int64_t last_snapshot_ ABSL_GUARDED_BY(mu_) = 0;

  mutable absl::Mutex feed_mu_;  // signalled when durable advances
  int64_t durable_seen_ ABSL_GUARDED_BY(feed_mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(feed_mu_) = false;
  std::map<int, std::function<void()>> durable_listeners_ ABSL_GUARDED_BY(feed_mu_);
  int next_listener_ ABSL_GUARDED_BY(feed_mu_) = 0;
  bool snapshot_wanted_ ABSL_GUARDED_BY(feed_mu_) = false;
  bool fatal_reported_ = false;
  std::thread snapshot_thread_;
};

}  // namespace herd::master
