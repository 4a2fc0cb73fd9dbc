#include "store/etcd/leader_lease.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/log.h"

namespace herd::store::etcd {

absl::StatusOr<std::string> LeaderLease::Holder(Client* client, const std::string& key) {
  pb::RangeRequest req;
  req.set_key(key);
  auto r = client->Range(req);
  if (!r.ok()) return r.status();
  if (r->kvs().empty()) return std::string();
  return r->kvs(0).value();
}

absl::StatusOr<std::unique_ptr<LeaderLease>> LeaderLease::Campaign(Client* client,
                                                                   LeaseOptions options,
                                                                   std::function<bool()> stop) {
  if (options.key.empty()) return absl::InvalidArgumentError("leader lease: empty key");
  int64_t lease = 0;
  int64_t ttl_s = 0;
  absl::Duration backoff = absl::Milliseconds(50);
  while (true) {
    if (stop && stop()) {
      if (lease != 0) (void)client->LeaseRevoke(lease);
      return absl::CancelledError("campaign stopped");
    }
    if (lease == 0) {
      auto g = client->LeaseGrant(options.ttl);
      if (!g.ok()) {
        HERD_LOG_WARN("leader lease: cannot grant a lease: {}", g.status().ToString());
        absl::SleepFor(backoff);
        backoff = std::min(backoff * 2, absl::Milliseconds(500));
        continue;
      }
      lease = g->id();
      ttl_s = g->ttl();
    }
    // Take the key if nobody holds it; else learn who does.
    pb::TxnRequest txn;
    auto* c = txn.add_compare();
    c->set_key(options.key);
    c->set_target(pb::Compare::CREATE);
    c->set_result(pb::Compare::EQUAL);
    c->set_create_revision(0);
    auto* put = txn.add_success()->mutable_request_put();
    put->set_key(options.key);
    put->set_value(options.value);
    put->set_lease(lease);
    txn.add_failure()->mutable_request_range()->set_key(options.key);
    auto r = client->Txn(txn);
    if (!r.ok()) {
      // NOT_FOUND: our lease expired while we waited; grant another.
      if (r.status().code() == absl::StatusCode::kNotFound) lease = 0;
      HERD_LOG_WARN("leader lease: campaign for {}: {}", options.key, r.status().ToString());
      absl::SleepFor(backoff);
      backoff = std::min(backoff * 2, absl::Milliseconds(500));
      continue;
    }
    backoff = absl::Milliseconds(50);
    if (r->succeeded()) {
      Fence fence{options.key, r->header().revision()};
      return std::unique_ptr<LeaderLease>(
          new LeaderLease(client, std::move(options), lease, ttl_s, std::move(fence)));
    }
    const auto& kvs = r->responses(0).response_range().kvs();
    if (options.on_holder) options.on_holder(kvs.empty() ? "" : kvs[0].value());
    if (!kvs.empty() && kvs[0].lease() == lease) {
      // Our own earlier attempt took it (its reply was lost).
      Fence fence{options.key, kvs[0].create_revision()};
      return std::unique_ptr<LeaderLease>(
          new LeaderLease(client, std::move(options), lease, ttl_s, std::move(fence)));
    }
    // Someone holds it: keep our lease alive while we wait for the key to go,
    // so that taking over costs one transaction.
    auto ka = client->LeaseKeepAlive(lease);
    if (!ka.ok() || *ka == 0) lease = 0;
    auto changed = client->WaitForChange(options.key, "", r->header().revision(), absl::Milliseconds(200));
    if (changed.ok() && options.on_holder) {
      for (const pb::Event& e : *changed) {
        if (e.type() == pb::Event::DELETE) options.on_holder("");
      }
    }
  }
}

LeaderLease::LeaderLease(Client* client, LeaseOptions options, int64_t lease_id, int64_t ttl_s,
                         Fence fence)
    : client_(client), opts_(std::move(options)), lease_id_(lease_id), fence_(std::move(fence)) {
  // How much of the lease was left when the key was taken is not known (it
  // may have been kept alive while campaigning), so renew it before counting
  // on it: until that answers, the lease counts as expiring right away.
  {
    absl::MutexLock l(&mu_);
    ttl_s_ = ttl_s;
  }
  const absl::Time renew_sent = absl::Now();
  auto ka = client_->LeaseKeepAlive(lease_id_, renew_sent + absl::Seconds(std::max<int64_t>(ttl_s, 1)));
  if (ka.ok() && *ka > 0) {
    absl::MutexLock l(&mu_);
    expires_ns_.store(absl::ToUnixNanos(renew_sent + absl::Seconds(*ka)));
    ttl_s_ = *ka;
  } else {
    held_.store(false);
  }
  keeper_ = std::thread([this] { KeepAliveLoop(); });
}

LeaderLease::~LeaderLease() {
  Resign();
  if (keeper_.joinable()) keeper_.join();
}

void LeaderLease::OnLost(std::function<void()> fn) {
  absl::MutexLock l(&mu_);
  on_lost_ = std::move(fn);
}

bool LeaderLease::WaitLost(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  absl::MutexLock l(&mu_);
  auto lost = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return !held() || stopping_; };
  // held() also turns false when the expiry passes, which no one signals.
  while (!lost() && absl::Now() < deadline) {
    absl::Time expiry = absl::FromUnixNanos(expires_ns_.load()) + absl::Milliseconds(1);
    mu_.AwaitWithDeadline(absl::Condition(&lost), std::min(deadline, expiry));
  }
  return held();
}

void LeaderLease::Lose(const std::string& why) {
  std::function<void()> fn;
  {
    absl::MutexLock l(&mu_);
    if (!held_.exchange(false)) return;
    fn = std::move(on_lost_);
  }
  HERD_LOG_WARN("leader lease on {} lost: {}", opts_.key, why);
  if (fn) fn();
}

void LeaderLease::Resign() {
  bool was_held;
  {
    absl::MutexLock l(&mu_);
    if (stopping_) return;
    stopping_ = true;
    was_held = held_.exchange(false);
  }
  if (was_held) {
    absl::Status s = client_->LeaseRevoke(lease_id_);
    if (!s.ok()) HERD_LOG_WARN("leader lease: revoke: {}", s.ToString());
  }
}

void LeaderLease::KeepAliveLoop() {
  while (true) {
    absl::Duration period;
    absl::Time expires;
    {
      absl::MutexLock l(&mu_);
      if (!held_.load()) return;
      period = absl::Seconds(std::max<int64_t>(ttl_s_, 1)) / 4;
      expires = absl::FromUnixNanos(expires_ns_.load());
      auto wake = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return stopping_; };
      // Wake for the next keep-alive, or at the expiry if that comes first.
      absl::Time next = std::min(absl::Now() + period, expires);
      mu_.AwaitWithDeadline(absl::Condition(&wake), next);
      if (stopping_) return;
    }
    if (absl::Now() >= expires) {
      Lose("no keep-alive answered within the lease's TTL");
      return;
    }
    const absl::Time sent = absl::Now();
    auto ttl = client_->LeaseKeepAlive(lease_id_, expires);
    if (!ttl.ok()) continue;  // retried next period, until the expiry
    if (*ttl == 0) {
      Lose("etcd says the lease expired");
      return;
    }
    absl::MutexLock l(&mu_);
    expires_ns_.store(absl::ToUnixNanos(sent + absl::Seconds(*ttl)));
    ttl_s_ = *ttl;
  }
}

}  // namespace herd::store::etcd
