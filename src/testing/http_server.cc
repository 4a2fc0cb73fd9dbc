#include "testing/http_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace herd::testing {
namespace {

[[noreturn]] void Die(const char* what) {
  std::fprintf(stderr, "HttpServer: %s\n", what);
  std::abort();
}

std::shared_ptr<void> MakeServerContext(const HttpServer::Tls& tls) {
  SSL_CTX* ctx = SSL_CTX_new(TLS_server_method());
  if (ctx == nullptr) Die("SSL_CTX_new");
  std::unique_ptr<BIO, decltype(&BIO_free)> cert(
      BIO_new_mem_buf(tls.cert_pem.data(), static_cast<int>(tls.cert_pem.size())), BIO_free);
  std::unique_ptr<BIO, decltype(&BIO_free)> key(
      BIO_new_mem_buf(tls.key_pem.data(), static_cast<int>(tls.key_pem.size())), BIO_free);
  X509* x = PEM_read_bio_X509(cert.get(), nullptr, nullptr, nullptr);
  EVP_PKEY* k = PEM_read_bio_PrivateKey(key.get(), nullptr, nullptr, nullptr);
  if (x == nullptr || k == nullptr || SSL_CTX_use_certificate(ctx, x) != 1 || SSL_CTX_use_PrivateKey(ctx, k) != 1) {
    Die("bad certificate or key");
  }
  X509_free(x);
  EVP_PKEY_free(k);
  return std::shared_ptr<void>(ctx, [](void* c) { SSL_CTX_free(static_cast<SSL_CTX*>(c)); });
}

}  // namespace

std::string HttpRequest::Header(const std::string& lower_case_name) const {
  auto it = headers.find(lower_case_name);
  return it == headers.end() ? "" : it->second;
}

int64_t HttpRequest::RangeStart() const {
  absl::string_view range = absl::StripAsciiWhitespace(Header("range"));
  int64_t start = 0;
  if (!absl::ConsumePrefix(&range, "bytes=") || !absl::SimpleAtoi(range.substr(0, range.find('-')), &start)) return 0;
  return start;
}

bool HttpConn::Write(absl::string_view bytes) {
  while (!bytes.empty()) {
    const size_t chunk = std::min<size_t>(bytes.size(), 1 << 20);
    ssize_t n = ssl_ != nullptr ? SSL_write(static_cast<SSL*>(ssl_), bytes.data(), static_cast<int>(chunk))
                                : send(fd_, bytes.data(), chunk, MSG_NOSIGNAL);
    if (n <= 0) return false;
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

bool HttpConn::Respond(int code, absl::string_view body,
                       const std::vector<std::pair<std::string, std::string>>& headers) {
  std::string head =
      absl::StrCat("HTTP/1.1 ", code, " Test\r\nConnection: close\r\nContent-Length: ", body.size(), "\r\n");
  for (const auto& [k, v] : headers) absl::StrAppend(&head, k, ": ", v, "\r\n");
  head += "\r\n";
  return Write(head) && Write(body);
}

void HttpConn::Hang() {
  absl::MutexLock l(&server_->mu_);
  server_->mu_.Await(absl::Condition(&server_->stopping_));
}

HttpServer::HttpServer(Handler handler, std::optional<Tls> tls) : handler_(std::move(handler)) {
  // A client that hangs up must not kill the test (SSL_write has no
  // MSG_NOSIGNAL).
  signal(SIGPIPE, SIG_IGN);
  if (tls) ssl_ctx_ = MakeServerContext(*tls);
  listen_fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in addr = {};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || listen(listen_fd_, 64) != 0) {
    Die("bind/listen on 127.0.0.1");
  }
  socklen_t len = sizeof(addr);
  getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
  port_ = ntohs(addr.sin_port);
  acceptor_ = std::thread([this] { Accept(); });
}

HttpServer::~HttpServer() {
  std::vector<std::thread> connections;
  {
    absl::MutexLock l(&mu_);
    stopping_ = true;
    // Wakes readers and writers blocked on a connection.
    for (int fd : open_fds_) shutdown(fd, SHUT_RDWR);
  }
  shutdown(listen_fd_, SHUT_RDWR);
  acceptor_.join();
  close(listen_fd_);
  {
    absl::MutexLock l(&mu_);
    connections.swap(connections_);
  }
  for (std::thread& t : connections) t.join();
}

std::string HttpServer::Url(absl::string_view path) const {
  return absl::StrCat(ssl_ctx_ ? "https" : "http", "://127.0.0.1:", port_, "/", path);
}

std::vector<HttpRequest> HttpServer::requests() const {
  absl::MutexLock l(&mu_);
  return requests_;
}

int HttpServer::request_count() const {
  absl::MutexLock l(&mu_);
  return static_cast<int>(requests_.size());
}

void HttpServer::Accept() {
  while (true) {
    int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) return;  // shut down
    absl::MutexLock l(&mu_);
    if (stopping_) {
      close(fd);
      return;
    }
    open_fds_.push_back(fd);
    connections_.emplace_back([this, fd] { Serve(fd); });
  }
}

