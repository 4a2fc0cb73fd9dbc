#include "metrics/server/metrics_server.h"

#include <sys/stat.h>

#include <openssl/crypto.h>
#include <openssl/pem.h>
#include <openssl/sha.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <fstream>
#include <sstream>
#include <thread>

#include <httplib.h>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "base/log.h"

namespace herd::metrics {
namespace {

using X509Ptr = std::unique_ptr<X509, decltype(&X509_free)>;
using BioPtr = std::unique_ptr<BIO, decltype(&BIO_free)>;

X509Ptr ReadCert(const std::string& pem) {
  BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())), BIO_free);
  return X509Ptr(bio ? PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr) : nullptr, X509_free);
}

std::string CertPem(X509* cert) {
  BioPtr bio(BIO_new(BIO_s_mem()), BIO_free);
  if (!bio || PEM_write_bio_X509(bio.get(), cert) != 1) return "";
  char* data = nullptr;
  long n = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(n));
}

// TLS 1.2+, the server's certificate and key, and client certificates
// optional but verified against the cell CA when sent (a bad one fails the
// handshake).
bool SetUpTls(SSL_CTX& ctx, const pki::Credential& self) {
  SSL_CTX_set_min_proto_version(&ctx, TLS1_2_VERSION);
  X509Ptr cert = ReadCert(self.cert_pem);
  X509Ptr ca = ReadCert(self.ca_pem);
  BioPtr key_bio(BIO_new_mem_buf(self.key_pem.data(), static_cast<int>(self.key_pem.size())), BIO_free);
  std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> key(
      key_bio ? PEM_read_bio_PrivateKey(key_bio.get(), nullptr, nullptr, nullptr) : nullptr, EVP_PKEY_free);
  if (!cert || !ca || !key) return false;
  if (SSL_CTX_use_certificate(&ctx, cert.get()) != 1 || SSL_CTX_use_PrivateKey(&ctx, key.get()) != 1 ||
      SSL_CTX_check_private_key(&ctx) != 1) {
    return false;
  }
  X509_STORE* store = SSL_CTX_get_cert_store(&ctx);
  if (X509_STORE_add_cert(store, ca.get()) != 1) return false;
  // Tell clients which CA their certificate must come from.
  STACK_OF(X509_NAME)* names = sk_X509_NAME_new_null();
  sk_X509_NAME_push(names, X509_NAME_dup(X509_get_subject_name(ca.get())));
  SSL_CTX_set_client_CA_list(&ctx, names);
  SSL_CTX_set_verify(&ctx, SSL_VERIFY_PEER, nullptr);
  // With client certificates asked for, OpenSSL refuses to resume a session
  // (a browser's second connection) unless the context has an id: without
  // one, every resumed handshake failed (ERR_SSL_PROTOCOL_ERROR in Chromium).
  static constexpr unsigned char kSessionContext[] = "herd-https";
  SSL_CTX_set_session_id_context(&ctx, kSessionContext, sizeof(kSessionContext) - 1);
  return true;
}

// The client certificate the handshake verified, if any.
std::optional<pki::CertInfo> VerifiedPeer(const SSL* ssl, const std::string& ca_pem) {
  if (ssl == nullptr) return std::nullopt;
  X509Ptr peer(SSL_get1_peer_certificate(ssl), X509_free);
  if (!peer || SSL_get_verify_result(ssl) != X509_V_OK) return std::nullopt;
  const std::string pem = CertPem(peer.get());
  // The handshake checked the chain and the dates; checked again here with
  // the cell's own rules (pki::Verify), as the gRPC servers do.
  if (!pki::Verify(pem, ca_pem, absl::ToUnixSeconds(absl::Now())).ok()) return std::nullopt;
  absl::StatusOr<pki::CertInfo> info = pki::Inspect(pem);
  if (!info.ok()) return std::nullopt;
  return *info;
}

std::string Sha256(absl::string_view s) {
  unsigned char out[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(s.data()), s.size(), out);
  return std::string(reinterpret_cast<char*>(out), sizeof(out));
}

// Whether the request's "Authorization: Bearer T" names the token (compared
// through digests in constant time: neither the token nor its length leaks).
bool TokenMatches(const httplib::Request& req, const std::string& token_digest) {
  if (token_digest.empty()) return false;
  const std::string auth = req.get_header_value("Authorization");
  constexpr absl::string_view kBearer = "Bearer ";
  if (!absl::StartsWithIgnoreCase(auth, kBearer)) return false;
  const std::string got = Sha256(absl::StripAsciiWhitespace(absl::string_view(auth).substr(kBearer.size())));
  return CRYPTO_memcmp(got.data(), token_digest.data(), got.size()) == 0;
}

// Headers on every answer: nothing cached (pages carry a user's view), the
// page never framed, content only from this origin, no referrer leaked.
void SecurityHeaders(httplib::Response& res) {
  res.set_header("Cache-Control", "no-store");
  res.set_header("X-Content-Type-Options", "nosniff");
  res.set_header("X-Frame-Options", "DENY");
  res.set_header("Referrer-Policy", "no-referrer");
  res.set_header("Content-Security-Policy",
                 "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
                 "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'");
}

}  // namespace

std::string HttpRequest::Param(const std::string& key) const {
  auto it = params.find(key);
  return it == params.end() ? "" : it->second;
}

std::string Scraper::ToString() const {
  if (cert) return pki::Describe(cert->subject);
  if (token) return "the metrics token";
  return "an anonymous client";
}

