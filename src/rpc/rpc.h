// gRPC plumbing shared by the servers and the CLI: status mapping (absl and
// gRPC codes are the same set), channels, and the caller's identity.
#pragma once

#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace herd::rpc {

// Metadata key carrying the calling user (authentication replaces it later).
inline constexpr char kUserKey[] = "herd-user";

grpc::Status ToGrpc(const absl::Status& st);
absl::Status FromGrpc(const grpc::Status& st);

// A channel to HOST:PORT (insecure for now; TLS is a later issue).
std::shared_ptr<grpc::Channel> Channel(const std::string& address);

// A client context with a deadline and the caller's user.
std::unique_ptr<grpc::ClientContext> Context(absl::string_view user, int64_t timeout_ms);

// The user a server-side call came from ("" if none was sent).
std::string CallerUser(const grpc::ServerContext* ctx);

// Parses "HOST:PORT"; INVALID_ARGUMENT with a clear message otherwise.
absl::Status ValidateAddress(absl::string_view address);

// Starts a server on `address` (port 0 = pick one) with `services`; returns
// it and sets *bound to "HOST:PORT" actually bound. UNAVAILABLE if the
// address cannot be bound (e.g. in use).
absl::StatusOr<std::unique_ptr<grpc::Server>> StartServer(const std::string& address,
                                                          std::vector<grpc::Service*> services, std::string* bound);

}  // namespace herd::rpc
