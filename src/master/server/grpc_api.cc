#include "master/server/grpc_api.h"

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

// Who is calling: the user the RPC names (the security issue verifies it).
Principal Caller(const grpc::ServerContext* ctx) { return Principal::User(rpc::CallerUser(ctx)); }

}  // namespace

grpc::Status HerdService::Submit(grpc::ServerContext* ctx, const v1::SubmitRequest* req, v1::SubmitResponse* out) {
  return Reply(core_->jobs().Submit(Caller(ctx), *req), out);
}
grpc::Status HerdService::Kill(grpc::ServerContext* ctx, const v1::KillRequest* req, v1::KillResponse* out) {
  return Reply(core_->jobs().Kill(Caller(ctx), *req), out);
}
grpc::Status HerdService::GetJob(grpc::ServerContext* ctx, const v1::GetJobRequest* req, v1::GetJobResponse* out) {
  return Reply(core_->jobs().GetJob(Caller(ctx), *req), out);
}
grpc::Status HerdService::ListJobs(grpc::ServerContext* ctx, const v1::ListJobsRequest* req, v1::ListJobsResponse* out) {
  return Reply(core_->jobs().ListJobs(Caller(ctx), *req), out);
}
grpc::Status HerdService::ListTasks(grpc::ServerContext* ctx, const v1::ListTasksRequest* req,
                                    v1::ListTasksResponse* out) {
  return Reply(core_->jobs().ListTasks(Caller(ctx), *req), out);
}
grpc::Status HerdService::GetTask(grpc::ServerContext* ctx, const v1::GetTaskRequest* req, v1::GetTaskResponse* out) {
  return Reply(core_->jobs().GetTask(Caller(ctx), *req), out);
}
grpc::Status HerdService::ListMachines(grpc::ServerContext* ctx, const v1::ListMachinesRequest* req,
                                       v1::ListMachinesResponse* out) {
  return Reply(core_->machines().ListMachines(Caller(ctx), *req), out);
}
grpc::Status HerdService::SetQuota(grpc::ServerContext* ctx, const v1::SetQuotaRequest* req, v1::SetQuotaResponse* out) {
  return Reply(core_->machines().SetQuota(Caller(ctx), *req), out);
}
grpc::Status HerdService::ListQuotas(grpc::ServerContext* ctx, const v1::ListQuotasRequest* req,
                                     v1::ListQuotasResponse* out) {
  return Reply(core_->machines().ListQuotas(Caller(ctx), *req), out);
}
grpc::Status HerdService::RegisterMachine(grpc::ServerContext*, const v1::RegisterMachineRequest* req,
                                          v1::RegisterMachineResponse* out) {
  return Reply(core_->machines().RegisterMachine(Principal::Machine(req->machine().name()), *req), out);
}
grpc::Status HerdService::Propose(grpc::ServerContext* ctx, const v1::ProposeRequest* req, v1::ProposeResponse* out) {
  return Reply(core_->jobs().Propose(Caller(ctx), *req), out);
}
grpc::Status HerdService::Why(grpc::ServerContext* ctx, const v1::WhyRequest* req, v1::WhyResponse* out) {
  return Reply(core_->jobs().Why(Caller(ctx), *req), out);
}
grpc::Status HerdService::GetCell(grpc::ServerContext* ctx, const v1::GetCellRequest*, v1::CellInfo* out) {
  return Reply(core_->machines().GetCell(Caller(ctx)), out);
}

grpc::Status HerdService::Watch(grpc::ServerContext* ctx, const v1::WatchRequest* req,
                                grpc::ServerWriter<v1::WatchResponse>* writer) {
  return rpc::ToGrpc(core_->stream().Watch(
      Caller(ctx), req->from_revision(), [&](const v1::WatchResponse& r) { return writer->Write(r); },
      [&] { return ctx->IsCancelled(); }));
}

grpc::Status HerdService::ExportCheckpoint(grpc::ServerContext* ctx, const v1::ExportCheckpointRequest* req,
                                           grpc::ServerWriter<v1::CheckpointRecord>* writer) {
  return rpc::ToGrpc(core_->stream().ExportCheckpoint(Caller(ctx), req->up_to_revision(), [&](const v1::CheckpointRecord& r) {
    return !ctx->IsCancelled() && writer->Write(r);
  }));
}

absl::StatusOr<v1::PollResponse> GrpcAgentLink::Poll(const std::string& address, const v1::PollRequest& request,
                                                     int64_t timeout_ms) {
  v1::Agent::Stub* stub;
  {
    std::lock_guard l(mu_);
    auto& s = stubs_[address];
    if (!s) s = v1::Agent::NewStub(rpc::Channel(address));
    stub = s.get();
  }
  auto ctx = rpc::Context("", timeout_ms);
  v1::PollResponse resp;
  grpc::Status st = stub->Poll(ctx.get(), request, &resp);
  if (!st.ok()) return rpc::FromGrpc(st);
  return resp;
}

}  // namespace herd::master
