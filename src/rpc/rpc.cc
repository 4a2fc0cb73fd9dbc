#include "rpc/rpc.h"

#include <chrono>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace herd::rpc {

grpc::Status ToGrpc(const absl::Status& st) {
  if (st.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(st.code()), std::string(st.message()));
}

absl::Status FromGrpc(const grpc::Status& st) {
  if (st.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(st.error_code()), st.error_message());
}

std::shared_ptr<grpc::Channel> Channel(const std::string& address) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  args.SetMaxReceiveMessageSize(256 << 20);
  return grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
}

std::unique_ptr<grpc::ClientContext> Context(absl::string_view user, int64_t timeout_ms) {
  auto ctx = std::make_unique<grpc::ClientContext>();
  if (timeout_ms > 0) ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(timeout_ms));
  if (!user.empty()) ctx->AddMetadata(kUserKey, std::string(user));
  return ctx;
}

std::string CallerUser(const grpc::ServerContext* ctx) {
  auto it = ctx->client_metadata().find(kUserKey);
  if (it == ctx->client_metadata().end()) return "";
  return std::string(it->second.data(), it->second.size());
}

absl::Status ValidateAddress(absl::string_view address) {
  size_t colon = address.rfind(':');
  int port = -1;
  if (colon == absl::string_view::npos || colon == 0 || !absl::SimpleAtoi(address.substr(colon + 1), &port) ||
      port < 0 || port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("'", address, "' is not HOST:PORT (e.g. 127.0.0.1:7070)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<grpc::Server>> StartServer(const std::string& address,
                                                          std::vector<grpc::Service*> services, std::string* bound) {
  if (absl::Status st = ValidateAddress(address); !st.ok()) return st;
  grpc::ServerBuilder b;
  int port = 0;
  b.AddListeningPort(address, grpc::InsecureServerCredentials(), &port);
  b.SetMaxReceiveMessageSize(256 << 20);
  b.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  for (grpc::Service* s : services) b.RegisterService(s);
  std::unique_ptr<grpc::Server> server = b.BuildAndStart();
  if (server == nullptr || port == 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", address, " (in use, or not an address of this host)"));
  }
  std::string host(address.substr(0, address.rfind(':')));
  if (host == "0.0.0.0" || host == "[::]" || host.empty()) host = "127.0.0.1";
  *bound = absl::StrCat(host, ":", port);
  return server;
}

}  // namespace herd::rpc
