// Revocation on the agent (issue #33, item 7): a user's access grant, and
// the exec and log streams it opened, end when the user's credentials are
// revoked -- within a poll, not when the grant expires.
//
// The agent checks grants without asking the master (pki/grant.h), so it
// learns of revocations from the master's polls: every poll names the users
// revoked lately (PollRequest.revoked: a name and revoked_before_s, for as
// long as a grant issued before could still be used). A grant issued
// (pki::GrantIssuedMs) before its user's revoked_before_s, or presented with
// a certificate issued before it, is refused; and each exec or log stream
// open here is registered while it lasts, so a poll bringing its user's
// revocation ends it: its handler sees revoked() within its own poll of
// that flag (200 ms) and ends with PERMISSION_DENIED; one still open at the
// next poll (a writer stuck on a client that does not read) is cancelled.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <set>
#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "base/clock.h"
#include "google/protobuf/repeated_ptr_field.h"
#include "herd/v1/agent.pb.h"

namespace herd::agent {

class Revocations {
 public:
  // Users remembered at most (the latest revocations win a place).
  static constexpr size_t kMaxUsers = 4096;
  // How long after a revocation it is remembered: a grant's validity, and a
  // margin for the master's and the agent's clocks.
  static constexpr int64_t kKeepMs = 5 * 60'000;
  // A flagged stream still open this long after (at a later poll) is
  // cancelled.
  static constexpr int64_t kCancelAfterMs = 1000;

  explicit Revocations(Clock* clock) : clock_(clock) {}

  // A stream of `user`'s, open while this lives.
  class Stream {
   public:
    ~Stream();
    Stream(const Stream&) = delete;
    Stream& operator=(const Stream&) = delete;
    // Its user was revoked since the grant that opened it was issued.
    bool revoked() const { return revoked_.load(); }
    const std::atomic<bool>* flag() const { return &revoked_; }
    // What to tell the client when it ends for that.
    std::string Why() const;

   private:
    friend class Revocations;
    Stream(Revocations* owner, std::string user, int64_t grant_issued_ms, int64_t cert_issued_s,
           grpc::ServerContext* ctx)
        : owner_(owner), user_(std::move(user)), grant_issued_ms_(grant_issued_ms), cert_issued_s_(cert_issued_s),
          ctx_(ctx) {}
    Revocations* const owner_;
    const std::string user_;
    const int64_t grant_issued_ms_;
    const int64_t cert_issued_s_;
    grpc::ServerContext* const ctx_;
    std::atomic<bool> revoked_{false};
    int64_t flagged_ms_ = 0;  // guarded by owner_->mu_: when a poll flagged it (monotonic)
  };

  // What a poll says (PollRequest.revoked): merged with what is known (the
  // later time wins), entries older than kKeepMs forgotten; then every open
  // stream of a user revoked after its grant or certificate was issued is
  // flagged, and one flagged kCancelAfterMs ago and still open is cancelled.
  void Update(const google::protobuf::RepeatedPtrField<v1::RevokedUser>& revoked);

  // OK, or PERMISSION_DENIED if `user`'s credentials were revoked after the
  // grant (issued at grant_issued_ms, Unix ms) or the caller's certificate
  // (issued at cert_issued_s) was issued.
  absl::Status Check(const std::string& user, int64_t grant_issued_ms, int64_t cert_issued_s) const;

  // Registers a stream opened by a grant that passed Check (`ctx`, if not
  // null, must outlive the returned handle).
  std::unique_ptr<Stream> Open(const std::string& user, int64_t grant_issued_ms, int64_t cert_issued_s,
                               grpc::ServerContext* ctx);

  size_t users() const;
  size_t open_streams() const;

 private:
  static bool Covers(int64_t revoked_before_s, int64_t grant_issued_ms, int64_t cert_issued_s) {
    return grant_issued_ms < revoked_before_s * 1000 || cert_issued_s < revoked_before_s;
  }
  void Close(Stream* s);

  Clock* const clock_;
  mutable absl::Mutex mu_;
  std::map<std::string, int64_t> revoked_before_s_ ABSL_GUARDED_BY(mu_);
  std::set<Stream*> streams_ ABSL_GUARDED_BY(mu_);
};

}  // namespace herd::agent
