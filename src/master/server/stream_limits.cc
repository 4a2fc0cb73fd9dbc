#include "master/server/stream_limits.h"

#include "absl/strings/str_cat.h"

namespace herd::master {

StreamLimits::Slot& StreamLimits::Slot::operator=(Slot&& o) noexcept {
  if (this != &o) {
    Release();
    limits_ = o.limits_;
    user_ = std::move(o.user_);
    o.limits_ = nullptr;
  }
  return *this;
}

void StreamLimits::Slot::Release() {
  if (limits_ != nullptr) limits_->Release(user_);
  limits_ = nullptr;
}

absl::StatusOr<StreamLimits::Slot> StreamLimits::Acquire(const Principal& who, const std::string& what) {
  // Users are counted by the user they act as, and by who really asked
  // (--user): acting as others gets no one more streams.
  const bool user = who.kind == Principal::Kind::kUser;
  const std::string key = user ? (who.acting_user.empty() ? who.name : who.acting_user) : "";
  absl::MutexLock l(&mu_);
  if (opts_.total > 0 && open_ >= opts_.total) {
    return absl::ResourceExhaustedError(absl::StrCat(what, ": the cell has ", open_,
                                                     " open streams, its limit (--max-streams ", opts_.total,
                                                     "); try again once some end"));
  }
  if (user && opts_.per_user > 0) {
    auto it = by_user_.find(key);
    if (it != by_user_.end() && it->second >= opts_.per_user) {
      return absl::ResourceExhaustedError(absl::StrCat(what, ": ", key, " has ", it->second,
                                                       " open streams, the limit per user (--max-streams-per-user ",
                                                       opts_.per_user, "); close one first"));
    }
  }
  ++open_;
  if (user) ++by_user_[key];
  return Slot(this, user ? key : std::string());
}

void StreamLimits::Release(const std::string& user) {
  absl::MutexLock l(&mu_);
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

}  // namespace herd::master
