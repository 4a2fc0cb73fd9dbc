// ReadBarrier: a follower's reads, as of the log's head, with one etcd read
// shared by every read that can share it (as etcd batches ReadIndex).
//
// A read must see every change acknowledged before it began, so the head it
// waits for must be read after it began: a read that arrives while a
// head-read is in flight waits for the next one, which starts as soon as the
// current one ends and serves every read that arrived meanwhile. Under load
// that is one etcd read per round trip, however many reads come in.
//
// If the head cannot be read (this replica is cut off from etcd), reads are
// answered from what the replica has; `Wait` returns false then, and for
// `quiet` after a failure does not try again (a partitioned follower stays
// readable and fast; its answers carry their revision).
#pragma once

#include <cstdint>
#include <functional>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace herd::master {

class ReadBarrier {
 public:
  // `read_head`: the log's head revision now (a quorum read). `wait_applied`:
  // waits until this replica has applied that revision (false on timeout).
  ReadBarrier(std::function<absl::StatusOr<int64_t>()> read_head,
              std::function<bool(int64_t revision)> wait_applied, absl::Duration quiet = absl::Seconds(5))
      : read_head_(std::move(read_head)), wait_applied_(std::move(wait_applied)), quiet_(quiet) {}

  // Returns once this replica has applied everything acknowledged before the
  // call (true), or it could not find out (false).
  bool Wait();

  // Head reads made so far (for tests and stats).
  int64_t rounds() const {
    absl::MutexLock l(&mu_);
    return done_;
  }

 private:
  const std::function<absl::StatusOr<int64_t>()> read_head_;
  const std::function<bool(int64_t)> wait_applied_;
  const absl::Duration quiet_;

  mutable absl::Mutex mu_;
  bool running_ ABSL_GUARDED_BY(mu_) = false;
  int64_t started_ ABSL_GUARDED_BY(mu_) = 0;  // rounds begun
  int64_t done_ ABSL_GUARDED_BY(mu_) = 0;     // rounds ended
  int64_t head_ ABSL_GUARDED_BY(mu_) = -1;    // the last round's head; -1 if it failed
  absl::Time failed_at_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
};

}  // namespace herd::master
