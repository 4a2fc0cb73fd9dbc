// Forwarder: how a follower master makes a change it may not make itself.
//
// Replicas that are not the leader serve reads from their hot state; a
// change (submit, kill, an agent's registration, a scheduler's proposal...)
// is sent on to the leader on behalf of the caller: the follower presents its
// own (master) certificate and passes the caller's certificate along
// (rpc::kForwardedForKey), which the leader verifies against the cell's CA
// and authorizes as if the caller had come to it directly. So a client given
// any replica, or a list of them, needs no redirect logic of its own.
//
// While no leader is elected (a failover), a forwarded change waits for one,
// within the caller's deadline (at most kMaxWait). The reply's revision is
// returned so the follower can wait until it has applied the change itself
// before answering: a client that writes and then reads through the same
// replica sees its write.
//
// A request that arrives forwarded already is never forwarded again (two
// replicas that each think the other leads would bounce it): UNAVAILABLE,
// which the first follower retries once the lease says who leads.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "herd/v1/api.grpc.pb.h"
#include "pki/pki.h"

namespace herd::master {

class Forwarder {
 public:
  // The current leader's address ("" if nobody holds the lease).
  using FindLeader = std::function<absl::StatusOr<std::string>()>;
  static constexpr absl::Duration kMaxWait = absl::Seconds(15);

  // `self` is this master's credential; `self_address` its own HOST:PORT
  // (never forwarded to); `leading` says whether this replica leads now.
  Forwarder(pki::Credential self, std::string self_address, FindLeader find, std::function<bool()> leading);

  // The leader as last looked up or told ("" if unknown); looks it up if
  // that is older than a second.
  std::string KnownLeader();
  // Told who leads now (by the campaign, or when this replica takes over):
  // forwarded changes waiting for an election go on at once.
  void SetLeader(const std::string& address);
  // This replica won the lease (SetLeader(self) at once) and now serves
  // as the leader (SetPromoted, once it took over).
  void SetPromoted();

  // Forwards one unary call. nullopt: this replica leads now (serve it
  // here). Otherwise the leader's answer (or UNAVAILABLE if no leader
  // answered by the deadline), and *revision the revision it answered at
  // (0 if it did not say).
  template <typename Req, typename Resp>
  std::optional<grpc::Status> Call(const grpc::ServerContext* ctx, const Req& req, Resp* out,
                                   grpc::Status (v1::Herd::Stub::*method)(grpc::ClientContext*, const Req&, Resp*),
                                   int64_t* revision) {
    Attempt a;
    if (std::optional<grpc::Status> done = Begin(ctx, &a)) return done->ok() ? std::nullopt : done;
    while (true) {
      std::optional<grpc::Status> next = Next(&a);
      if (next) return next->ok() ? std::nullopt : next;  // OK = lead here
      auto call = a.Context();
      grpc::Status st = ((*a.stub).*method)(call.get(), req, out);
      if (Retry(&a, st)) continue;
      *revision = RevisionOf(*call);
      return st;
    }
  }

 private:
  struct Attempt {
    std::string pem;        // the caller's certificate
    std::string acting_as;  // passed on
    absl::Time deadline;
    std::string leader;  // tried last
    std::shared_ptr<v1::Herd::Stub> stub;  // kept alive by the call even if replaced
    int tries = 0;
    int64_t seen = 0;  // changes_ when `leader` was chosen
    std::unique_ptr<grpc::ClientContext> Context() const;
  };
  // nullopt: go on and forward; OK: serve it here (we lead); else the
  // error to answer with.
  std::optional<grpc::Status> Begin(const grpc::ServerContext* ctx, Attempt* a);
  // Waits for a leader other than us: nullopt (a->stub set), OK (we lead),
  // or the error to answer with.
  std::optional<grpc::Status> Next(Attempt* a);
  // Waits until SetLeader changes the leader or `pause` passes (or the
  // deadline: false), then forgets the cached leader unless told one.
  bool Await(const Attempt& a, absl::Duration pause);
  // True if `st` says the leader could not be reached (and time remains).
  bool Retry(Attempt* a, const grpc::Status& st);
  static int64_t RevisionOf(const grpc::ClientContext& call);
  std::shared_ptr<v1::Herd::Stub> StubFor(const std::string& address);

  const pki::Credential self_;
  const std::string self_address_;
  const FindLeader find_;
  const std::function<bool()> leading_;

  absl::Mutex mu_;
  std::string leader_ ABSL_GUARDED_BY(mu_);
  absl::Time looked_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  int64_t changes_ ABSL_GUARDED_BY(mu_) = 0;  // SetLeader calls that changed leader_
  bool promoted_ ABSL_GUARDED_BY(mu_) = false;
  struct Leader {
    std::shared_ptr<grpc::Channel> channel;
    std::shared_ptr<v1::Herd::Stub> stub;
  };
  std::map<std::string, Leader> stubs_ ABSL_GUARDED_BY(mu_);
};

}  // namespace herd::master
