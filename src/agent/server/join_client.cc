#include "agent/server/join_client.h"

#include <grpcpp/grpcpp.h>
#include <grpcpp/security/tls_certificate_verifier.h>
#include <grpcpp/security/tls_credentials_options.h>

#include <algorithm>
#include <chrono>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "agent/runtime/process.h"
#include "base/status.h"
#include "herd/v1/api.grpc.pb.h"
#include "rpc/rpc.h"

namespace herd::agent {
namespace {

std::unique_ptr<grpc::ClientContext> Deadline(int64_t ms) {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(ms));
  return ctx;
}

// A connection that checks nothing of the server: only for the CA, which
// is then checked against the hash.
std::unique_ptr<v1::Herd::Stub> Untrusted(const std::string& address) {
  grpc::experimental::TlsChannelCredentialsOptions tls;
  tls.set_verify_server_certs(false);
  tls.set_check_call_host(false);
  tls.set_certificate_verifier(std::make_shared<grpc::experimental::NoOpCertificateVerifier>());
  return v1::Herd::NewStub(grpc::CreateChannel(address, grpc::experimental::TlsCredentials(tls)));
}

// Trusts only `ca_pem`, and only a server with the master's identity.
std::unique_ptr<v1::Herd::Stub> Pinned(const std::string& address, const std::string& ca_pem) {
  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = ca_pem;
  grpc::ChannelArguments args;
  args.SetSslTargetNameOverride(pki::ServerName(rpc::MasterIdentity()));
  return v1::Herd::NewStub(grpc::CreateCustomChannel(address, grpc::SslCredentials(ssl), args));
}

absl::StatusOr<std::string> ReadToken(const std::string& token) {
  if (!absl::StartsWith(token, "@")) return token;
  HERD_ASSIGN_OR_RETURN(std::string text, ReadFile(token.substr(1)));
  return std::string(absl::StripAsciiWhitespace(text));
}

}  // namespace

absl::StatusOr<pki::Credential> JoinCell(const JoinOptions& o) {
  HERD_ASSIGN_OR_RETURN(std::string token, ReadToken(o.token));
  const std::string want = absl::AsciiStrToLower(o.ca_hash);
  if (!absl::StartsWith(want, "sha256:") || want.size() != 7 + 64 ||
      !std::all_of(want.begin() + 7, want.end(), [](char c) { return absl::ascii_isxdigit(c); })) {
    return absl::InvalidArgumentError(
        absl::StrCat("--ca-hash '", o.ca_hash, "' is not sha256:HEX (64 digits; herd token create prints it)"));
  }
  HERD_ASSIGN_OR_RETURN(pki::KeyPair key, pki::GenerateKey());
  absl::Status last = absl::InvalidArgumentError("--master: no address");
  for (absl::string_view entry : absl::StrSplit(o.masters, ',', absl::SkipWhitespace())) {
    const std::string address(absl::StripAsciiWhitespace(entry));
    v1::GetJoinInfoResponse info;
    grpc::Status st = Untrusted(address)->GetJoinInfo(Deadline(o.timeout_ms).get(), v1::GetJoinInfoRequest(), &info);
    if (!st.ok()) {
      last = absl::UnavailableError(absl::StrCat("the master at ", address, ": ", st.error_message()));
      continue;
    }
    absl::StatusOr<std::string> have = pki::PublicKeyHash(info.ca_pem());
    if (!have.ok()) {
      return absl::FailedPreconditionError(
          absl::StrCat("the master at ", address, " sent no usable CA certificate: ", have.status().message()));
    }
    if (*have != want) {
      return absl::FailedPreconditionError(absl::StrCat("the master at ", address, " presents a CA whose key hash is ",
                                                        *have, ", not the ", want,
                                                        " given (--ca-hash): not joining, the token was not sent"));
    }
    v1::JoinRequest req;
    req.set_token(token);
    req.set_machine(o.machine);
    req.set_public_key_pem(key.public_pem);
    v1::JoinResponse resp;
    st = Pinned(address, info.ca_pem())->Join(Deadline(o.timeout_ms).get(), req, &resp);
    if (st.error_code() == grpc::StatusCode::UNAVAILABLE) {  // a follower, or gone: the next one
      last = absl::UnavailableError(absl::StrCat("the master at ", address, ": ", st.error_message()));
      continue;
    }
    if (!st.ok()) return rpc::FromGrpc(st);
    pki::Credential c;
    c.cert_pem = resp.cert_pem();
    c.key_pem = key.private_pem;
    c.ca_pem = info.ca_pem();
    HERD_ASSIGN_OR_RETURN(c.info, pki::Inspect(c.cert_pem));
    if (absl::Status ok = pki::Verify(c.cert_pem, c.ca_pem, absl::ToUnixSeconds(absl::Now())); !ok.ok()) {
      return absl::InternalError(absl::StrCat("the master's certificate for this machine: ", ok.message()));
    }
    if (c.info.subject.role != pki::Role::kMachine || c.info.subject.name != o.machine) {
      return absl::InternalError(absl::StrCat("the master issued a credential for ", pki::Describe(c.info.subject),
                                              ", not machine ", o.machine));
    }
    return c;
  }
  return last;
}

}  // namespace herd::agent
