// The CLI's connection to a master: where it is (--master, HERD_MASTER,
// default 127.0.0.1:7070), who is calling (the credential: --credentials,
// HERD_CREDENTIALS, or the admin credential `herd up` wrote for this OS
// user), on whose behalf (--user, HERD_USER: needs the run-as capability
// unless it is the caller), and errors turned into one line a person can
// act on.
#pragma once

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "herd/v1/agent.grpc.pb.h"
#include "herd/v1/api.grpc.pb.h"
#include "pki/pki.h"

namespace herd::cli {

inline constexpr char kDefaultMaster[] = "127.0.0.1:7070";

// $HERD_CREDENTIALS, else the admin credential `herd up` writes:
// ${HERD_HOME:-~/.herd/up}/credentials.pem.
std::string DefaultCredentialsPath();

struct GlobalFlags {
  std::string master;       // empty: HERD_MASTER or the default
  std::string credentials;  // empty: DefaultCredentialsPath()
  std::string user;         // act on behalf of this user; empty: HERD_USER, else the credential's own
  bool json = false;
  int64_t timeout_ms = 15'000;
};

class Client {
 public:
  explicit Client(const GlobalFlags& flags);
  const std::string& master() const { return master_; }
  // The user this client acts as (--user, or the credential's name).
  const std::string& user() const { return user_; }
  const pki::Credential& credential() const { return credential_; }
  v1::Herd::Stub& stub() { return *stub_; }
  // The connection to the master, for its other services (Frameworks).
  const std::shared_ptr<grpc::Channel>& channel() const { return channel_; }
  std::unique_ptr<grpc::ClientContext> Context(int64_t timeout_ms = -1) const;
  // A gRPC failure as one line: the credential's problem if it could not
  // be loaded, "cannot reach the master at ..." for connection problems,
  // else the master's own message.
  absl::Status Error(const grpc::Status& st) const;

 private:
  std::string master_;
  std::string credentials_path_;
  absl::Status credential_status_;  // why the credential could not be loaded
  absl::Status target_status_;  // why --master is not a valid address or list
  pki::Credential credential_;
  std::string acting_as_;  // sent to the master; empty: the credential's own user
  std::string user_;
  int64_t timeout_ms_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Herd::Stub> stub_;
};

// Exit codes: 0 ok, 1 failure (unreachable master, quota, not found...),
// 2 invalid input (nothing was changed).
int ExitCode(const absl::Status& st);
// Prints "herd: <message>" to stderr and returns ExitCode(st).
int Fail(const absl::Status& st);

}  // namespace herd::cli
