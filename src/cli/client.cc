#include "cli/client.h"

#include <cstdio>
#include <cstdlib>
#include <unistd.h>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "rpc/rpc.h"

namespace herd::cli {

std::string DefaultCredentialsPath() {
  if (const char* c = std::getenv("HERD_CREDENTIALS"); c && *c) return c;
  if (const char* h = std::getenv("HERD_HOME"); h && *h) return absl::StrCat(h, "/credentials.pem");
  const char* home = std::getenv("HOME");
  return absl::StrCat(home && *home ? home : "/tmp", "/.herd/up/credentials.pem");
}

Client::Client(const GlobalFlags& flags) : timeout_ms_(flags.timeout_ms) {
  master_ = flags.master;
  if (master_.empty()) {
    const char* env = std::getenv("HERD_MASTER");
    master_ = env && *env ? env : kDefaultMaster;
  }
  credentials_path_ = flags.credentials.empty() ? DefaultCredentialsPath() : flags.credentials;
  absl::StatusOr<pki::Credential> cred = pki::LoadCredential(credentials_path_);
  if (cred.ok()) {
    credential_ = std::move(*cred);
  } else {
    credential_status_ = absl::Status(
        cred.status().code(),
        absl::StrCat(cred.status().message(),
                     "; the CLI needs a credential of the cell: 'herd up' writes one for you, 'herd user add' "
                     "issues one; name it with --credentials or HERD_CREDENTIALS"));
  }
  acting_as_ = flags.user;
  if (acting_as_.empty()) {
    if (const char* u = std::getenv("HERD_USER"); u && *u) acting_as_ = u;
  }
  acting_as_ = absl::AsciiStrToLower(acting_as_);
  user_ = acting_as_.empty() ? credential_.info.subject.name : acting_as_;
  if (acting_as_ == credential_.info.subject.name) acting_as_.clear();
  if (absl::StatusOr<std::string> target = rpc::Target(master_); !target.ok()) {
    target_status_ = target.status();  // what the first call's failure says
  }
  channel_ = rpc::Channel(master_, credential_, rpc::MasterIdentity());
  stub_ = v1::Herd::NewStub(channel_);
}

std::unique_ptr<grpc::ClientContext> Client::Context(int64_t timeout_ms) const {
  return rpc::Context(acting_as_, timeout_ms < 0 ? timeout_ms_ : timeout_ms);
}

absl::Status Client::Error(const grpc::Status& st) const {
  if (!target_status_.ok()) return target_status_;
  const std::string& msg = st.error_message();
  if (st.error_code() == grpc::StatusCode::UNAVAILABLE &&
      (absl::StrContains(msg, "andshake") || absl::StrContains(msg, "SSL") || absl::StrContains(msg, "ertificate"))) {
    if (!credential_status_.ok()) return credential_status_;
    return absl::UnavailableError(absl::StrCat("the TLS handshake with the master at ", master_,
                                               " failed: either the credential ", credentials_path_,
                                               " is not of this cell (or has expired), or what listens there is "
                                               "not the cell's master"));
  }
  if (st.error_code() == grpc::StatusCode::UNAVAILABLE ||
      (st.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED && st.error_message() == "Deadline Exceeded")) {
    std::string why = st.error_message();
    if (absl::StrContains(why, "Connection refused") || absl::StrContains(why, "connect")) why = "connection refused";
    return absl::UnavailableError(absl::StrCat("cannot reach the master at ", master_, " (", why,
                                               "); is the cell up? Start one with 'herd up', or point --master "
                                               "or HERD_MASTER at it"));
  }
  if (!credential_status_.ok()) return credential_status_;
  return rpc::FromGrpc(st);
}

int ExitCode(const absl::Status& st) {
  if (st.ok()) return 0;
  return st.code() == absl::StatusCode::kInvalidArgument ? 2 : 1;
}

int Fail(const absl::Status& st) {
  std::string msg(st.message());
  std::fprintf(stderr, "herd: %s\n", msg.c_str());
  return ExitCode(st);
}

}  // namespace herd::cli
