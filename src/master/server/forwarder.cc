#include "master/server/forwarder.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "rpc/rpc.h"

namespace herd::master {

Forwarder::Forwarder(pki::Credential self, std::string self_address, FindLeader find,
                     std::function<bool()> leading)
    : self_(std::move(self)),
      self_address_(std::move(self_address)),
      find_(std::move(find)),
      leading_(std::move(leading)) {}

std::string Forwarder::KnownLeader() {
  {
    absl::MutexLock l(&mu_);
    if (absl::Now() - looked_ < absl::Seconds(1)) return leader_;
  }
  absl::StatusOr<std::string> found = find_();
  absl::MutexLock l(&mu_);
  if (found.ok() && !promoted_) {
    leader_ = *found;
    looked_ = absl::Now();
  }
  return leader_;
}

std::shared_ptr<v1::Herd::Stub> Forwarder::StubFor(const std::string& address) {
  absl::MutexLock l(&mu_);
  Leader& to = stubs_[address];
  // A replica restarts on its address: a channel that failed to reach it
  // while it was down waits out gRPC's reconnect backoff (up to a second)
  // before trying again, so once it leads, a fresh channel reaches it now.
  if (!to.channel || to.channel->GetState(false) == GRPC_CHANNEL_TRANSIENT_FAILURE) {
    to.channel = rpc::Channel(address, self_, rpc::MasterIdentity());
    to.stub = v1::Herd::NewStub(to.channel);
  }
  return to.stub;
}

std::unique_ptr<grpc::ClientContext> Forwarder::Attempt::Context() const {
  auto c = std::make_unique<grpc::ClientContext>();
  c->set_deadline(absl::ToChronoTime(deadline));
  c->AddMetadata(rpc::kForwardedForKey, pem);
  if (!acting_as.empty()) c->AddMetadata(rpc::kActingAsKey, acting_as);
  return c;
}

std::optional<grpc::Status> Forwarder::Begin(const grpc::ServerContext* ctx, Attempt* a) {
  const absl::Time their = absl::FromChrono(ctx->deadline());
  a->deadline = std::min(their, absl::Now() + kMaxWait);
  if (ctx->client_metadata().count(rpc::kForwardedForKey) > 0) {
    // The sender thinks we lead. If we just won the lease, we are taking
    // over (milliseconds): serve it once we have. Else it was wrong; it
    // retries.
    absl::MutexLock l(&mu_);
    auto settled = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return promoted_ || leader_ != self_address_; };
    mu_.AwaitWithDeadline(absl::Condition(&settled), std::min(a->deadline, absl::Now() + absl::Seconds(2)));
    if (promoted_) return grpc::Status::OK;
    return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                        absl::StrCat("the master at ", self_address_, " is not the leader (leadership is changing)"));
  }
  absl::StatusOr<std::string> pem = rpc::CallerPem(ctx);
  if (!pem.ok()) return rpc::ToGrpc(pem.status());
  a->pem = *std::move(pem);
  a->acting_as = rpc::ActingAs(ctx);
  return std::nullopt;
}

void Forwarder::SetPromoted() {
  absl::MutexLock l(&mu_);
  promoted_ = true;
  leader_ = self_address_;
  looked_ = absl::Now();
  ++changes_;
}

void Forwarder::SetLeader(const std::string& address) {
  absl::MutexLock l(&mu_);
  looked_ = absl::Now();
  if (leader_ == address) return;
  leader_ = address;
  ++changes_;
}

bool Forwarder::Await(const Attempt& a, absl::Duration pause) {
  const absl::Time until = std::min(absl::Now() + pause, a.deadline);
  absl::MutexLock l(&mu_);
  auto changed = [&]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return changes_ != a.seen; };
  if (mu_.AwaitWithDeadline(absl::Condition(&changed), until)) return true;
  looked_ = absl::InfinitePast();  // not told: look it up again
  return absl::Now() < a.deadline;
}

std::optional<grpc::Status> Forwarder::Next(Attempt* a) {
  auto unavailable = [&](const std::string& leader) {
    return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                        leader.empty() ? "no master leads the cell at the moment (an election is under way); retry"
                                       : absl::StrCat("the leader at ", leader, " does not answer; retry"));
  };
  if (a->tries > 0) {
    // The last try failed: the lease may be moving. Wait until the campaign
    // says who leads, or a pause that grows a little (so a leader that died
    // holding its lease is not hammered until the lease expires).
    if (!Await(*a, absl::Milliseconds(std::min(50 * a->tries, 200)))) return unavailable(a->leader);
  }
  while (true) {
    if (leading_()) return grpc::Status::OK;
    std::string leader = KnownLeader();
    if (!leader.empty() && leader != self_address_) {
      {
        absl::MutexLock l(&mu_);
        a->seen = changes_;
      }
      a->leader = leader;
      a->stub = StubFor(leader);
      ++a->tries;
      return std::nullopt;
    }
    // Nobody leads (or the lease names us and we are not serving as leader
    // yet): wait for the election.
    {
      absl::MutexLock l(&mu_);
      a->seen = changes_;
    }
    if (!Await(*a, absl::Milliseconds(100))) return unavailable("");
  }
}

bool Forwarder::Retry(Attempt* a, const grpc::Status& st) {
  if (st.error_code() != grpc::StatusCode::UNAVAILABLE) return false;
  return absl::Now() < a->deadline;
}

int64_t Forwarder::RevisionOf(const grpc::ClientContext& call) {
  const auto& md = call.GetServerTrailingMetadata();
  auto it = md.find(rpc::kRevisionKey);
  int64_t rev = 0;
  if (it != md.end() && absl::SimpleAtoi(absl::string_view(it->second.data(), it->second.size()), &rev)) return rev;
  return 0;
}

}  // namespace herd::master
