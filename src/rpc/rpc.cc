#include "rpc/rpc.h"

#include <arpa/inet.h>

#include <chrono>
#include <cstdlib>
#include <map>
#include <mutex>

#include <grpc/support/log.h>
#include <grpcpp/security/server_credentials.h>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/numbers.h"
#include "absl/synchronization/mutex.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/log.h"
#include "base/status.h"

namespace herd::rpc {

void RouteGrpcLogs() {
  if (const char* keep = std::getenv("HERD_GRPC_LOG"); keep != nullptr && std::string(keep) == "stderr") return;
  gpr_set_log_function([](gpr_log_func_args* args) {
    if (args->severity == GPR_LOG_SEVERITY_ERROR) {
      HERD_LOG_INFO("grpc: {}", args->message);
    } else {
      HERD_LOG_DEBUG("grpc: {}", args->message);
    }
  });
}

grpc::Status ToGrpc(const absl::Status& st) {
  if (st.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(st.code()), std::string(st.message()));
}

absl::Status FromGrpc(const grpc::Status& st) {
  if (st.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(st.error_code()), st.error_message());
}

pki::Subject MasterIdentity() { return pki::Subject{pki::Role::kMaster, "master"}; }
pki::Subject MachineIdentity(absl::string_view name) { return pki::Subject{pki::Role::kMachine, std::string(name)}; }

std::shared_ptr<grpc::Channel> Channel(const std::string& address, const pki::Credential& self,
                                       const pki::Subject& server, int64_t idle_timeout_ms) {
  grpc::ChannelArguments args;
  if (idle_timeout_ms > 0) args.SetInt(GRPC_ARG_CLIENT_IDLE_TIMEOUT_MS, static_cast<int>(idle_timeout_ms));
  // Retry a refused connection soon (a master or agent restarting), but
  // give each attempt, TLS handshake included, gRPC's default 20 s to
  // finish: GRPC_ARG_MIN_RECONNECT_BACKOFF_MS is also the connect timeout,
  // and at 100 ms handshakes on a loaded machine failed over and over.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  args.SetMaxReceiveMessageSize(kMaxResponseBytes);
  // The name the server's certificate must carry, whatever the address.
  args.SetSslTargetNameOverride(pki::ServerName(server));
  absl::StatusOr<std::string> target = Target(address);
  // A list of masters: connect to all of them at once and send each call
  // to one that is connected. (pick_first tries them in order and waits
  // out a connect timeout on an address whose host drops packets, e.g. a
  // partitioned leader, before trying the next.) Any replica serves:
  // followers answer reads as of the log's head and forward changes.
  if (target.ok() && *target != address) args.SetLoadBalancingPolicyName("round_robin");
  // A bad list fails every call with the reason (checked earlier by the CLI).
  return grpc::CreateCustomChannel(target.ok() ? *target : address, ClientCredentials(self), args);
}

absl::StatusOr<std::string> Target(const std::string& address) {
  if (address.find(',') == std::string::npos) return address;
  std::vector<std::string> v4, v6;
  for (absl::string_view entry : absl::StrSplit(address, ',')) {
    entry = absl::StripAsciiWhitespace(entry);
    const size_t colon = entry.rfind(':');
    int port = 0;
    if (colon == absl::string_view::npos || !absl::SimpleAtoi(entry.substr(colon + 1), &port) || port <= 0 ||
        port > 65535) {
      return absl::InvalidArgumentError(absl::StrCat("master list '", address, "': '", entry, "' is not HOST:PORT"));
    }
    std::string host(entry.substr(0, colon));
    in6_addr a6;
    in_addr a4;
    if (host.size() > 2 && host.front() == '[' && host.back() == ']' &&
        inet_pton(AF_INET6, host.substr(1, host.size() - 2).c_str(), &a6) == 1) {
      v6.emplace_back(entry);
    } else if (inet_pton(AF_INET, host.c_str(), &a4) == 1) {
      v4.emplace_back(entry);
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "master list '", address, "': '", host,
          "' is not an IP address (list masters by address, or give one DNS name with an address per master)"));
    }
  }
  if (!v4.empty() && !v6.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("master list '", address, "' mixes IPv4 and IPv6 addresses"));
  }
  return v4.empty() ? absl::StrCat("ipv6:", absl::StrJoin(v6, ",")) : absl::StrCat("ipv4:", absl::StrJoin(v4, ","));
}

