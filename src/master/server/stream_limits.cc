#include "master/server/stream_limits.h"

#include <vector>

#include "absl/strings/str_cat.h"

namespace herd::master {

StreamLimits::Slot& StreamLimits::Slot::operator=(Slot&& o) noexcept {
  if (this != &o) {
    Release();
    limits_ = o.limits_;
    user_ = std::move(o.user_);
    id_ = o.id_;
    o.limits_ = nullptr;
  }
  return *this;
}

void StreamLimits::Slot::Release() {
  if (limits_ != nullptr) limits_->Release(user_, id_);
  limits_ = nullptr;
}

absl::StatusOr<StreamLimits::Slot> StreamLimits::Acquire(const Principal& who, const std::string& what,
                                                         std::function<void()> end) {
  // Users are counted by the user they act as, and by who really asked
  // (--user): acting as others gets no one more streams.
  const bool user = who.kind == Principal::Kind::kUser;
  const std::string key = user ? (who.acting_user.empty() ? who.name : who.acting_user) : "";
  absl::MutexLock l(&mu_);
  if (opts_.total > 0 && open_ >= opts_.total) {
    return absl::ResourceExhaustedError(absl::StrCat(what, ": the cell has ", open_, " ", opts_.counted,
                                                     ", its limit (", opts_.total_flag, " ", opts_.total,
                                                     "); try again once some end"));
  }
  if (user && opts_.per_user > 0) {
    auto it = by_user_.find(key);
    if (it != by_user_.end() && it->second >= opts_.per_user) {
      return absl::ResourceExhaustedError(absl::StrCat(what, ": ", key, " has ", it->second, " ", opts_.counted,
                                                       ", the limit per user (", opts_.per_user_flag, " ",
                                                       opts_.per_user, "); wait for one to end"));
    }
  }
  ++open_;
  if (user) ++by_user_[key];
  const uint64_t id = next_id_++;
  streams_[id] = Open{who, std::move(end)};
  return Slot(this, user ? key : std::string(), id);
}

void StreamLimits::Release(const std::string& user, uint64_t id) {
  absl::MutexLock l(&mu_);
  streams_.erase(id);
  --open_;
  if (user.empty()) return;
  auto it = by_user_.find(user);
  if (it != by_user_.end() && --it->second <= 0) by_user_.erase(it);
}

int StreamLimits::open() const {
  absl::MutexLock l(&mu_);
  return open_;
}

int StreamLimits::open_by(const std::string& user) const {
  absl::MutexLock l(&mu_);
  auto it = by_user_.find(user);
  return it == by_user_.end() ? 0 : it->second;
}

int StreamLimits::EndRevoked(const std::function<bool(const Principal&)>& revoked) {
  std::vector<std::function<void()>> ends;
  {
    absl::MutexLock l(&mu_);
    for (auto& [id, open] : streams_) {
      if (!open.end || open.who.kind != Principal::Kind::kUser || !revoked(open.who)) continue;
      ends.push_back(std::move(open.end));
      open.end = nullptr;  // once
    }
  }
  for (auto& end : ends) end();
  return static_cast<int>(ends.size());
}

void StreamLimits::SweepRevoked(std::function<bool(const Principal&)> revoked, int64_t every_ms) {
  sweeper_ = std::thread([this, revoked = std::move(revoked), every_ms] {
    absl::MutexLock l(&sweep_mu_);
    while (!sweep_mu_.AwaitWithTimeout(absl::Condition(&stop_), absl::Milliseconds(every_ms))) {
      sweep_mu_.Unlock();
      EndRevoked(revoked);
      sweep_mu_.Lock();
    }
  });
}

StreamLimits::~StreamLimits() {
  {
    absl::MutexLock l(&sweep_mu_);
    stop_ = true;
  }
  if (sweeper_.joinable()) sweeper_.join();
}

}  // namespace herd::master
