#include "store/etcd/etcd_client.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <thread>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "store/etcd/etcd_rpc.grpc.pb.h"

namespace herd::store::etcd {

namespace {

absl::Status FromGrpc(const grpc::Status& s, const std::string& endpoint) {
  if (s.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()),
                      absl::StrCat("etcd ", endpoint, ": ", s.error_message()));
}

// Worth another endpoint: this one is down, cut off, leaderless or slow.
bool Retryable(const absl::Status& s) {
  return s.code() == absl::StatusCode::kUnavailable ||
         s.code() == absl::StatusCode::kDeadlineExceeded;
}

std::chrono::system_clock::time_point Deadline(absl::Time t) { return absl::ToChronoTime(t); }

}  // namespace

// One connection to a member. Replaced, not repaired: a gRPC channel whose
// connection failed (a member not up yet, or restarting) goes idle after its
// backoff and, in this gRPC (1.51), may sit in TRANSIENT_FAILURE for up to
// ~10 s before it connects again; a new channel connects at once.
struct Conn {
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<pb::KV::Stub> kv;
  std::unique_ptr<pb::Lease::Stub> lease;
  std::unique_ptr<pb::Watch::Stub> watch;
  absl::Time created;
};

struct Client::Endpoint {
  std::string address;
  std::shared_ptr<grpc::ChannelCredentials> creds;
  grpc::ChannelArguments args;
  absl::Mutex mu;
  std::shared_ptr<Conn> conn ABSL_GUARDED_BY(mu);

  std::shared_ptr<Conn> Get() {
    absl::MutexLock l(&mu);
    if (!conn) conn = Make();
    return conn;
  }
  // After a call could not connect: a fresh channel, at most every 200 ms.
  void Reset(const std::shared_ptr<Conn>& failed) {
    absl::MutexLock l(&mu);
    if (conn != failed || absl::Now() - failed->created < absl::Milliseconds(200)) return;
    conn = Make();
  }
  std::shared_ptr<Conn> Make() {
    auto c = std::make_shared<Conn>();
    c->channel = grpc::CreateCustomChannel(address, creds, args);
    c->kv = pb::KV::NewStub(c->channel);
    c->lease = pb::Lease::NewStub(c->channel);
    c->watch = pb::Watch::NewStub(c->channel);
    c->created = absl::Now();
    c->channel->GetState(/*try_to_connect=*/true);
    return c;
  }
};

std::string PrefixEnd(const std::string& prefix) {
  std::string end = prefix;
  while (!end.empty()) {
    unsigned char c = static_cast<unsigned char>(end.back());
    if (c < 0xff) {
      end.back() = static_cast<char>(c + 1);
      return end;
    }
    end.pop_back();
  }
  return std::string(1, '\0');  // every key
}

absl::StatusOr<EtcdUrl> ParseEtcdUrl(const std::string& url) {
  constexpr absl::string_view kScheme = "etcd://";
  if (!absl::StartsWith(url, kScheme)) {
    return absl::InvalidArgumentError(
        absl::StrCat("store URL '", url, "': expected etcd://HOST:PORT[,HOST:PORT...][/PREFIX]"));
  }
  std::string rest = url.substr(kScheme.size());
  EtcdUrl out;
  size_t slash = rest.find('/');
  if (slash != std::string::npos) {
    out.prefix = rest.substr(slash);
    rest = rest.substr(0, slash);
  }
  for (absl::string_view ep : absl::StrSplit(rest, ',')) {
    size_t colon = ep.rfind(':');
    int port = 0;
    if (ep.empty() || colon == absl::string_view::npos || colon == 0 ||
        !absl::SimpleAtoi(ep.substr(colon + 1), &port) || port <= 0 || port > 65535) {
      return absl::InvalidArgumentError(absl::StrCat("store URL '", url, "': endpoint '", ep,
                                                     "' is not HOST:PORT"));
    }
    out.endpoints.emplace_back(ep);
  }
  if (out.endpoints.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("store URL '", url, "' names no endpoint"));
  }
  return out;
}

Client::Client(ClientOptions options) : opts_(std::move(options)) {}
Client::~Client() = default;

