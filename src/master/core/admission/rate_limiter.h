// Per-user request rate limits: a token bucket per user, refilled at
// `per_second` up to `burst`. A user past it gets RESOURCE_EXHAUSTED saying
// when to retry, and the cell goes on serving everyone else (one user's
// script in a loop must not starve the others or the agents' polls). The
// master's own parts, machines and schedulers are not limited here (their
// rates are the cell's design, not a user's choice), nor are admins (as
// Kubernetes exempts system:masters: whoever repairs the cell must get in).
#pragma once

#include <cstdint>
#include <mutex>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "base/clock.h"
#include "master/core/admission/authorizer.h"

namespace herd::master {

class RateLimiter {
 public:
  struct Options {
    double per_second = 200;  // 0: no limit
    double burst = 400;
    size_t max_users = 100'000;  // buckets kept; full ones are forgotten first
  };
  RateLimiter(Clock* clock, Options options) : clock_(clock), options_(options) {}

  // OK, or RESOURCE_EXHAUSTED: "user bob is sending more than 200 requests
  // a second; retry in 5 ms".
  absl::Status Admit(const Principal& who);

 private:
  struct Bucket {
    double tokens = 0;
    int64_t at_ms = 0;
  };
  Clock* const clock_;
  const Options options_;
  std::mutex mu_;
  absl::flat_hash_map<std::string, Bucket> buckets_;
};

}  // namespace herd::master