void HttpServer::Serve(int fd) {
  std::unique_ptr<SSL, decltype(&SSL_free)> ssl(nullptr, SSL_free);
  if (ssl_ctx_) {
    ssl.reset(SSL_new(static_cast<SSL_CTX*>(ssl_ctx_.get())));
    SSL_set_fd(ssl.get(), fd);
    if (SSL_accept(ssl.get()) != 1) ssl.reset();  // e.g. the client did not trust us
  }
  std::string head;
  char buf[4096];
  while ((!ssl_ctx_ || ssl) && head.find("\r\n\r\n") == std::string::npos) {
    int n = ssl ? SSL_read(ssl.get(), buf, sizeof(buf)) : static_cast<int>(read(fd, buf, sizeof(buf)));
    if (n <= 0) break;
    head.append(buf, static_cast<size_t>(n));
  }
  if (size_t end = head.find("\r\n\r\n"); end != std::string::npos) {
    HttpRequest req;
    std::vector<std::string> lines = absl::StrSplit(head.substr(0, end), "\r\n");
    std::vector<std::string> first = absl::StrSplit(lines[0], ' ');
    req.method = first[0];
    req.path = first.size() > 1 ? first[1] : "";
    for (size_t i = 1; i < lines.size(); ++i) {
      std::pair<std::string, std::string> kv = absl::StrSplit(lines[i], absl::MaxSplits(':', 1));
      req.headers[absl::AsciiStrToLower(kv.first)] = std::string(absl::StripAsciiWhitespace(kv.second));
    }
    // The body, as long as Content-Length says (at most 1 MiB here).
    size_t length = 0;
    if (absl::SimpleAtoi(req.Header("content-length"), &length) && length <= (1u << 20)) {
      req.body = head.substr(end + 4);
      while (req.body.size() < length) {
        int n = ssl ? SSL_read(ssl.get(), buf, sizeof(buf)) : static_cast<int>(read(fd, buf, sizeof(buf)));
        if (n <= 0) break;
        req.body.append(buf, static_cast<size_t>(n));
      }
    }
    {
      absl::MutexLock l(&mu_);
      requests_.push_back(req);
    }
    HttpConn conn(this, fd, ssl.get());
    handler_(req, conn);
    if (ssl) SSL_shutdown(ssl.get());
  }
  absl::MutexLock l(&mu_);
  std::erase(open_fds_, fd);
  close(fd);
}

HttpServer::Handler ServeBytes(std::string name, std::shared_ptr<const std::string> body, bool ranges) {
  return [name = "/" + name, body, ranges](const HttpRequest& req, HttpConn& conn) {
    if (req.path != name) {
      conn.Respond(404, "not here\n");
      return;
    }
    const int64_t size = static_cast<int64_t>(body->size());
    const int64_t start = ranges ? req.RangeStart() : 0;
    if (start == 0) {
      conn.Respond(200, *body);
    } else if (start >= size) {
      conn.Respond(416, "", {{"Content-Range", absl::StrCat("bytes */", size)}});
    } else {
      conn.Respond(206, absl::string_view(*body).substr(static_cast<size_t>(start)),
                   {{"Content-Range", absl::StrCat("bytes ", start, "-", size - 1, "/", size)}});
    }
  };
}

}  // namespace herd::testing