absl::StatusOr<std::unique_ptr<Client>> Client::Connect(ClientOptions options) {
  if (options.endpoints.empty()) return absl::InvalidArgumentError("etcd: no endpoint given");
  std::unique_ptr<Client> c(new Client(std::move(options)));
  for (const std::string& address : c->opts_.endpoints) {
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(64 << 20);
    args.SetMaxSendMessageSize(64 << 20);
    // Notice a dead connection, and come back to a restarted member fast.
    // Not more often than every 5 s: etcd (--grpc-keepalive-min-time) closes
    // connections that ping more. Calls notice a dead member sooner anyway,
    // by their own deadlines.
    args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 10000);
    args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 3000);
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
    // A member that was not up yet is resolved again within a second, not 30.
    args.SetInt(GRPC_ARG_DNS_MIN_TIME_BETWEEN_RESOLUTIONS_MS, 1000);
    if (!c->opts_.tls_server_name.empty()) {
      args.SetSslTargetNameOverride(c->opts_.tls_server_name);
    }
    // Channels of their own, not shared with other channels to the same
    // address (whose failed connection would be ours too).
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    auto ep = std::make_unique<Endpoint>();
    ep->address = address;
    ep->creds = c->opts_.credentials ? c->opts_.credentials : grpc::InsecureChannelCredentials();
    ep->args = args;
    ep->Get();  // start connecting now
    c->endpoints_.push_back(std::move(ep));
  }
  return c;
}

std::string Client::CurrentEndpoint() const {
  return endpoints_[current_.load() % endpoints_.size()]->address;
}

template <typename Call>
absl::Status Client::Attempt(Call&& call, absl::Time deadline) {
  const absl::Time call_deadline = std::min(deadline, absl::Now() + opts_.call_timeout);
  const size_t n = endpoints_.size();
  const size_t max_attempts = 2 * n;
  absl::Status last;
  for (size_t attempt = 0; attempt < max_attempts; ++attempt) {
    const size_t at = current_.load() % n;
    Endpoint& ep = *endpoints_[at];
    std::shared_ptr<Conn> conn = ep.Get();
    grpc::ClientContext ctx;
    ctx.set_deadline(Deadline(std::min(call_deadline, absl::Now() + opts_.attempt_timeout)));
    last = FromGrpc(call(*conn, ctx), ep.address);
    if (!Retryable(last)) return last;
    if (conn->channel->GetState(false) == GRPC_CHANNEL_TRANSIENT_FAILURE) ep.Reset(conn);
    // Move on, unless another thread already did.
    size_t expected = at;
    current_.compare_exchange_strong(expected, (at + 1) % n);
    if (absl::Now() >= call_deadline) break;
  }
  return last;
}

absl::StatusOr<pb::RangeResponse> Client::Range(const pb::RangeRequest& req) {
  pb::RangeResponse resp;
  absl::Status s = Attempt([&](Conn& c, grpc::ClientContext& ctx) {
    resp.Clear();
    return c.kv->Range(&ctx, req, &resp);
  });
  if (!s.ok()) return s;
  return resp;
}

absl::StatusOr<pb::TxnResponse> Client::Txn(const pb::TxnRequest& req, absl::Time deadline) {
  pb::TxnResponse resp;
  absl::Status s = Attempt([&](Conn& c, grpc::ClientContext& ctx) {
    resp.Clear();
    return c.kv->Txn(&ctx, req, &resp);
  }, deadline);
  if (!s.ok()) return s;
  return resp;
}

absl::StatusOr<pb::PutResponse> Client::Put(const pb::PutRequest& req) {
  pb::PutResponse resp;
  absl::Status s = Attempt([&](Conn& c, grpc::ClientContext& ctx) {
    resp.Clear();
    return c.kv->Put(&ctx, req, &resp);
  });
  if (!s.ok()) return s;
  return resp;
}

absl::Status Client::Compact(int64_t revision) {
  pb::CompactionRequest req;
  req.set_revision(revision);
  pb::CompactionResponse resp;
  return Attempt([&](Conn& c, grpc::ClientContext& ctx) {
    return c.kv->Compact(&ctx, req, &resp);
  });
}

