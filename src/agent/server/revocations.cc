#include "agent/server/revocations.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/log.h"

namespace herd::agent {

Revocations::Stream::~Stream() { owner_->Close(this); }

std::string Revocations::Stream::Why() const {
  return absl::StrCat("the credentials of user ", user_,
                      " were revoked: the grant that opened this stream no longer holds");
}

void Revocations::Close(Stream* s) {
  absl::MutexLock l(&mu_);
  streams_.erase(s);
}

void Revocations::Update(const google::protobuf::RepeatedPtrField<v1::RevokedUser>& revoked) {
  const int64_t now_ms = clock_->NowMs();
  absl::MutexLock l(&mu_);
  for (const v1::RevokedUser& u : revoked) {
    if (u.name().empty() || u.revoked_before_s() <= 0) continue;
    int64_t& before = revoked_before_s_[u.name()];
    before = std::max(before, u.revoked_before_s());
  }
  // Forget what no grant can still be issued before (and bound the table:
  // the oldest revocations go first).
  for (auto it = revoked_before_s_.begin(); it != revoked_before_s_.end();) {
    it = it->second * 1000 + kKeepMs < now_ms ? revoked_before_s_.erase(it) : std::next(it);
  }
  if (revoked_before_s_.size() > kMaxUsers) {
    std::vector<std::pair<int64_t, std::string>> by_time;
    for (const auto& [name, before] : revoked_before_s_) by_time.emplace_back(before, name);
    std::sort(by_time.begin(), by_time.end());
    for (size_t i = 0; i + kMaxUsers < by_time.size(); ++i) revoked_before_s_.erase(by_time[i].second);
  }
  for (Stream* s : streams_) {
    auto it = revoked_before_s_.find(s->user_);
    if (it == revoked_before_s_.end() || !Covers(it->second, s->grant_issued_ms_, s->cert_issued_s_)) continue;
    if (s->flagged_ms_ == 0) {
      s->flagged_ms_ = std::max<int64_t>(1, clock_->MonotonicMs());
      s->revoked_ = true;
      HERD_LOG_INFO("ending a stream of user {}: their credentials were revoked", s->user_);
    } else if (clock_->MonotonicMs() - s->flagged_ms_ >= kCancelAfterMs) {
      // Its handler did not end it on its own (a write held by a client
      // that does not read): cancel the call.
      if (s->ctx_ != nullptr) s->ctx_->TryCancel();
    }
  }
}

absl::Status Revocations::Check(const std::string& user, int64_t grant_issued_ms, int64_t cert_issued_s) const {
  absl::MutexLock l(&mu_);
  auto it = revoked_before_s_.find(user);
  if (it == revoked_before_s_.end() || !Covers(it->second, grant_issued_ms, cert_issued_s)) return absl::OkStatus();
  return absl::PermissionDeniedError(
      absl::StrCat("the credentials of user ", user, " were revoked (every one issued before ", it->second,
                   " Unix time): a grant or credential issued before that no longer holds; ask the master again "
                   "with a new credential"));
}

std::unique_ptr<Revocations::Stream> Revocations::Open(const std::string& user, int64_t grant_issued_ms,
                                                       int64_t cert_issued_s, grpc::ServerContext* ctx) {
  std::unique_ptr<Stream> s(new Stream(this, user, grant_issued_ms, cert_issued_s, ctx));
  absl::MutexLock l(&mu_);
  streams_.insert(s.get());
  // Revoked between its Check and now: flagged at once.
  auto it = revoked_before_s_.find(user);
  if (it != revoked_before_s_.end() && Covers(it->second, grant_issued_ms, cert_issued_s)) {
    s->revoked_ = true;
    s->flagged_ms_ = std::max<int64_t>(1, clock_->MonotonicMs());
  }
  return s;
}

size_t Revocations::users() const {
  absl::MutexLock l(&mu_);
  return revoked_before_s_.size();
}

size_t Revocations::open_streams() const {
  absl::MutexLock l(&mu_);
  return streams_.size();
}

}  // namespace herd::agent
