#include "master/server/grpc_api.h"

#include "absl/strings/str_cat.h"
#include "master/core/admission/identity.h"
#include "master/web/web_ui.h"
#include "base/status.h"
#include "rpc/rpc.h"

namespace herd::master {
namespace {

// Runs `call` and copies its value into *out.
template <typename T>
grpc::Status Reply(absl::StatusOr<T> result, T* out) {
  if (!result.ok()) return rpc::ToGrpc(result.status());
  *out = std::move(*result);
  return grpc::Status::OK;
}

}  // namespace

// Who is calling: the certificate the connection's TLS handshake verified
// (or, from a follower master, the certificate of the caller it forwards
// for, verified here again), acting on behalf of the user it names if it may.
absl::StatusOr<Principal> HerdService::Caller(const grpc::ServerContextBase* ctx) {
  absl::StatusOr<pki::CertInfo> cert = rpc::Caller(ctx);
  if (!cert.ok()) return cert.status();
  const std::optional<pki::Credential>& self = core_->options().credential;
  absl::StatusOr<pki::CertInfo> forwarded =
      rpc::ForwardedFor(ctx, *cert, self ? self->ca_pem : "", absl::ToUnixSeconds(absl::Now()));
  if (forwarded.ok()) {
    cert = std::move(forwarded);
  } else if (forwarded.status().code() != absl::StatusCode::kNotFound) {
    return forwarded.status();
  }
  const std::string acting_as = rpc::ActingAs(ctx);
  absl::StatusOr<Principal> who = Identify(*cert, acting_as, core_->Users());
  if (!who.ok()) core_->options().authorizer->Unidentified(cert->subject.name, cert->serial, acting_as, who.status());
  return who;
}

absl::StatusOr<Principal> HerdService::Admit(const grpc::ServerContextBase* ctx) {
  absl::StatusOr<Principal> who = Caller(ctx);
  if (!who.ok() || limiter_ == nullptr) return who;
  if (absl::Status st = limiter_->Admit(*who); !st.ok()) return st;
  return who;
}

absl::Status HerdService::HoldCall(const Principal& who, const char* what, StreamLimits::Slot* slot) {
  if (calls_ == nullptr) return absl::OkStatus();
  absl::StatusOr<StreamLimits::Slot> held = calls_->Acquire(who, what);
  if (!held.ok()) return held.status();
  *slot = std::move(*held);
  return absl::OkStatus();
}

absl::StatusOr<StreamLimits::Slot> HerdService::OpenStream(const Principal& who, const std::string& what,
                                                           std::function<void()> end) {
  if (streams_ == nullptr) return StreamLimits::Slot();
  return streams_->Acquire(who, what, std::move(end));
}

namespace {
const grpc::Status kRevoked(grpc::StatusCode::UNAUTHENTICATED, "the credential that opened this stream was revoked");
}  // namespace

template <typename Msg, typename OpenFn>
grpc::ServerWriteReactor<Msg>* HerdService::ServeStream(grpc::CallbackServerContext* ctx, const char* what,
                                                        bool barrier, OpenFn open) {
  auto stream = CursorStream<Msg>::Make(&pump_);
  absl::StatusOr<Principal> who = Admit(ctx);
  if (!who.ok()) return stream->Refuse(rpc::ToGrpc(who.status()));
  absl::StatusOr<StreamLimits::Slot> slot = OpenStream(*who, what, stream->Ender(kRevoked));
  if (!slot.ok()) return stream->Refuse(rpc::ToGrpc(slot.status()));
  if (barrier) Barrier();
  absl::StatusOr<std::unique_ptr<Cursor<Msg>>> cursor = open(*who);
  if (!cursor.ok()) return stream->Refuse(rpc::ToGrpc(cursor.status()));
  return stream->Serve(std::move(*cursor), std::move(*slot));
}

void HerdService::Stamp(grpc::ServerContext* ctx, int64_t revision) const {
  ctx->AddTrailingMetadata(rpc::kRevisionKey, absl::StrCat(revision));
  ctx->AddTrailingMetadata(rpc::kRoleKey, core_->leading() ? "leader" : "follower");
}

void HerdService::Barrier() {
  if (read_barrier_ && !core_->leading()) read_barrier_();
}

void HerdService::CaughtUp(grpc::ServerContext* ctx, int64_t revision) {
  if (revision > 0) {
    // Read-your-writes through this replica: answer once the change the
    // leader made is applied here too (bounded: the answer stands anyway).
    const absl::Time until = std::min(absl::FromChrono(ctx->deadline()), absl::Now() + absl::Seconds(5));
    core_->committer().WaitApplied(revision, until - absl::Now());
  }
  Stamp(ctx, std::max(revision, core_->committer().revision()));
}

// Reads: served by any replica, from the state it has, stamped with its
// revision. Changes (and what only the leader knows) a follower forwards,
// once it knows the caller and the caller is within its rate.
#define HERD_CALL_IMPL(api, method, change)                                             \
  absl::StatusOr<Principal> who = Admit(ctx);                                         \
  if (!who.ok()) return rpc::ToGrpc(who.status());                                   \
  StreamLimits::Slot call_slot;                                                       \
  if (absl::Status held = HoldCall(*who, #method, &call_slot); !held.ok()) {          \
    return rpc::ToGrpc(held);                                                         \
  }                                                                                   \
  if (change && forwarder_ != nullptr && !core_->leading()) {                         \
    int64_t revision = 0;                                                             \
    std::optional<grpc::Status> forwarded =                                           \
        forwarder_->Call(ctx, *req, out, &v1::Herd::Stub::method, &revision);         \
    if (forwarded) {                                                                  \
      CaughtUp(ctx, revision);                                                        \
      return *forwarded;                                                              \
    }                                                                                 \
  }                                                                                   \
  if (!change) Barrier();                                                              \
  grpc::Status answer = Reply(core_->api().method(*who, *req), out);                  \
  Stamp(ctx, core_->committer().revision());                                          \
  return answer
#define HERD_CALL(api, method) HERD_CALL_IMPL(api, method, false)
#define HERD_CHANGE(api, method) HERD_CALL_IMPL(api, method, true)

grpc::Status HerdService::Submit(grpc::ServerContext* ctx, const v1::SubmitRequest* req, v1::SubmitResponse* out) {
  HERD_CHANGE(jobs, Submit);
}
grpc::Status HerdService::Kill(grpc::ServerContext* ctx, const v1::KillRequest* req, v1::KillResponse* out) {
  HERD_CHANGE(jobs, Kill);
}
grpc::Status HerdService::Scale(grpc::ServerContext* ctx, const v1::ScaleRequest* req, v1::ScaleResponse* out) {
  HERD_CHANGE(jobs, Scale);
}
grpc::Status HerdService::Rollback(grpc::ServerContext* ctx, const v1::RollbackRequest* req,
                                   v1::RollbackResponse* out) {
  HERD_CHANGE(rollouts, Rollback);
}
grpc::Status HerdService::SetRollout(grpc::ServerContext* ctx, const v1::SetRolloutRequest* req,
                                     v1::SetRolloutResponse* out) {
  HERD_CHANGE(rollouts, SetRollout);
}
grpc::Status HerdService::History(grpc::ServerContext* ctx, const v1::HistoryRequest* req,
                                  v1::HistoryResponse* out) {
  HERD_CALL(rollouts, History);
}
grpc::Status HerdService::GetJob(grpc::ServerContext* ctx, const v1::GetJobRequest* req, v1::GetJobResponse* out) {
  HERD_CALL(jobs, GetJob);
}
grpc::Status HerdService::ListJobs(grpc::ServerContext* ctx, const v1::ListJobsRequest* req, v1::ListJobsResponse* out) {
  HERD_CALL(jobs, ListJobs);
}
grpc::Status HerdService::ListTasks(grpc::ServerContext* ctx, const v1::ListTasksRequest* req,
                                    v1::ListTasksResponse* out) {
  HERD_CALL(jobs, ListTasks);
}
grpc::Status HerdService::GetTask(grpc::ServerContext* ctx, const v1::GetTaskRequest* req, v1::GetTaskResponse* out) {
  HERD_CALL(jobs, GetTask);
}
grpc::Status HerdService::ListMachines(grpc::ServerContext* ctx, const v1::ListMachinesRequest* req,
                                       v1::ListMachinesResponse* out) {
  HERD_CALL(machines, ListMachines);
}
grpc::Status HerdService::DrainMachines(grpc::ServerContext* ctx, const v1::DrainMachinesRequest* req,
                                        v1::DrainMachinesResponse* out) {
  HERD_CHANGE(machines, DrainMachines);
}
grpc::Status HerdService::SetQuota(grpc::ServerContext* ctx, const v1::SetQuotaRequest* req, v1::SetQuotaResponse* out) {
  HERD_CHANGE(machines, SetQuota);
}
grpc::Status HerdService::ListQuotas(grpc::ServerContext* ctx, const v1::ListQuotasRequest* req,
                                     v1::ListQuotasResponse* out) {
  HERD_CALL(machines, ListQuotas);
}
grpc::Status HerdService::MachineChanged(grpc::ServerContext* ctx, const v1::MachineChangedRequest* req,
                                         v1::MachineChangedResponse* out) {
  HERD_CHANGE(machines, MachineChanged);
}
grpc::Status HerdService::RegisterMachine(grpc::ServerContext* ctx, const v1::RegisterMachineRequest* req,
                                          v1::RegisterMachineResponse* out) {
  HERD_CHANGE(machines, RegisterMachine);
}
grpc::Status HerdService::Propose(grpc::ServerContext* ctx, const v1::ProposeRequest* req, v1::ProposeResponse* out) {
  HERD_CHANGE(jobs, Propose);
}
grpc::Status HerdService::Why(grpc::ServerContext* ctx, const v1::WhyRequest* req, v1::WhyResponse* out) {
  // The scheduler's reasons live in the leader's memory.
  HERD_CHANGE(jobs, Why);
}
grpc::Status HerdService::GetCell(grpc::ServerContext* ctx, const v1::GetCellRequest*, v1::CellInfo* out) {
  absl::StatusOr<Principal> who = Admit(ctx);
  if (!who.ok()) return rpc::ToGrpc(who.status());
  StreamLimits::Slot call_slot;
  if (absl::Status held = HoldCall(*who, "GetCell", &call_slot); !held.ok()) return rpc::ToGrpc(held);
  Barrier();
  grpc::Status st = Reply(core_->machines().GetCell(*who), out);
  Describe(out);
  Stamp(ctx, out->revision());
  return st;
}

void HerdService::Describe(v1::CellInfo* out) const {
  const bool leading = core_->leading();
  out->set_leader(leading || forwarder_ == nullptr ? self_ : forwarder_->KnownLeader());
  out->set_store(store_);
  out->set_replica(self_);
  out->set_role(leading ? "leader" : "follower");
  out->set_http(http_);
  out->set_dns(dns_);
}

// Served by the master asked (its own key signs the link, and the link is
// to its own --http address), never forwarded.
grpc::Status HerdService::CreateWebLogin(grpc::ServerContext* ctx, const v1::CreateWebLoginRequest*,
                                         v1::CreateWebLoginResponse* out) {
  absl::StatusOr<Principal> who = Admit(ctx);
  if (!who.ok()) return rpc::ToGrpc(who.status());
  StreamLimits::Slot call_slot;
  if (absl::Status held = HoldCall(*who, "CreateWebLogin", &call_slot); !held.ok()) return rpc::ToGrpc(held);
  if (absl::Status st = core_->access().OpenWebUi(*who); !st.ok()) return rpc::ToGrpc(st);
  if (web_ == nullptr || http_.empty()) {
    return rpc::ToGrpc(absl::FailedPreconditionError(
        absl::StrCat("master ", self_, " serves no web UI (start it with herd master --http HOST:PORT)")));
  }
  absl::StatusOr<pki::CertInfo> cert = rpc::Caller(ctx);
  if (!cert.ok()) return rpc::ToGrpc(cert.status());
  const int64_t now_ms = absl::ToUnixMillis(absl::Now());
  const std::string token = web_->sessions().MintLogin(*cert, std::string(rpc::ActingAs(ctx)), now_ms);
  out->set_url(absl::StrCat("https://", http_, "/login?token=", token));
  out->set_expires_ms(std::min(now_ms + web::WebSessions::kLoginValidMs, cert->not_after_s * 1000));
  if (const auto& self = core_->options().credential) out->set_server_name(pki::ServerName(self->info.subject));
  Stamp(ctx, core_->committer().revision());
  return grpc::Status::OK;
}
grpc::Status HerdService::GrantAccess(grpc::ServerContext* ctx, const v1::GrantAccessRequest* req,
                                      v1::GrantAccessResponse* out) {
  HERD_CHANGE(access, GrantAccess);
}
grpc::Status HerdService::IssueCredential(grpc::ServerContext* ctx, const v1::IssueCredentialRequest* req,
                                          v1::IssueCredentialResponse* out) {
  HERD_CHANGE(access, IssueCredential);
}
grpc::Status HerdService::UpdateUser(grpc::ServerContext* ctx, const v1::UpdateUserRequest* req,
                                     v1::UpdateUserResponse* out) {
  HERD_CHANGE(access, UpdateUser);
}
grpc::Status HerdService::Resolve(grpc::ServerContext* ctx, const v1::ResolveRequest* req, v1::ResolveResponse* out) {
  HERD_CALL(names, Resolve);
}

grpc::Status HerdService::CreateJoinToken(grpc::ServerContext* ctx, const v1::CreateJoinTokenRequest* req,
                                          v1::CreateJoinTokenResponse* out) {
  HERD_CHANGE(join, CreateJoinToken);
}
grpc::Status HerdService::ListJoinTokens(grpc::ServerContext* ctx, const v1::ListJoinTokensRequest* req,
                                         v1::ListJoinTokensResponse* out) {
  HERD_CALL(join, ListJoinTokens);
}
grpc::Status HerdService::RevokeJoinToken(grpc::ServerContext* ctx, const v1::RevokeJoinTokenRequest* req,
                                          v1::RevokeJoinTokenResponse* out) {
  HERD_CHANGE(join, RevokeJoinToken);
}

#undef HERD_CHANGE
#undef HERD_CALL
#undef HERD_CALL_IMPL

// Read-only SQL on the history. The leader's history is the whole one (the
// usage its agents report reaches only it), so a follower forwards.
grpc::Status HerdService::QueryHistory(grpc::ServerContext* ctx, const v1::QueryHistoryRequest* req,
                                       v1::QueryHistoryResponse* out) {
  constexpr int kMaxConcurrent = 4;
  constexpr int kMaxConcurrentPerUser = 2;
  constexpr int32_t kMaxRows = 100'000;
  absl::StatusOr<Principal> who = Admit(ctx);
  if (!who.ok()) return rpc::ToGrpc(who.status());
  StreamLimits::Slot call_slot;
  if (absl::Status held = HoldCall(*who, "QueryHistory", &call_slot); !held.ok()) return rpc::ToGrpc(held);
  if (forwarder_ != nullptr && !core_->leading()) {
    int64_t revision = 0;
    std::optional<grpc::Status> forwarded =
        forwarder_->Call(ctx, *req, out, &v1::Herd::Stub::QueryHistory, &revision);
    if (forwarded) {
      Stamp(ctx, revision);
      return *forwarded;
    }
  }
  if (absl::Status st = core_->access().QueryHistory(*who); !st.ok()) return rpc::ToGrpc(st);
  if (history_ == nullptr) {
    return rpc::ToGrpc(absl::FailedPreconditionError("this master keeps no history (herd master --history none)"));
  }
  if (req->max_rows() < 0 || req->max_rows() > kMaxRows) {
    return rpc::ToGrpc(
        absl::InvalidArgumentError(absl::StrCat("max_rows: ", req->max_rows(), " is not within 0..", kMaxRows)));
  }
  const std::string user = who->acting_user.empty() ? who->name : who->acting_user;
  {
    absl::MutexLock l(&queries_mu_);
    if (queries_running_ >= kMaxConcurrent) {
      return rpc::ToGrpc(absl::ResourceExhaustedError(
          absl::StrCat("history: ", kMaxConcurrent, " queries are running already; try again shortly")));
    }
    if (queries_by_user_[user] >= kMaxConcurrentPerUser) {
      return rpc::ToGrpc(absl::ResourceExhaustedError(absl::StrCat(
          "history: ", user, " has ", kMaxConcurrentPerUser, " queries running already; wait for one to end")));
    }
    ++queries_running_;
    ++queries_by_user_[user];
  }
  history::QueryLimits limits;
  if (req->max_rows() > 0) limits.max_rows = req->max_rows();
  limits.timeout = std::min(limits.timeout, absl::FromChrono(ctx->deadline()) - absl::Now());
  grpc::Status st = Reply(history_->Query(req->sql(), limits), out);
  {
    absl::MutexLock l(&queries_mu_);
    --queries_running_;
    if (--queries_by_user_[user] == 0) queries_by_user_.erase(user);
  }
  Stamp(ctx, core_->committer().revision());
  return st;
}

// The alarms live in the leader (it evaluates them): a follower forwards.
grpc::Status HerdService::ListAlerts(grpc::ServerContext* ctx, const v1::ListAlertsRequest* req,
                                     v1::ListAlertsResponse* out) {
  absl::StatusOr<Principal> who = Admit(ctx);
  if (!who.ok()) return rpc::ToGrpc(who.status());
  StreamLimits::Slot call_slot;
  if (absl::Status held = HoldCall(*who, "ListAlerts", &call_slot); !held.ok()) return rpc::ToGrpc(held);
  if (forwarder_ != nullptr && !core_->leading()) {
    int64_t revision = 0;
    std::optional<grpc::Status> forwarded = forwarder_->Call(ctx, *req, out, &v1::Herd::Stub::ListAlerts, &revision);
    if (forwarded) {
      Stamp(ctx, revision);
      return *forwarded;
    }
  }
  if (absl::Status st = core_->access().ListAlerts(*who); !st.ok()) return rpc::ToGrpc(st);
  if (alerts_ != nullptr) *out = alerts_->List(req->all());
  Stamp(ctx, core_->committer().revision());
  return grpc::Status::OK;
}

absl::StatusOr<std::string> HerdService::AdmitAnonymous(const grpc::ServerContext* ctx) {
  // "ipv4:10.0.0.7:51234" -> "10.0.0.7"; "ipv6:[::1]:5" -> "[::1]".
  std::string host = ctx->peer();
  if (size_t colon = host.find(':'); colon != std::string::npos) host = host.substr(colon + 1);
  if (size_t port = host.rfind(':'); port != std::string::npos) host.resize(port);
  if (limiter_ != nullptr) {
    HERD_RETURN_IF_ERROR(limiter_->Admit(Principal::User(absl::StrCat("join@", host))));
  }
  return host;
}

grpc::Status HerdService::GetJoinInfo(grpc::ServerContext* ctx, const v1::GetJoinInfoRequest*,
                                      v1::GetJoinInfoResponse* out) {
  absl::StatusOr<std::string> peer = AdmitAnonymous(ctx);
  if (!peer.ok()) return rpc::ToGrpc(peer.status());
  return Reply(core_->join().GetJoinInfo(), out);
}

grpc::Status HerdService::Join(grpc::ServerContext* ctx, const v1::JoinRequest* req, v1::JoinResponse* out) {
  absl::StatusOr<std::string> peer = AdmitAnonymous(ctx);
  if (!peer.ok()) return rpc::ToGrpc(peer.status());
  if (!core_->leading()) {
    // (Not forwarded: a forwarded call carries its caller's certificate,
    // which a joining machine does not have yet.)
    return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                        "this master does not lead the cell: join through the leader (give every master's address)");
  }
  return Reply(core_->join().Join(*req, *peer), out);
}

grpc::ServerWriteReactor<v1::WatchResponse>* HerdService::Watch(grpc::CallbackServerContext* ctx,
                                                               const v1::WatchRequest* req) {
  return ServeStream<v1::WatchResponse>(ctx, "Watch", /*barrier=*/false, [&](const Principal& who) {
    return core_->stream().OpenWatch(who, req->from_revision());
  });
}

// Any replica serves it from its own state: names follow the committed log.
grpc::ServerWriteReactor<v1::WatchNamesResponse>* HerdService::WatchNames(grpc::CallbackServerContext* ctx,
                                                                         const v1::WatchNamesRequest* req) {
  return ServeStream<v1::WatchNamesResponse>(ctx, "WatchNames", /*barrier=*/true, [&](const Principal& who) {
    return core_->names().OpenWatchNames(who, *req);
  });
}

grpc::ServerWriteReactor<v1::CheckpointRecord>* HerdService::ExportCheckpoint(grpc::CallbackServerContext* ctx,
                                                                             const v1::ExportCheckpointRequest* req) {
  return ServeStream<v1::CheckpointRecord>(ctx, "ExportCheckpoint", /*barrier=*/true, [&](const Principal& who) {
    return core_->stream().OpenCheckpoint(who, req->up_to_revision());
  });
}

struct GrpcAgentLink::Call {
  std::unique_ptr<grpc::ClientContext> ctx;
  v1::PollRequest request;
  v1::PollResponse response;
  Done done;
};

GrpcAgentLink::~GrpcAgentLink() { CancelAll(); }

v1::Agent::Stub* GrpcAgentLink::StubFor(const std::string& address, const std::string& machine) {
  std::lock_guard l(mu_);
  // The channel pins the machine's identity: whoever listens at `address`
  // gets the machine's tasks only if it holds that machine's certificate.
  auto& s = stubs_[{address, machine}];
  if (!s) s = v1::Agent::NewStub(rpc::Channel(address, self_, rpc::MachineIdentity(machine)));
  return s.get();
}

namespace {
absl::Status NotLeading() {
  return absl::UnavailableError("this master no longer holds the leader lease: it commands no agent");
}
}  // namespace

absl::StatusOr<v1::PollResponse> GrpcAgentLink::Poll(const std::string& address, const v1::PollRequest& request,
                                                     int64_t timeout_ms) {
  if (may_command_ && !may_command_()) return NotLeading();
  v1::Agent::Stub* stub = StubFor(address, request.machine());
  auto ctx = rpc::Context("", timeout_ms);
  v1::PollResponse resp;
  grpc::Status st = stub->Poll(ctx.get(), request, &resp);
  if (!st.ok()) return rpc::FromGrpc(st);
  return resp;
}

void GrpcAgentLink::PollAsync(const std::string& address, const v1::PollRequest& request, int64_t timeout_ms,
                              Done done) {
  if (may_command_ && !may_command_()) {
    done(NotLeading());
    return;
  }
  v1::Agent::Stub* stub = StubFor(address, request.machine());
  auto* call = new Call{rpc::Context("", timeout_ms), request, {}, std::move(done)};
  {
    std::lock_guard l(mu_);
    calls_.insert(call);
  }
  stub->async()->Poll(call->ctx.get(), &call->request, &call->response, [this, call](grpc::Status st) {
    if (st.ok()) {
      call->done(std::move(call->response));
    } else {
      call->done(rpc::FromGrpc(st));
    }
    std::lock_guard l(mu_);
    calls_.erase(call);
    delete call;
    if (calls_.empty()) idle_.notify_all();
  });
}

void GrpcAgentLink::CancelAll() {
  std::unique_lock l(mu_);
  for (Call* c : calls_) c->ctx->TryCancel();
  idle_.wait(l, [this] { return calls_.empty(); });
}

}  // namespace herd::master