absl::StatusOr<pb::LeaseGrantResponse> Client::LeaseGrant(absl::Duration ttl) {
  pb::LeaseGrantRequest req;
  req.set_ttl(std::max<int64_t>(1, absl::ToInt64Seconds(absl::Ceil(ttl, absl::Seconds(1)))));
  pb::LeaseGrantResponse resp;
  absl::Status s = Attempt([&](Conn& c, grpc::ClientContext& ctx) {
    resp.Clear();
    return c.lease->LeaseGrant(&ctx, req, &resp);
  });
  if (!s.ok()) return s;
  if (!resp.error().empty()) return absl::UnavailableError(absl::StrCat("etcd lease: ", resp.error()));
  return resp;
}

absl::Status Client::LeaseRevoke(int64_t id) {
  pb::LeaseRevokeRequest req;
  req.set_id(id);
  pb::LeaseRevokeResponse resp;
  return Attempt([&](Conn& c, grpc::ClientContext& ctx) {
    return c.lease->LeaseRevoke(&ctx, req, &resp);
  });
}

absl::StatusOr<int64_t> Client::LeaseKeepAlive(int64_t id, absl::Time deadline) {
  pb::LeaseKeepAliveRequest req;
  req.set_id(id);
  pb::LeaseKeepAliveResponse resp;
  absl::Status s = Attempt([&](Conn& c, grpc::ClientContext& ctx) {
    resp.Clear();
    auto stream = c.lease->LeaseKeepAlive(&ctx);
    if (!stream->Write(req)) return stream->Finish();
    if (!stream->Read(&resp)) return stream->Finish();
    stream->WritesDone();
    ctx.TryCancel();  // the server keeps the stream open; we are done with it
    grpc::Status fin = stream->Finish();
    (void)fin;
    return grpc::Status::OK;
  }, deadline);
  if (!s.ok()) return s;
  return resp.ttl() > 0 ? resp.ttl() : 0;
}

absl::StatusOr<std::vector<pb::Event>> Client::WaitForChange(const std::string& key,
                                                             const std::string& range_end,
                                                             int64_t after_revision,
                                                             absl::Duration timeout) {
  const size_t at = current_.load() % endpoints_.size();
  Endpoint& ep = *endpoints_[at];
  std::shared_ptr<Conn> conn = ep.Get();
  grpc::ClientContext ctx;
  ctx.set_deadline(Deadline(absl::Now() + timeout));
  // Fail the stream if this member has no leader, instead of staying silent.
  ctx.AddMetadata("hasleader", "true");
  auto stream = conn->watch->Watch(&ctx);
  pb::WatchRequest req;
  auto* create = req.mutable_create_request();
  create->set_key(key);
  create->set_range_end(range_end);
  create->set_start_revision(after_revision + 1);
  std::vector<pb::Event> events;
  bool open = stream->Write(req);
  if (open) {
    pb::WatchResponse resp;
    while ((open = stream->Read(&resp))) {
      if (resp.compact_revision() > 0) {
        ctx.TryCancel();
        stream->Finish();
        return absl::OutOfRangeError(absl::StrCat("etcd history compacted to revision ",
                                                  resp.compact_revision()));
      }
      for (auto& e : *resp.mutable_events()) events.push_back(std::move(e));
      if (!events.empty() || resp.canceled()) break;
    }
  }
  if (open) ctx.TryCancel();  // leaving a stream the server would keep open
  grpc::Status fin = stream->Finish();
  if (!events.empty()) return events;
  absl::Status s = FromGrpc(fin, ep.address);
  // etcd ends a watch whose client deadline passed with UNKNOWN "context
  // deadline exceeded": a timeout too.
  if (s.ok() || fin.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED ||
      fin.error_code() == grpc::StatusCode::CANCELLED ||
      absl::StrContains(fin.error_message(), "deadline exceeded")) {
    return events;  // nothing changed in time
  }
  if (Retryable(s)) {
    if (conn->channel->GetState(false) == GRPC_CHANNEL_TRANSIENT_FAILURE) ep.Reset(conn);
    size_t expected = at;
    current_.compare_exchange_strong(expected, (at + 1) % endpoints_.size());
  }
  return s;
}

