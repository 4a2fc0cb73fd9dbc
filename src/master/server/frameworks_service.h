// herd.v1.Frameworks (proto/herd/v1/frameworks.proto) over the leader's
// FrameworkManager. Callers are identified (TLS client certificate) and
// rate-limited as on the Herd service. A master that does not lead answers
// UNAVAILABLE: frameworks hold a stream to the leader (the manager's state
// is the leader's), and find it as the CLI does.
#pragma once

#include <atomic>
#include <functional>

#include "herd/v1/frameworks.grpc.pb.h"
#include "master/core/admission/authorizer.h"
#include "master/core/frameworks/manager.h"
#include "master/server/stream_limits.h"
#include "master/server/stream_pump.h"

namespace herd::master {

// Subscribe is served by the callback API without a thread per framework
// (stream_pump.h).
class FrameworksService final : public v1::Frameworks::WithCallbackMethod_Subscribe<v1::Frameworks::Service> {
 public:
  using AdmitFn = std::function<absl::StatusOr<Principal>(const grpc::ServerContextBase*)>;
  // `streams` (may be null: no caps): Subscribe takes a slot of it for as
  // long as the stream is open (stream_limits.h). `pump` serves the streams
  // and must outlive the server's calls.
  FrameworksService(AdmitFn admit, StreamPump* pump, StreamLimits* streams = nullptr)
      : admit_(std::move(admit)), pump_(pump), streams_(streams) {}
  // The leader's manager (null: not leading). It must outlive the server's
  // calls, or be closed (Stop) before it goes.
  void SetManager(frameworks::FrameworkManager* m) { manager_.store(m, std::memory_order_release); }

  grpc::ServerWriteReactor<v1::FrameworkEvent>* Subscribe(grpc::CallbackServerContext*,
                                                          const v1::SubscribeRequest*) override;
  grpc::Status Accept(grpc::ServerContext*, const v1::AcceptRequest*, v1::AcceptResponse*) override;
  grpc::Status Decline(grpc::ServerContext*, const v1::DeclineRequest*, v1::DeclineResponse*) override;
  grpc::Status KillTask(grpc::ServerContext*, const v1::KillTaskRequest*, v1::KillTaskResponse*) override;
  grpc::Status Acknowledge(grpc::ServerContext*, const v1::AcknowledgeRequest*, v1::AcknowledgeResponse*) override;
  grpc::Status Reconcile(grpc::ServerContext*, const v1::ReconcileRequest*, v1::ReconcileResponse*) override;
  grpc::Status Teardown(grpc::ServerContext*, const v1::TeardownRequest*, v1::TeardownResponse*) override;
  grpc::Status ListFrameworks(grpc::ServerContext*, const v1::ListFrameworksRequest*,
                              v1::ListFrameworksResponse*) override;

 private:
  AdmitFn admit_;
  StreamPump* const pump_;
  StreamLimits* const streams_;
  std::atomic<frameworks::FrameworkManager*> manager_{nullptr};
};

}  // namespace herd::master
