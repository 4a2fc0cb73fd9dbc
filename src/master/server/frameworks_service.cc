#include "master/server/frameworks_service.h"

#include "rpc/rpc.h"

namespace herd::master {
namespace {

const grpc::Status kNotLeading(grpc::StatusCode::UNAVAILABLE,
                               "this master does not lead the cell: frameworks subscribe to the leader");

}  // namespace

// The caller and the leader's manager, or the answer that says why not.
#define HERD_FRAMEWORK_CALL(method)                                   \
  absl::StatusOr<Principal> who = admit_(ctx);                        \
  if (!who.ok()) return rpc::ToGrpc(who.status());                    \
  frameworks::FrameworkManager* m = manager_.load(std::memory_order_acquire); \
  if (m == nullptr) return kNotLeading;                               \
  auto result = m->method(*who, *req);                                \
  if (!result.ok()) return rpc::ToGrpc(result.status());              \
  *out = std::move(*result);                                          \
  return grpc::Status::OK

grpc::Status FrameworksService::Accept(grpc::ServerContext* ctx, const v1::AcceptRequest* req,
                                       v1::AcceptResponse* out) {
  HERD_FRAMEWORK_CALL(Accept);
}
grpc::Status FrameworksService::Decline(grpc::ServerContext* ctx, const v1::DeclineRequest* req,
                                        v1::DeclineResponse* out) {
  HERD_FRAMEWORK_CALL(Decline);
}
grpc::Status FrameworksService::KillTask(grpc::ServerContext* ctx, const v1::KillTaskRequest* req,
                                         v1::KillTaskResponse* out) {
  HERD_FRAMEWORK_CALL(KillTask);
}
grpc::Status FrameworksService::Acknowledge(grpc::ServerContext* ctx, const v1::AcknowledgeRequest* req,
                                            v1::AcknowledgeResponse* out) {
  HERD_FRAMEWORK_CALL(Acknowledge);
}
grpc::Status FrameworksService::Reconcile(grpc::ServerContext* ctx, const v1::ReconcileRequest* req,
                                          v1::ReconcileResponse* out) {
  HERD_FRAMEWORK_CALL(Reconcile);
}
grpc::Status FrameworksService::Teardown(grpc::ServerContext* ctx, const v1::TeardownRequest* req,
                                         v1::TeardownResponse* out) {
  HERD_FRAMEWORK_CALL(Teardown);
}

grpc::Status FrameworksService::ListFrameworks(grpc::ServerContext* ctx, const v1::ListFrameworksRequest* req,
                                               v1::ListFrameworksResponse* out) {
  HERD_FRAMEWORK_CALL(ListFrameworks);
}

grpc::Status FrameworksService::Subscribe(grpc::ServerContext* ctx, const v1::SubscribeRequest* req,
                                          grpc::ServerWriter<v1::FrameworkEvent>* writer) {
  absl::StatusOr<Principal> who = admit_(ctx);
  if (!who.ok()) return rpc::ToGrpc(who.status());
  frameworks::FrameworkManager* m = manager_.load(std::memory_order_acquire);
  if (m == nullptr) return kNotLeading;
  StreamLimits::Slot slot;
  if (streams_ != nullptr) {
    absl::StatusOr<StreamLimits::Slot> got = streams_->Acquire(*who, "Subscribe", [ctx] { ctx->TryCancel(); });
    if (!got.ok()) return rpc::ToGrpc(got.status());
    slot = std::move(*got);
  }
  auto sub = m->Subscribe(*who, *req);
  if (!sub.ok()) return rpc::ToGrpc(sub.status());
  grpc::Status end = grpc::Status::OK;
  while (!ctx->IsCancelled()) {
    v1::FrameworkEvent e;
    if (sub->events->Next(&e, absl::Milliseconds(250))) {
      if (!writer->Write(e)) break;  // the framework went away
    } else if (sub->events->closed()) {
      end = grpc::Status(grpc::StatusCode::UNAVAILABLE, sub->events->why_closed());
      break;
    }
  }
  m->Disconnected(*sub);
  return end;
}

}  // namespace herd::master