std::shared_ptr<grpc::ChannelCredentials> ClientCredentials(const pki::Credential& self) {
  // One per identity, shared by all its channels: each credentials object
  // carries its own TLS context (the parsed CA, key and certificate), and a
  // master polling 10,000 machines made 10,000 of them.
  static absl::Mutex mu(absl::kConstInit);
  static auto* cache = new absl::flat_hash_map<std::string, std::shared_ptr<grpc::ChannelCredentials>>();
  const std::string key = absl::StrCat(self.ca_pem, self.cert_pem, self.key_pem);
  absl::MutexLock l(&mu);
  auto& creds = (*cache)[key];
  if (creds == nullptr) {
    grpc::SslCredentialsOptions tls;
    tls.pem_root_certs = self.ca_pem;
    tls.pem_private_key = self.key_pem;
    tls.pem_cert_chain = self.cert_pem;
    creds = grpc::SslCredentials(tls);
  }
  return creds;
}

std::unique_ptr<grpc::ClientContext> Context(absl::string_view acting_as, int64_t timeout_ms) {
  auto ctx = std::make_unique<grpc::ClientContext>();
  if (timeout_ms > 0) ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(timeout_ms));
  if (!acting_as.empty()) ctx->AddMetadata(kActingAsKey, std::string(acting_as));
  return ctx;
}

namespace {

// Parsing a certificate costs tens of microseconds; a cell has few distinct
// callers, so each one's is parsed once. Bounded: cleared when it fills.
class CertCache {
 public:
  absl::StatusOr<pki::CertInfo> Get(absl::string_view pem) {
    std::lock_guard l(mu_);
    auto it = cache_.find(pem);
    if (it != cache_.end()) return it->second;
    absl::StatusOr<pki::CertInfo> info = pki::Inspect(pem);
    if (!info.ok()) return info.status();
    if (cache_.size() >= 4096) cache_.clear();
    cache_.emplace(std::string(pem), *info);
    return info;
  }

 private:
  std::mutex mu_;
  std::map<std::string, pki::CertInfo, std::less<>> cache_;
};

CertCache& Certs() {
  static CertCache* cache = new CertCache;
  return *cache;
}

}  // namespace

absl::StatusOr<std::string> CallerPem(const grpc::ServerContextBase* ctx) {
  std::shared_ptr<const grpc::AuthContext> auth = ctx->auth_context();
  if (auth == nullptr || !auth->IsPeerAuthenticated()) {
    return absl::UnauthenticatedError("the caller presented no certificate of this cell");
  }
  std::vector<grpc::string_ref> pem = auth->FindPropertyValues(GRPC_X509_PEM_CERT_PROPERTY_NAME);
  if (pem.empty()) return absl::UnauthenticatedError("the caller presented no certificate of this cell");
  return std::string(pem[0].data(), pem[0].size());
}

absl::StatusOr<pki::CertInfo> Caller(const grpc::ServerContextBase* ctx) {
  absl::StatusOr<std::string> pem = CallerPem(ctx);
  if (!pem.ok()) return pem.status();
  absl::StatusOr<pki::CertInfo> info = Certs().Get(*pem);
  if (!info.ok()) return absl::UnauthenticatedError(absl::StrCat("the caller's certificate: ", info.status().message()));
  return info;
}

