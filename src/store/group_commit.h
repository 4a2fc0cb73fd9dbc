// GroupCommitLog: batches appends from many threads into one
// LogStore::Append (group commit), so the cost of a durable write (one fsync
// with SQLite, one round trip with etcd) is shared by every mutation queued
// while the previous write was in flight. No artificial delay: a lone
// mutation is written at once; batches grow only under load.
//
//   master threads --Enqueue--> queue --writer thread--> LogStore::Append
//        |                                                    |
//        +------------ WaitDurable(rev) <-- durable revision <+
//
// The master applies a mutation to its in-memory state, enqueues it (under
// its state lock, so revisions are queued in order) and, outside the lock,
// waits for it to be durable before answering the client.
//
// Failure is sticky: once an Append fails, memory is ahead of disk and no
// later mutation can be made durable, so every wait for a revision not yet
// durable fails with that error, forever. The master must stop (and recover
// from the store on restart).
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "herd/v1/mutation.pb.h"
#include "store/log_store.h"

namespace herd::store {

class GroupCommitLog {
 public:
  struct Options {
    // Most mutations written by one Append.
    size_t max_batch = 4096;
  };

  // `store` must outlive this object. The durable revision starts at
  // store->LastRevision() (if that fails, the log starts failed).
  explicit GroupCommitLog(LogStore* store) : GroupCommitLog(store, Options()) {}
  GroupCommitLog(LogStore* store, Options opts);
  // Flushes what is queued, then stops the writer thread. Threads still in
  // WaitDurable for revisions that were never queued get UNAVAILABLE; the
  // destructor waits for them to leave.
  ~GroupCommitLog();
  GroupCommitLog(const GroupCommitLog&) = delete;
  GroupCommitLog& operator=(const GroupCommitLog&) = delete;

  // Queues mutations whose revisions continue those queued before (the caller
  // guarantees the order, e.g. by calling under its state lock; a gap makes
  // the next Append fail, which is sticky). Never blocks on I/O. Mutations
  // queued after a failure are dropped.
  void Enqueue(std::vector<v1::Mutation> mutations);

  // Blocks until `revision` is durable: OK. If the store failed before it
  // became durable: that error (and every later wait for a revision past the
  // durable one fails the same way). UNAVAILABLE if the log is destroyed
  // before `revision` was ever queued.
  absl::Status WaitDurable(int64_t revision);

  // The newest durable revision (lock-free).
  int64_t DurableRevision() const { return durable_.load(std::memory_order_acquire); }

  // The sticky error, or OK while the log is healthy.
  absl::Status status() const;

  // fn is called on the writer thread after each successful flush with the
  // new durable revision (not under any lock of this class; it must not call
  // the destructor). Replaces any previous callback.
  void SetOnDurable(std::function<void(int64_t)> fn);

 private:
  void WriterLoop();

  LogStore* const store_;
  const Options opts_;

  mutable absl::Mutex mu_;
  std::vector<v1::Mutation> queue_ ABSL_GUARDED_BY(mu_);
  int64_t last_queued_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status error_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;  // destructor called: flush and exit
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;   // writer exited; waits can no longer succeed
  int waiters_ ABSL_GUARDED_BY(mu_) = 0;
  std::function<void(int64_t)> on_durable_ ABSL_GUARDED_BY(mu_);
  std::atomic<int64_t> durable_{0};

  std::thread writer_;
};

}  // namespace herd::store