struct WatchStream::Impl {
  std::shared_ptr<Conn> conn;
  std::string address;
  grpc::ClientContext ctx;
  std::unique_ptr<grpc::ClientReaderWriter<pb::WatchRequest, pb::WatchResponse>> stream;
  std::thread reader;

  absl::Mutex mu;
  std::vector<pb::Event> events ABSL_GUARDED_BY(mu);
  absl::Status broken ABSL_GUARDED_BY(mu);  // not OK once the stream ended

  // Reads until the stream ends or is cancelled.
  void Read() {
    pb::WatchResponse resp;
    absl::Status end;
    while (stream->Read(&resp)) {
      if (resp.compact_revision() > 0) {
        end = absl::OutOfRangeError(absl::StrCat("etcd history compacted to revision ", resp.compact_revision()));
        break;
      }
      if (resp.canceled()) {
        end = absl::UnavailableError(absl::StrCat("etcd ", address, " cancelled the watch: ", resp.cancel_reason()));
        break;
      }
      if (resp.events().empty()) continue;
      absl::MutexLock l(&mu);
      for (auto& e : *resp.mutable_events()) events.push_back(std::move(e));
    }
    if (end.ok()) {
      ctx.TryCancel();
      grpc::Status fin = stream->Finish();
      end = fin.ok() ? absl::UnavailableError(absl::StrCat("etcd ", address, " closed the watch"))
                     : FromGrpc(fin, address);
      if (end.ok()) end = absl::UnavailableError("watch ended");
    } else {
      ctx.TryCancel();
      (void)stream->Finish();
    }
    absl::MutexLock l(&mu);
    broken = end;
  }
};

WatchStream::WatchStream(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

WatchStream::~WatchStream() {
  impl_->ctx.TryCancel();
  if (impl_->reader.joinable()) impl_->reader.join();
}

absl::StatusOr<std::vector<pb::Event>> WatchStream::Next(absl::Duration timeout) {
  absl::MutexLock l(&impl_->mu);
  auto ready = [this]() ABSL_SHARED_LOCKS_REQUIRED(impl_->mu) {
    return !impl_->events.empty() || !impl_->broken.ok();
  };
  impl_->mu.AwaitWithTimeout(absl::Condition(&ready), timeout);
  if (!impl_->events.empty()) return std::exchange(impl_->events, {});
  if (!impl_->broken.ok()) return impl_->broken;
  return std::vector<pb::Event>{};
}

absl::StatusOr<std::unique_ptr<WatchStream>> Client::Watch(const std::string& key, const std::string& range_end,
                                                          int64_t after_revision) {
  const size_t at = current_.load() % endpoints_.size();
  Endpoint& ep = *endpoints_[at];
  auto impl = std::make_unique<WatchStream::Impl>();
  impl->conn = ep.Get();
  impl->address = ep.address;
  // Fail the stream if this member has no leader, instead of staying silent.
  impl->ctx.AddMetadata("hasleader", "true");
  impl->stream = impl->conn->watch->Watch(&impl->ctx);
  pb::WatchRequest req;
  auto* create = req.mutable_create_request();
  create->set_key(key);
  create->set_range_end(range_end);
  create->set_start_revision(after_revision + 1);
  if (!impl->stream->Write(req)) {
    impl->ctx.TryCancel();
    absl::Status st = FromGrpc(impl->stream->Finish(), ep.address);
    if (st.ok()) st = absl::UnavailableError(absl::StrCat("etcd ", ep.address, ": cannot open a watch"));
    if (impl->conn->channel->GetState(false) == GRPC_CHANNEL_TRANSIENT_FAILURE) ep.Reset(impl->conn);
    size_t expected = at;
    current_.compare_exchange_strong(expected, (at + 1) % endpoints_.size());
    return st;
  }
  WatchStream::Impl* raw = impl.get();
  raw->reader = std::thread([raw] { raw->Read(); });
  return std::unique_ptr<WatchStream>(new WatchStream(std::move(impl)));
}

}  // namespace herd::store::etcd
