// Latency-sensitive tasks' own latency signal (HealthCheck.latency_bound_ms):
// the health extension records how long each run's last check took, the
// cgroup extension's interference control reads which runs' last check was
// slower than its bound. A run stays slow until its next check is fast.
// Thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>

#include "absl/synchronization/mutex.h"

namespace herd::agent {

class SlowChecks {
 public:
  // The last check of `run_id` took `took_ms`; its bound is `bound_ms`.
  void Record(const std::string& run_id, int64_t took_ms, int64_t bound_ms) {
    absl::MutexLock l(&mu_);
    if (took_ms > bound_ms) {
      slow_[run_id] = took_ms;
    } else {
      slow_.erase(run_id);
    }
  }
  void Forget(const std::string& run_id) {
    absl::MutexLock l(&mu_);
    slow_.erase(run_id);
  }
  // The slowest run whose last check was over its bound, and how long it
  // took; {"", 0} if none.
  std::pair<std::string, int64_t> Slowest() const {
    absl::MutexLock l(&mu_);
    std::pair<std::string, int64_t> out{"", 0};
    for (const auto& [run, ms] : slow_) {
      if (ms > out.second) out = {run, ms};
    }
    return out;
  }

 private:
  mutable absl::Mutex mu_;
  std::map<std::string, int64_t> slow_ ABSL_GUARDED_BY(mu_);
};

}  // namespace herd::agent
