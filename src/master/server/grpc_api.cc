#include "master/server/grpc_api.h"

#include "master/core/admission/identity.h"
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

// Who is calling: the certificate the connection's TLS handshake verified,
// acting on behalf of the user it names if it may.
absl::StatusOr<Principal> Caller(MasterCore& core, const grpc::ServerContext* ctx) {
  absl::StatusOr<pki::CertInfo> cert = rpc::Caller(ctx);
  if (!cert.ok()) return cert.status();
  return Identify(*cert, rpc::ActingAs(ctx), [&](const std::string& name) {
    return core.committer().Read([&](const cell::CellState& s) -> std::optional<v1::User> {
      const v1::User* u = s.FindUser(name);
      return u ? std::optional<v1::User>(*u) : std::nullopt;
    });
  });
}

}  // namespace

absl::StatusOr<Principal> HerdService::Admit(const grpc::ServerContext* ctx) {
  absl::StatusOr<Principal> who = Caller(*core_, ctx);
  if (!who.ok() || limiter_ == nullptr) return who;
  if (absl::Status st = limiter_->Admit(*who); !st.ok()) return st;
  return who;
}

// Every handler: the caller's identity and rate, then the core's answer.
#define HERD_CALL(api, method)                                        \
  absl::StatusOr<Principal> who = Admit(ctx);                         \
  if (!who.ok()) return rpc::ToGrpc(who.status());                    \
  return Reply(core_->api().method(*who, *req), out)

grpc::Status HerdService::Submit(grpc::ServerContext* ctx, const v1::SubmitRequest* req, v1::SubmitResponse* out) {
  HERD_CALL(jobs, Submit);
}
grpc::Status HerdService::Kill(grpc::ServerContext* ctx, const v1::KillRequest* req, v1::KillResponse* out) {
  HERD_CALL(jobs, Kill);
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
  HERD_CALL(machines, DrainMachines);
}
grpc::Status HerdService::SetQuota(grpc::ServerContext* ctx, const v1::SetQuotaRequest* req, v1::SetQuotaResponse* out) {
  HERD_CALL(machines, SetQuota);
}
grpc::Status HerdService::ListQuotas(grpc::ServerContext* ctx, const v1::ListQuotasRequest* req,
                                     v1::ListQuotasResponse* out) {
  HERD_CALL(machines, ListQuotas);
}
grpc::Status HerdService::MachineChanged(grpc::ServerContext* ctx, const v1::MachineChangedRequest* req,
                                         v1::MachineChangedResponse* out) {
  HERD_CALL(machines, MachineChanged);
}
grpc::Status HerdService::RegisterMachine(grpc::ServerContext* ctx, const v1::RegisterMachineRequest* req,
                                          v1::RegisterMachineResponse* out) {
  HERD_CALL(machines, RegisterMachine);
}
grpc::Status HerdService::Propose(grpc::ServerContext* ctx, const v1::ProposeRequest* req, v1::ProposeResponse* out) {
  HERD_CALL(jobs, Propose);
}
grpc::Status HerdService::Why(grpc::ServerContext* ctx, const v1::WhyRequest* req, v1::WhyResponse* out) {
  HERD_CALL(jobs, Why);
}
grpc::Status HerdService::GetCell(grpc::ServerContext* ctx, const v1::GetCellRequest*, v1::CellInfo* out) {
  absl::StatusOr<Principal> who = Admit(ctx);
  if (!who.ok()) return rpc::ToGrpc(who.status());
  grpc::Status st = Reply(core_->machines().GetCell(*who), out);
  out->set_leader(leader_);
  out->set_store(store_);
  return st;
}
grpc::Status HerdService::GrantAccess(grpc::ServerContext* ctx, const v1::GrantAccessRequest* req,
                                      v1::GrantAccessResponse* out) {
  HERD_CALL(access, GrantAccess);
}
grpc::Status HerdService::IssueCredential(grpc::ServerContext* ctx, const v1::IssueCredentialRequest* req,
                                          v1::IssueCredentialResponse* out) {
  HERD_CALL(access, IssueCredential);
}
grpc::Status HerdService::UpdateUser(grpc::ServerContext* ctx, const v1::UpdateUserRequest* req,
                                     v1::UpdateUserResponse* out) {
  HERD_CALL(access, UpdateUser);
}

grpc::Status HerdService::Watch(grpc::ServerContext* ctx, const v1::WatchRequest* req,
                                grpc::ServerWriter<v1::WatchResponse>* writer) {
  absl::StatusOr<Principal> who = Admit(ctx);
  if (!who.ok()) return rpc::ToGrpc(who.status());
  return rpc::ToGrpc(core_->stream().Watch(
      *who, req->from_revision(), [&](const v1::WatchResponse& r) { return writer->Write(r); },
      [&] { return ctx->IsCancelled(); }));
}

grpc::Status HerdService::ExportCheckpoint(grpc::ServerContext* ctx, const v1::ExportCheckpointRequest* req,
                                           grpc::ServerWriter<v1::CheckpointRecord>* writer) {
  absl::StatusOr<Principal> who = Admit(ctx);
  if (!who.ok()) return rpc::ToGrpc(who.status());
  return rpc::ToGrpc(core_->stream().ExportCheckpoint(*who, req->up_to_revision(), [&](const v1::CheckpointRecord& r) {
    return !ctx->IsCancelled() && writer->Write(r);
  }));
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

absl::StatusOr<v1::PollResponse> GrpcAgentLink::Poll(const std::string& address, const v1::PollRequest& request,
                                                     int64_t timeout_ms) {
  v1::Agent::Stub* stub = StubFor(address, request.machine());
  auto ctx = rpc::Context("", timeout_ms);
  v1::PollResponse resp;
  grpc::Status st = stub->Poll(ctx.get(), request, &resp);
  if (!st.ok()) return rpc::FromGrpc(st);
  return resp;
}

void GrpcAgentLink::PollAsync(const std::string& address, const v1::PollRequest& request, int64_t timeout_ms,
                              Done done) {
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
