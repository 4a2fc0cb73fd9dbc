#include "master/core/admission/rate_limiter.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace herd::master {

absl::Status RateLimiter::Admit(const Principal& who) {
  if (who.kind != Principal::Kind::kUser || options_.per_second <= 0 || who.Has(Capability::kAdmin)) {
    return absl::OkStatus();
  }
  // Whoever really asked pays, also when acting on someone's behalf.
  const std::string& payer = who.acting_user.empty() ? who.name : who.acting_user;
  const int64_t now = clock_->MonotonicMs();
  std::lock_guard l(mu_);
  auto it = buckets_.find(payer);
  if (it == buckets_.end()) {
    if (buckets_.size() >= options_.max_users) {
      // Forget the buckets that have refilled: they hold nothing to remember.
      absl::erase_if(buckets_, [&](const auto& kv) {
        const Bucket& b = kv.second;
        return b.tokens + (now - b.at_ms) * options_.per_second / 1000.0 >= options_.burst;
      });
    }
    it = buckets_.emplace(payer, Bucket{options_.burst, now}).first;
  }
  Bucket& b = it->second;
  b.tokens = std::min(options_.burst, b.tokens + (now - b.at_ms) * options_.per_second / 1000.0);
  b.at_ms = now;
  if (b.tokens >= 1) {
    b.tokens -= 1;
    return absl::OkStatus();
  }
  const int64_t wait_ms = static_cast<int64_t>(std::ceil((1 - b.tokens) * 1000.0 / options_.per_second));
  return absl::ResourceExhaustedError(absl::StrCat("user ", payer, " is sending more than ", options_.per_second,
                                                   " requests a second; retry in ", wait_ms, " ms"));
}

}  // namespace herd::master
