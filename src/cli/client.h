// The CLI's connection to a master: where it is (--master, HERD_MASTER,
// default 127.0.0.1:7070), who is calling (--user, HERD_USER, $USER), and
// errors turned into one line a person can act on.
#pragma once

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "herd/v1/agent.grpc.pb.h"
#include "herd/v1/api.grpc.pb.h"

namespace herd::cli {

inline constexpr char kDefaultMaster[] = "127.0.0.1:7070";

struct GlobalFlags {
  std::string master;  // empty: HERD_MASTER or the default
  std::string user;    // empty: HERD_USER or $USER
  bool json = false;
  int64_t timeout_ms = 15'000;
};

class Client {
 public:
  explicit Client(const GlobalFlags& flags);
  const std::string& master() const { return master_; }
  const std::string& user() const { return user_; }
  v1::Herd::Stub& stub() { return *stub_; }
  std::unique_ptr<grpc::ClientContext> Context(int64_t timeout_ms = -1) const;
  // A gRPC failure as one line: "cannot reach the master at ..." for
  // connection problems, else the master's own message.
  absl::Status Error(const grpc::Status& st) const;

 private:
  std::string master_;
  std::string user_;
  int64_t timeout_ms_;
  std::unique_ptr<v1::Herd::Stub> stub_;
};

// Exit codes: 0 ok, 1 failure (unreachable master, quota, not found...),
// 2 invalid input (nothing was changed).
int ExitCode(const absl::Status& st);
// Prints "herd: <message>" to stderr and returns ExitCode(st).
int Fail(const absl::Status& st);

}  // namespace herd::cli
