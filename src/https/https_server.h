// `--metrics HOST:PORT` (or `--http`): a registry's metrics over HTTPS at
// /metrics, for Prometheus, on the master and on every agent; on the master
// the same port serves the web UI (HttpsServerOptions::pages).
//
// The cell's rule holds here too: the port speaks TLS only (the process's own
// certificate, signed by the cell CA), every request is authenticated and
// authorized through one seam, and every input has a size limit. A scraper
// proves who it is in one of two ways, both of which Prometheus supports:
//  - a client certificate signed by the cell's CA (Prometheus's tls_config
//    cert_file/key_file), verified by the TLS handshake;
//  - a bearer token (Prometheus's authorization credentials_file) equal to
//    the one in --metrics-token-file, compared in constant time.
// The process decides what each may do (MetricsAuthorizer): the master asks
// its Authorizer (action read-metrics), an agent its own rule.
//
// The server (Boost.Beast on one I/O thread; handlers on a small pool) is
// bounded so that nobody can hold it: an idle or slow connection costs no
// thread; a request's head must arrive whole within a deadline and within
// kMaxHeaderBytes in all; bodies are at most kMaxBodyBytes; connections are
// capped in all and per client address; requests being handled are capped
// (more get 503 at once); keep-alive connections close when idle. GET (and
// POST to pages, for the UI's login) only; no Range requests. Every answer,
// errors included, carries the security headers.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "metrics/registry.h"
#include "pki/pki.h"

namespace herd::https {

// Who is scraping, as far as the connection and the request prove it.
struct Scraper {
  // The client certificate the TLS handshake verified against the cell CA.
  std::optional<pki::CertInfo> cert;
  // The request carried the configured bearer token.
  bool token = false;
  std::string peer;  // "IP:PORT", for the log

  // "user prometheus", "the metrics token", "an anonymous client".
  std::string ToString() const;
};

// OK to serve; PERMISSION_DENIED (answered 403) or UNAUTHENTICATED (401)
// otherwise. Called on a server thread for every request.
using MetricsAuthorizer = std::function<absl::Status(const Scraper&)>;

// The agents' rule (and the default): the token, or a certificate of the
// master or of any user of the cell. (An agent does not see the master's
// user records: a revoked user's certificate passes here until it expires;
// the master's rule checks revocation.)
absl::Status AllowTokenMasterOrUser(const Scraper& who);

// A request for a path other than /metrics, as the connection proves it.
struct HttpRequest {
  std::string method;                        // "GET" or "POST"
  std::string path;                          // "/job/alice/web", decoded
  std::multimap<std::string, std::string> params;  // the query string, decoded
  std::string cookie;                        // the Cookie header, raw
  std::optional<pki::CertInfo> cert;         // a client certificate the handshake verified
  std::string peer;                          // "IP:PORT"
  std::string origin;                        // the Origin header ("" if none)
  std::string host;                          // the Host header
  std::string body;                          // a POST's (at most kMaxBodyBytes)
  std::string Param(const std::string& key) const;  // the first value, or ""
};

struct HttpReply {
  int status = 200;
  std::string content_type = "text/html; charset=utf-8";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // extra ones (Set-Cookie, Location)
};

using HttpHandler = std::function<HttpReply(const HttpRequest&)>;

struct HttpsServerOptions {
  std::string address;  // HOST:PORT; port 0 picks one
  // The server's credential: its certificate and key are presented, and
  // client certificates must be signed by its CA.
  pki::Credential identity;
  // A file holding the bearer token ("" accepts none). Read once at start;
  // it must not be readable by everyone and must hold at least
  // kMinTokenBytes (surrounding whitespace is ignored).
  std::string token_file;
  MetricsAuthorizer authorize = AllowTokenMasterOrUser;
  int threads = 2;  // handlers run on these
  // Every other path (the master's web UI); nullptr answers 404.
  HttpHandler pages;
  // Open at once. When all are taken, a client whose network holds fewer
  // takes the oldest connection that has not sent a request yet from the
  // network holding the most (at least two more), so idle connections from
  // a spread of addresses cannot lock out a real scrape; otherwise the new
  // one is closed at once.
  int max_connections = 256;
  int max_connections_per_client = 32;  // from one network (an IPv4 /24, an IPv6 /64)
  int max_in_flight = 64;               // requests being handled; more get 503
  int64_t head_timeout_ms = 10'000;     // TLS handshake, then a request's head, each within this
  int64_t idle_timeout_ms = 5'000;      // a kept-alive connection with no new request is closed
  int max_requests_per_connection = 100;
};

class HttpsServer {
 public:
  static constexpr size_t kMaxBodyBytes = 1024;
  static constexpr size_t kMaxHeaderBytes = 16 * 1024;  // request line and headers, in all
  static constexpr size_t kMinTokenBytes = 16;

  // Binds and starts serving `registry` (which must outlive the server).
  // UNAVAILABLE if the address cannot be bound; INVALID_ARGUMENT for a bad
  // address, credential or token file.
  static absl::StatusOr<std::unique_ptr<HttpsServer>> Start(HttpsServerOptions options, metrics::Registry* registry);
  ~HttpsServer();  // stops serving
  HttpsServer(const HttpsServer&) = delete;
  HttpsServer& operator=(const HttpsServer&) = delete;

  // HOST:PORT bound.
  const std::string& address() const { return bound_; }
  // The TLS server name its certificate carries (what a scraper must expect,
  // Prometheus's tls_config server_name): "master.herd", "<hash>.machine.herd".
  const std::string& server_name() const { return server_name_; }

  struct Impl;  // (public for the connections' code in the .cc)

 private:
  HttpsServer() = default;
  std::unique_ptr<Impl> impl_;
  std::string bound_;
  std::string server_name_;
};

// Reads a bearer token file (for --metrics-token-file); the checks of
// HttpsServerOptions::token_file.
absl::StatusOr<std::string> ReadTokenFile(const std::string& path);

}  // namespace herd::https