absl::StatusOr<pki::CertInfo> ForwardedFor(const grpc::ServerContextBase* ctx, const pki::CertInfo& sender,
                                           const std::string& ca_pem, int64_t now_s) {
  auto it = ctx->client_metadata().find(kForwardedForKey);
  if (it == ctx->client_metadata().end()) return absl::NotFoundError("not forwarded");
  if (sender.subject.role != pki::Role::kMaster) {
    return absl::PermissionDeniedError(
        absl::StrCat(pki::Describe(sender.subject), " may not forward requests on behalf of others"));
  }
  if (it->second.size() > 64 * 1024) return absl::UnauthenticatedError("the forwarded certificate is too large");
  const absl::string_view pem(it->second.data(), it->second.size());
  if (absl::Status st = pki::Verify(pem, ca_pem, now_s); !st.ok()) {
    return absl::UnauthenticatedError(absl::StrCat("the forwarded caller's certificate: ", st.message()));
  }
  absl::StatusOr<pki::CertInfo> info = Certs().Get(pem);
  if (!info.ok()) {
    return absl::UnauthenticatedError(absl::StrCat("the forwarded caller's certificate: ", info.status().message()));
  }
  return info;
}

std::string ActingAs(const grpc::ServerContextBase* ctx) {
  auto it = ctx->client_metadata().find(kActingAsKey);
  if (it == ctx->client_metadata().end()) return "";
  return std::string(it->second.data(), std::min<size_t>(it->second.size(), 256));
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
                                                          std::vector<grpc::Service*> services,
                                                          const pki::Credential& self, std::string* bound) {
  std::vector<std::string> ports;
  HERD_ASSIGN_OR_RETURN(std::unique_ptr<grpc::Server> server,
                        StartServer({Listener{address, {self}}}, std::move(services), &ports));
  *bound = ports[0];
  return server;
}

absl::StatusOr<std::unique_ptr<grpc::Server>> StartServer(const std::vector<Listener>& listeners,
                                                          std::vector<grpc::Service*> services,
                                                          std::vector<std::string>* bound) {
  grpc::ServerBuilder b;
  std::vector<int> ports(listeners.size(), 0);
  for (size_t i = 0; i < listeners.size(); ++i) {
    const Listener& l = listeners[i];
    if (absl::Status st = ValidateAddress(l.address); !st.ok()) return st;
    if (l.identities.empty()) return absl::InvalidArgumentError(absl::StrCat("no identity to present on ", l.address));
    grpc::SslServerCredentialsOptions tls(l.client_cert_optional ? GRPC_SSL_REQUEST_CLIENT_CERTIFICATE_AND_VERIFY
                                                                 : GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
    tls.pem_root_certs = l.identities[0].ca_pem;
    for (const pki::Credential& c : l.identities) {
      if (c.ca_pem != l.identities[0].ca_pem) {
        return absl::InvalidArgumentError(absl::StrCat("the identities on ", l.address, " are not all of one CA"));
      }
      tls.pem_key_cert_pairs.push_back({c.key_pem, c.cert_pem});
    }
    b.AddListeningPort(l.address, grpc::SslServerCredentials(tls), &ports[i]);
  }
  b.SetMaxReceiveMessageSize(kMaxRequestBytes);
  // A bounded number of requests in progress: past it gRPC answers
  // RESOURCE_EXHAUSTED at once instead of queueing without end.
  grpc::ResourceQuota quota("herd-server");
  quota.SetMaxThreads(kMaxServerThreads);
  b.SetResourceQuota(quota);
  b.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  for (grpc::Service* s : services) b.RegisterService(s);
  std::unique_ptr<grpc::Server> server = b.BuildAndStart();
  for (size_t i = 0; i < listeners.size(); ++i) {
    if (server == nullptr || ports[i] == 0) {
      return absl::UnavailableError(
          absl::StrCat("cannot listen on ", listeners[i].address, " (in use, or not an address of this host)"));
    }
  }
  bound->clear();
  for (size_t i = 0; i < listeners.size(); ++i) {
    const std::string& address = listeners[i].address;
    std::string host(address.substr(0, address.rfind(':')));
    if (host == "0.0.0.0" || host == "[::]" || host.empty()) host = "127.0.0.1";
    bound->push_back(absl::StrCat(host, ":", ports[i]));
  }
  return server;
}

}  // namespace herd::rpc
