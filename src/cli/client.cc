#include "cli/client.h"

#include <cstdio>
#include <cstdlib>
#include <pwd.h>
#include <unistd.h>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "rpc/rpc.h"

namespace herd::cli {

namespace {
std::string DefaultUser() {
  if (const char* u = std::getenv("HERD_USER"); u && *u) return u;
  if (const char* u = std::getenv("USER"); u && *u) return u;
  if (struct passwd* pw = getpwuid(getuid())) return pw->pw_name;
  return "nobody";
}
}  // namespace

Client::Client(const GlobalFlags& flags) : timeout_ms_(flags.timeout_ms) {
  master_ = flags.master;
  if (master_.empty()) {
    const char* env = std::getenv("HERD_MASTER");
    master_ = env && *env ? env : kDefaultMaster;
  }
  user_ = flags.user.empty() ? DefaultUser() : flags.user;
  user_ = absl::AsciiStrToLower(user_);
  stub_ = v1::Herd::NewStub(rpc::Channel(master_));
}

std::unique_ptr<grpc::ClientContext> Client::Context(int64_t timeout_ms) const {
  return rpc::Context(user_, timeout_ms < 0 ? timeout_ms_ : timeout_ms);
}

absl::Status Client::Error(const grpc::Status& st) const {
  if (st.error_code() == grpc::StatusCode::UNAVAILABLE ||
      (st.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED && st.error_message() == "Deadline Exceeded")) {
    std::string why = st.error_message();
    if (absl::StrContains(why, "Connection refused") || absl::StrContains(why, "connect")) why = "connection refused";
    return absl::UnavailableError(absl::StrCat("cannot reach the master at ", master_, " (", why,
                                               "); is the cell up? Start one with 'herd up', or point --master "
                                               "or HERD_MASTER at it"));
  }
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
