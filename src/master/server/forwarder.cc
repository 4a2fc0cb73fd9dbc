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
  if (found.ok()) {
    leader_ = *found;
    looked_ = absl::Now();
  }
  return leader_;
}

v1::Herd::Stub* Forwarder::StubFor(const std::string& address) {
  absl::MutexLock l(&mu_);
  auto& stub = stubs_[address];
  if (!stub) stub = v1::Herd::NewStub(rpc::Channel(address, self_, rpc::MasterIdentity()));
  return stub.get();
}

std::unique_ptr<grpc::ClientContext> Forwarder::Attempt::Context() const {
  auto c = std::make_unique<grpc::ClientContext>();
  c->set_deadline(absl::ToChronoTime(deadline));
  c->AddMetadata(rpc::kForwardedForKey, pem);
  if (!acting_as.empty()) c->AddMetadata(rpc::kActingAsKey, acting_as);
  return c;
}

grpc::Status Forwarder::Begin(const grpc::ServerContext* ctx, Attempt* a) {
  if (ctx->client_metadata().count(rpc::kForwardedForKey) > 0) {
    // The sender thought we lead; we do not (or not yet). It retries.
    return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                        absl::StrCat("the master at ", self_address_, " is not the leader (leadership is changing)"));
  }
  absl::StatusOr<std::string> pem = rpc::CallerPem(ctx);
  if (!pem.ok()) return rpc::ToGrpc(pem.status());
  a->pem = *std::move(pem);
  a->acting_as = rpc::ActingAs(ctx);
  const absl::Time their = absl::FromChrono(ctx->deadline());
  a->deadline = std::min(their, absl::Now() + kMaxWait);
  return grpc::Status::OK;
}

std::optional<grpc::Status> Forwarder::Next(Attempt* a) {
  auto forget = [this] {
    absl::MutexLock l(&mu_);
    looked_ = absl::InfinitePast();
  };
  auto unavailable = [&](const std::string& leader) {
    return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                        leader.empty() ? "no master leads the cell at the moment (an election is under way); retry"
                                       : absl::StrCat("the leader at ", leader, " does not answer; retry"));
  };
  if (a->tries > 0) {
    // The last try failed: the lease may have moved. Look again after a
    // pause that grows a little, so a dead leader is not hammered.
    const absl::Duration pause = absl::Milliseconds(std::min(50 * a->tries, 250));
    if (absl::Now() + pause >= a->deadline) return unavailable(a->leader);
    absl::SleepFor(pause);
    forget();
  }
  while (true) {
    if (leading_()) return grpc::Status::OK;
    std::string leader = KnownLeader();
    if (!leader.empty() && leader != self_address_) {
      a->leader = leader;
      a->stub = StubFor(leader);
      ++a->tries;
      return std::nullopt;
    }
    // Nobody leads (or the lease names us and we are not serving as leader
    // yet): wait for the election.
    const absl::Duration pause = absl::Milliseconds(100);
    if (absl::Now() + pause >= a->deadline) return unavailable("");
    absl::SleepFor(pause);
    forget();
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
