// An HTTP/1.1 server on 127.0.0.1 for tests and benchmarks of HTTP clients,
// plain or over TLS, whose handler decides every byte: it may answer, send
// half a body and hang up, redirect, or never answer at all. One request
// per connection, each connection on its own thread. Test-only.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace herd::testing {

struct HttpRequest {
  std::string method;
  std::string path;                            // as sent: "/web.tar"
  std::map<std::string, std::string> headers;  // names in lower case
  std::string body;                            // as long as its Content-Length
  // The header's value, "" if absent.
  std::string Header(const std::string& lower_case_name) const;
  // The N of "Range: bytes=N-", or 0.
  int64_t RangeStart() const;
};

class HttpServer;

// The connection a handler answers on. The server closes it when the
// handler returns.
class HttpConn {
 public:
  // False once the client has gone.
  bool Write(absl::string_view bytes);
  // A status line, the headers, Content-Length and `body`.
  bool Respond(int code, absl::string_view body, const std::vector<std::pair<std::string, std::string>>& headers = {});
  // Blocks until the server is being destroyed: a server that accepted the
  // request and never answers.
  void Hang();

 private:
  friend class HttpServer;
  HttpConn(HttpServer* server, int fd, void* ssl) : server_(server), fd_(fd), ssl_(ssl) {}
  HttpServer* server_;
  int fd_;
  void* ssl_;  // SSL*, or null for plain HTTP
};

class HttpServer {
 public:
  using Handler = std::function<void(const HttpRequest&, HttpConn&)>;
  struct Tls {
    std::string cert_pem;  // the server's certificate (valid for IP 127.0.0.1)
    std::string key_pem;
  };
  explicit HttpServer(Handler handler, std::optional<Tls> tls = std::nullopt);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // "http://127.0.0.1:PORT/PATH" (https with TLS); `path` without its "/".
  std::string Url(absl::string_view path) const;
  int port() const { return port_; }
  // The requests read so far, in order.
  std::vector<HttpRequest> requests() const;
  int request_count() const;

 private:
  friend class HttpConn;
  void Accept();
  void Serve(int fd);

  Handler handler_;
  std::shared_ptr<void> ssl_ctx_;  // SSL_CTX*
  int listen_fd_ = -1;
  int port_ = 0;
  std::thread acceptor_;
  mutable absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<HttpRequest> requests_ ABSL_GUARDED_BY(mu_);
  std::vector<int> open_fds_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> connections_ ABSL_GUARDED_BY(mu_);
};

// Serves `body` for GET /NAME (404 for anything else), honouring
// "Range: bytes=N-" (206) unless `ranges` is false (then always 200).
HttpServer::Handler ServeBytes(std::string name, std::shared_ptr<const std::string> body, bool ranges = true);

}  // namespace herd::testing
