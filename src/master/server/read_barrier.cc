#include "master/server/read_barrier.h"

namespace herd::master {

bool ReadBarrier::Wait() {
  int64_t head;
  mu_.Lock();
  {
    if (absl::Now() - failed_at_ < quiet_) {
      mu_.Unlock();
      return false;
    }
    // The round that serves us is the first to begin after now.
    const int64_t mine = started_ + 1;
    while (true) {
      if (done_ >= mine) break;
      if (!running_) {
        // Nobody is reading the head: read it for this round, unlocked.
        running_ = true;
        started_ = mine;
        absl::StatusOr<int64_t> h;
        mu_.Unlock();
        h = read_head_();
        mu_.Lock();
        running_ = false;
        done_ = mine;
        head_ = h.ok() ? *h : -1;
        if (!h.ok()) failed_at_ = absl::Now();
        break;
      }
      // A round is in flight but began before us: wait for the next.
      auto next = [this, mine]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return done_ >= mine || !running_; };
      mu_.Await(absl::Condition(&next));
    }
    head = head_;
  }
  mu_.Unlock();
  if (head < 0) return false;
  return wait_applied_(head);
}

}  // namespace herd::master
