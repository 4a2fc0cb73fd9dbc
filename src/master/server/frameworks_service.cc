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

namespace {

// A framework's events, as they are pushed to its queue.
class EventCursor final : public Cursor<v1::FrameworkEvent> {
 public:
  explicit EventCursor(std::shared_ptr<frameworks::EventQueue> events) : events_(std::move(events)) {}
  Step Next(v1::FrameworkEvent* out) override {
    if (events_->TryNext(out)) return Step::kMessage;
    // Closed: what was queued before has been sent.
    return events_->closed() && !events_->TryNext(out) ? Step::kEnd : Step::kWait;
  }
  absl::Status status() const override { return absl::UnavailableError(events_->why_closed()); }

 private:
  std::shared_ptr<frameworks::EventQueue> events_;
};

}  // namespace

grpc::ServerWriteReactor<v1::FrameworkEvent>* FrameworksService::Subscribe(grpc::CallbackServerContext* ctx,
                                                                          const v1::SubscribeRequest* req) {
  auto stream = CursorStream<v1::FrameworkEvent>::Make(pump_);
  absl::StatusOr<Principal> who = admit_(ctx);
  if (!who.ok()) return stream->Refuse(rpc::ToGrpc(who.status()));
  frameworks::FrameworkManager* m = manager_.load(std::memory_order_acquire);
  if (m == nullptr) return stream->Refuse(kNotLeading);
  StreamLimits::Slot slot;
  if (streams_ != nullptr) {
    absl::StatusOr<StreamLimits::Slot> got = streams_->Acquire(
        *who, "Subscribe",
        stream->Ender(grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                                   "the credential that opened this stream was revoked")));
    if (!got.ok()) return stream->Refuse(rpc::ToGrpc(got.status()));
    slot = std::move(*got);
  }
  auto sub = m->Subscribe(*who, *req);
  if (!sub.ok()) return stream->Refuse(rpc::ToGrpc(sub.status()));
  sub->events->SetWaker([pump = pump_] { pump->Kick(); });
  return stream->Serve(std::make_unique<EventCursor>(sub->events), std::move(slot),
                       [m, sub = *sub] { m->Disconnected(sub); });
}

}  // namespace herd::master