absl::Status AllowTokenMasterOrUser(const Scraper& who) {
  if (who.token) return absl::OkStatus();
  if (!who.cert) {
    return absl::UnauthenticatedError("a client certificate of the cell or the metrics bearer token is needed");
  }
  if (who.cert->subject.role == pki::Role::kMaster || who.cert->subject.role == pki::Role::kUser) {
    return absl::OkStatus();
  }
  return absl::PermissionDeniedError(
      absl::StrCat(who.ToString(), " may not read metrics: it needs a user's or the master's credential"));
}

absl::StatusOr<std::string> ReadTokenFile(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    return absl::InvalidArgumentError(absl::StrCat("metrics token file ", path, ": cannot read it"));
  }
  if ((st.st_mode & S_IROTH) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("metrics token file ", path, " is readable by everyone; chmod o-r it (0600 or 0640)"));
  }
  if (st.st_size > 4096) return absl::InvalidArgumentError(absl::StrCat("metrics token file ", path, ": too large"));
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string token(absl::StripAsciiWhitespace(ss.str()));
  if (token.size() < MetricsServer::kMinTokenBytes) {
    return absl::InvalidArgumentError(absl::StrCat("metrics token file ", path, ": the token must have at least ",
                                                   MetricsServer::kMinTokenBytes, " characters"));
  }
  for (char c : token) {
    if (c < 0x21 || c > 0x7e) {
      return absl::InvalidArgumentError(
          absl::StrCat("metrics token file ", path, ": the token must be one word of printable ASCII"));
    }
  }
  return token;
}

struct MetricsServer::Impl {
  std::unique_ptr<httplib::SSLServer> http;
  std::thread thread;
};

absl::StatusOr<std::unique_ptr<MetricsServer>> MetricsServer::Start(MetricsServerOptions options,
                                                                    Registry* registry) {
  const size_t colon = options.address.rfind(':');
  int port = -1;
  if (colon == std::string::npos || colon == 0 || !absl::SimpleAtoi(options.address.substr(colon + 1), &port) ||
      port < 0 || port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("--metrics ", options.address, ": expected HOST:PORT"));
  }
  const std::string host = options.address.substr(0, colon);
  std::string token_digest;
  if (!options.token_file.empty()) {
    absl::StatusOr<std::string> token = ReadTokenFile(options.token_file);
    if (!token.ok()) return token.status();
    token_digest = Sha256(*token);
  }
  auto server = std::unique_ptr<MetricsServer>(new MetricsServer());
  server->impl_ = std::make_unique<Impl>();
  server->server_name_ = pki::ServerName(options.identity.info.subject);
  const pki::Credential self = options.identity;
  auto http = std::make_unique<httplib::SSLServer>([&self](SSL_CTX& ctx) { return SetUpTls(ctx, self); });
  if (!http->is_valid()) {
    return absl::InvalidArgumentError("metrics: cannot set up TLS with this process's credential");
  }
  const int threads = std::max(1, options.threads);
  http->new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<size_t>(threads)); };
  http->set_payload_max_length(kMaxBodyBytes);
  http->set_read_timeout(5, 0);
  http->set_write_timeout(5, 0);
  http->set_keep_alive_max_count(100);
  http->set_keep_alive_timeout(30);
  const std::string ca_pem = options.identity.ca_pem;
  MetricsAuthorizer authorize = std::move(options.authorize);
  http->Get("/metrics", [registry, ca_pem, token_digest, authorize](const httplib::Request& req,
                                                                     httplib::Response& res) {
    Scraper who;
    who.peer = absl::StrCat(req.remote_addr, ":", req.remote_port);
    who.cert = VerifiedPeer(req.ssl, ca_pem);
    who.token = !who.cert && TokenMatches(req, token_digest);
    absl::Status st = authorize(who);
    if (!st.ok()) {
      HERD_LOG_WARN("metrics: refused {} from {}: {}", who.ToString(), who.peer, st.message());
      const bool unauthenticated = st.code() == absl::StatusCode::kUnauthenticated;
      res.status = unauthenticated ? 401 : 403;
      if (unauthenticated) res.set_header("WWW-Authenticate", "Bearer");
      res.set_content(absl::StrCat(st.message(), "\n"), "text/plain");
      return;
    }
    res.set_content(registry->Text(), Registry::kContentType);
  });
  HttpHandler pages = std::move(options.pages);
  http->Get(".*", [pages, ca_pem](const httplib::Request& req, httplib::Response& res) {
    SecurityHeaders(res);
    if (!pages) {
      res.status = 404;
      res.set_content("not found\n", "text/plain");
      return;
    }
    HttpRequest r;
    r.path = req.path;
    for (const auto& [k, v] : req.params) r.params.emplace(k, v);
    r.cookie = req.get_header_value("Cookie");
    r.cert = VerifiedPeer(req.ssl, ca_pem);
    r.peer = absl::StrCat(req.remote_addr, ":", req.remote_port);
    HttpReply reply = pages(r);
    res.status = reply.status;
    for (const auto& [k, v] : reply.headers) res.set_header(k, v);
    res.set_content(std::move(reply.body), reply.content_type);
  });
  if (port == 0) {
    port = http->bind_to_any_port(host);
    if (port <= 0) return absl::UnavailableError(absl::StrCat("metrics: cannot listen on ", options.address));
  } else if (!http->bind_to_port(host, port)) {
    return absl::UnavailableError(absl::StrCat("metrics: cannot listen on ", options.address));
  }
  server->bound_ = absl::StrCat(host, ":", port);
  server->impl_->http = std::move(http);
  httplib::SSLServer* raw = server->impl_->http.get();
  server->impl_->thread = std::thread([raw] { raw->listen_after_bind(); });
  return server;
}

MetricsServer::~MetricsServer() {
  if (impl_ && impl_->http) {
    impl_->http->stop();
    if (impl_->thread.joinable()) impl_->thread.join();
  }
}

}  // namespace herd::metrics
