// LeaderLease: leadership of a cell as an etcd lease (docs/design.md §9). A
// candidate grants itself a lease of `ttl` and creates the leader key on it,
// if nobody holds the key; the key's creation revision is the fence every
// write of the leader's store compares (EtcdLogStore), so leadership and the
// right to write are one thing. The holder keeps the lease alive a few times
// per TTL; if etcd cannot be reached, the holder gives up leadership on its
// own clock no later than the lease can have expired in etcd: the deadline
// is counted from the moment it SENT the last keep-alive that etcd answered,
// which is before etcd restarted the lease's countdown. Followers wait on
// the key and campaign when it disappears (its holder resigned, died or was
// cut off for a TTL).
//
//   candidate --Campaign--> [holder: keep-alive every ttl/4] --lost/resign-->
//       ^                                                              |
//       +------------------ (a new LeaderLease) <----------------------+
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "store/etcd/etcd_client.h"
#include "store/etcd/etcd_log_store.h"

namespace herd::store::etcd {

struct LeaseOptions {
  std::string key;    // e.g. PREFIX + "leader"
  std::string value;  // what followers read: the leader's address
  absl::Duration ttl = absl::Seconds(2);
  // While campaigning: told each time the campaign learns who holds the
  // key ("" once it is gone), so a follower knows the leader as soon as the
  // election is decided (e.g. to forward changes to it).
  std::function<void(const std::string& holder)> on_holder;
};

class LeaderLease {
 public:
  // Blocks until this candidate holds the key (-> the lease, keeping itself
  // alive) or `stop` returns true (CANCELLED; checked at least every
  // 200 ms). Errors from etcd are retried until stop.
  static absl::StatusOr<std::unique_ptr<LeaderLease>> Campaign(Client* client, LeaseOptions options,
                                                               std::function<bool()> stop);

  // The current holder's value (address), or "" if nobody holds the key.
  static absl::StatusOr<std::string> Holder(Client* client, const std::string& key);

  // Stops keeping the lease alive; Resign()s if still held.
  ~LeaderLease();
  LeaderLease(const LeaderLease&) = delete;
  LeaderLease& operator=(const LeaderLease&) = delete;

  // What the store's writes must compare.
  Fence fence() const { return fence_; }
  int64_t lease_id() const { return lease_id_; }

  // True until the lease is lost or resigned, or its expiry on our clock has
  // passed (even before the keep-alive thread notices). Once false, never
  // true again. Check it before every act only a leader may do.
  bool held() const {
    return held_.load(std::memory_order_acquire) &&
           absl::GetCurrentTimeNanos() < expires_ns_.load(std::memory_order_acquire);
  }
  // Blocks until the lease is lost or resigned, or `timeout` passes: held().
  bool WaitLost(absl::Duration timeout);
  // Called once, on the keep-alive thread, when the lease is lost (not on
  // Resign). Set it before anything depends on it; it must not destroy this.
  void OnLost(std::function<void()> fn);

  // Revokes the lease (the key goes with it, so a follower takes over at
  // once instead of after a TTL) and stops.
  void Resign();

 private:
  LeaderLease(Client* client, LeaseOptions options, int64_t lease_id, int64_t ttl_s, Fence fence);
  void KeepAliveLoop();
  void Lose(const std::string& why);

  Client* const client_;
  const LeaseOptions opts_;
  const int64_t lease_id_;
  const Fence fence_;
  std::atomic<bool> held_{true};

  absl::Mutex mu_;
  // When the lease may have expired in etcd, on our clock (Unix ns).
  std::atomic<int64_t> expires_ns_{0};
  int64_t ttl_s_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::function<void()> on_lost_ ABSL_GUARDED_BY(mu_);
  std::thread keeper_;
};

}  // namespace herd::store::etcd
