#include "https/https_server.h"

#include <sys/stat.h>

#include <openssl/crypto.h>
#include <openssl/pem.h>
#include <openssl/sha.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <fstream>
#include <sstream>
#include <thread>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>

#include <atomic>
#include <functional>
#include <map>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "base/clock.h"
#include "base/log.h"

namespace herd::https {
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
bool TokenMatches(const std::string& auth, const std::string& token_digest) {
  if (token_digest.empty()) return false;
  constexpr absl::string_view kBearer = "Bearer ";
  if (!absl::StartsWithIgnoreCase(auth, kBearer)) return false;
  const std::string got = Sha256(absl::StripAsciiWhitespace(absl::string_view(auth).substr(kBearer.size())));
  return CRYPTO_memcmp(got.data(), token_digest.data(), got.size()) == 0;
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
  if (token.size() < HttpsServer::kMinTokenBytes) {
    return absl::InvalidArgumentError(absl::StrCat("metrics token file ", path, ": the token must have at least ",
                                                   HttpsServer::kMinTokenBytes, " characters"));
  }
  for (char c : token) {
    if (c < 0x21 || c > 0x7e) {
      return absl::InvalidArgumentError(
          absl::StrCat("metrics token file ", path, ": the token must be one word of printable ASCII"));
    }
  }
  return token;
}


namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
namespace ssl = net::ssl;
using tcp = net::ip::tcp;

// Headers on every answer: nothing cached (pages carry a user's view), the
// page never framed, content only from this origin, no referrer leaked to
// another site ("same-origin", not "no-referrer": with that, browsers send
// "Origin: null" on a form POST, and the login could not check it).
template <typename Response>
void SecurityHeaders(Response& res) {
  res.set(http::field::cache_control, "no-store");
  res.set("X-Content-Type-Options", "nosniff");
  res.set("X-Frame-Options", "DENY");
  res.set("Referrer-Policy", "same-origin");
  res.set("Content-Security-Policy",
          "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
          "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'");
}

int FromHex(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// %XX decoded (and '+' as a space in a query string); a bad escape is kept.
std::string Decode(absl::string_view s, bool query) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && FromHex(s[i + 1]) >= 0 && FromHex(s[i + 2]) >= 0) {
      out.push_back(static_cast<char>(FromHex(s[i + 1]) * 16 + FromHex(s[i + 2])));
      i += 2;
    } else if (query && s[i] == '+') {
      out.push_back(' ');
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

}  // namespace

struct HttpsServer::Impl {
  // In this order: sessions the I/O context still holds when it goes touch
  // the counters above it.
  HttpsServerOptions options;
  metrics::Registry* registry = nullptr;
  std::string token_digest;
  absl::Mutex mu;
  std::map<std::string, int> per_client ABSL_GUARDED_BY(mu);  // open connections by client network
  // Every open connection, for choosing one to close when all are taken.
  struct Held {
    std::string network;
    int64_t since_ms = 0;
    bool served = false;          // has sent a whole request
    std::function<void()> close;  // posts a close to the session's strand
  };
  std::map<uint64_t, Held> held ABSL_GUARDED_BY(mu);
  uint64_t next_id ABSL_GUARDED_BY(mu) = 0;
  std::atomic<int> connections{0};
  std::atomic<int> in_flight{0};
  ssl::context tls{ssl::context::tls_server};
  net::io_context ioc{1};
  tcp::acceptor acceptor{ioc};
  std::unique_ptr<net::thread_pool> workers;
  std::thread io_thread;

  void Accept();
  // Whether a connection from `network` may open now, closing another to
  // make room when all are taken (HttpsServerOptions::max_connections).
  bool Admit(const std::string& network) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  HttpReply Route(const HttpRequest& req, const std::string& authorization);
};

namespace {

// Connections are counted by network, not address: a host has a whole
// IPv4 /24 or IPv6 /64 to connect from.
std::string NetworkOf(const net::ip::address& a) {
  if (a.is_v6() && a.to_v6().is_v4_mapped()) return NetworkOf(net::ip::make_address_v4(net::ip::v4_mapped, a.to_v6()));
  if (a.is_v4()) {
    const auto b = a.to_v4().to_bytes();
    return absl::StrCat(b[0], ".", b[1], ".", b[2], ".0/24");
  }
  const auto b = a.to_v6().to_bytes();
  std::string out;
  for (int i = 0; i < 8; i += 2) absl::StrAppend(&out, absl::Hex(b[i] << 8 | b[i + 1]), ":");
  return out + ":/64";
}

}  // namespace

bool HttpsServer::Impl::Admit(const std::string& network) {
  const int mine = per_client[network];
  if (mine >= options.max_connections_per_client) return false;
  if (connections.load() < options.max_connections) return true;
  auto victim = held.end();
  for (auto it = held.begin(); it != held.end(); ++it) {
    if (it->second.served) continue;  // a client that talks keeps its connection
    const int n = per_client[it->second.network];
    if (n <= mine + 1) continue;
    const int v = victim == held.end() ? 0 : per_client[victim->second.network];
    if (n > v || (n == v && it->second.since_ms < victim->second.since_ms)) victim = it;
  }
  if (victim == held.end()) return false;
  victim->second.close();
  victim->second.served = true;  // chosen once
  return true;
}

namespace {

// One client connection: TLS handshake, then requests one at a time, each
// handled on the worker pool and answered here.
class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, HttpsServer::Impl* server, std::string client, std::string network, uint64_t id)
      : stream_(std::move(socket), server->tls),
        server_(server),
        client_(std::move(client)),
        network_(std::move(network)),
        id_(id) {}

  ~Session() {
    server_->connections.fetch_sub(1);
    absl::MutexLock l(&server_->mu);
    server_->held.erase(id_);
    auto it = server_->per_client.find(network_);
    if (it != server_->per_client.end() && --it->second <= 0) server_->per_client.erase(it);
  }

  void Start() {
    {
      absl::MutexLock l(&server_->mu);
      HttpsServer::Impl::Held& h = server_->held[id_];
      h.network = network_;
      h.since_ms = SteadyNowMs();
      h.close = [weak = weak_from_this()] {
        if (std::shared_ptr<Session> s = weak.lock()) {
          net::post(s->stream_.get_executor(), [s] {
            beast::error_code ignored;
            beast::get_lowest_layer(s->stream_).socket().close(ignored);
          });
        }
      };
    }
    beast::get_lowest_layer(stream_).expires_after(std::chrono::milliseconds(server_->options.head_timeout_ms));
    stream_.async_handshake(ssl::stream_base::server,
                            [self = shared_from_this()](beast::error_code ec) {
                              if (!ec) self->Read();
                            });
  }

 private:
  void Read() {
    parser_.emplace();
    parser_->header_limit(static_cast<std::uint32_t>(HttpsServer::kMaxHeaderBytes));
    parser_->body_limit(HttpsServer::kMaxBodyBytes);
    // The first request's head within the head timeout; later ones within
    // the idle timeout (a kept-alive connection that sends nothing goes).
    const int64_t ms = requests_ == 0 ? server_->options.head_timeout_ms
                                      : std::min(server_->options.idle_timeout_ms, server_->options.head_timeout_ms);
    beast::get_lowest_layer(stream_).expires_after(std::chrono::milliseconds(ms));
    http::async_read(stream_, buffer_, *parser_, [self = shared_from_this()](beast::error_code ec, size_t) {
      self->OnRead(ec);
    });
  }

  void OnRead(beast::error_code ec) {
    if (ec == http::error::header_limit || ec == http::error::body_limit || ec == http::error::buffer_overflow) {
      HttpReply r{ec == http::error::body_limit ? 413 : 431, "text/plain", "request too large\n", {}};
      Write(std::move(r), false);
      return;
    }
    if (ec) return;  // closed, timed out or malformed: drop it
    if (requests_ == 0) {
      absl::MutexLock l(&server_->mu);
      if (auto it = server_->held.find(id_); it != server_->held.end()) it->second.served = true;
    }
    ++requests_;
    http::request<http::string_body> req = parser_->release();
    const bool keep_alive =
        req.keep_alive() && requests_ < server_->options.max_requests_per_connection;
    if (req.method() != http::verb::get && req.method() != http::verb::post) {
      Write(HttpReply{405, "text/plain", "only GET and POST\n", {{"Allow", "GET, POST"}}}, keep_alive);
      return;
    }
    HttpRequest r;
    r.method = std::string(req.method_string());
    const absl::string_view target(req.target().data(), req.target().size());
    const size_t q = target.find('?');
    r.path = Decode(target.substr(0, q), false);
    if (q != absl::string_view::npos) {
      for (absl::string_view kv : absl::StrSplit(target.substr(q + 1), '&', absl::SkipEmpty())) {
        const size_t eq = kv.find('=');
        r.params.emplace(Decode(kv.substr(0, eq), true),
                         eq == absl::string_view::npos ? "" : Decode(kv.substr(eq + 1), true));
      }
    }
    auto header = [&](http::field f) {
      auto it = req.find(f);
      return it == req.end() ? std::string() : std::string(it->value().data(), it->value().size());
    };
    r.cookie = header(http::field::cookie);
    r.origin = header(http::field::origin);
    r.host = header(http::field::host);
    r.body = std::move(req.body());
    r.cert = VerifiedPeer(stream_.native_handle(), server_->options.identity.ca_pem);
    r.peer = client_;
    const std::string authorization = header(http::field::authorization);
    if (server_->in_flight.fetch_add(1) >= server_->options.max_in_flight) {
      server_->in_flight.fetch_sub(1);
      Write(HttpReply{503, "text/plain", "busy; try again\n", {{"Retry-After", "1"}}}, keep_alive);
      return;
    }
    net::post(*server_->workers, [self = shared_from_this(), r = std::move(r), authorization, keep_alive] {
      HttpReply reply = self->server_->Route(r, authorization);
      self->server_->in_flight.fetch_sub(1);
      net::post(self->stream_.get_executor(), [self, reply = std::move(reply), keep_alive]() mutable {
        self->Write(std::move(reply), keep_alive);
      });
    });
  }

  void Write(HttpReply reply, bool keep_alive) {
    auto res = std::make_shared<http::response<http::string_body>>(static_cast<http::status>(reply.status), 11);
    res->set(http::field::server, "herd");
    res->set(http::field::content_type, reply.content_type);
    SecurityHeaders(*res);
    for (const auto& [k, v] : reply.headers) res->set(k, v);
    res->body() = std::move(reply.body);
    res->keep_alive(keep_alive);
    res->prepare_payload();
    beast::get_lowest_layer(stream_).expires_after(std::chrono::milliseconds(server_->options.head_timeout_ms));
    http::async_write(stream_, *res, [self = shared_from_this(), res, keep_alive](beast::error_code ec, size_t) {
      if (ec) return;
      if (keep_alive) {
        self->Read();
        return;
      }
      beast::get_lowest_layer(self->stream_).expires_after(std::chrono::seconds(2));
      self->stream_.async_shutdown([self](beast::error_code) {});
    });
  }

  beast::ssl_stream<beast::tcp_stream> stream_;
  HttpsServer::Impl* server_;
  const std::string client_;
  const std::string network_;
  const uint64_t id_;
  beast::flat_buffer buffer_{HttpsServer::kMaxHeaderBytes + HttpsServer::kMaxBodyBytes};
  std::optional<http::request_parser<http::string_body>> parser_;
  int requests_ = 0;
};

}  // namespace

void HttpsServer::Impl::Accept() {
  acceptor.async_accept(net::make_strand(ioc), [this](beast::error_code ec, tcp::socket socket) {
    if (ec == net::error::operation_aborted) return;
    if (!ec) {
      beast::error_code ignored;
      const tcp::endpoint peer = socket.remote_endpoint(ignored);
      const std::string client = peer.address().to_string();
      const std::string network = NetworkOf(peer.address());
      bool admit = false;
      uint64_t id = 0;
      {
        absl::MutexLock l(&mu);
        admit = Admit(network);
        if (admit) {
          ++per_client[network];
          id = next_id++;
        }
      }
      if (admit) {
        connections.fetch_add(1);
        std::make_shared<Session>(std::move(socket), this, client, network, id)->Start();
      } else {
        socket.close(ignored);  // over a limit: closed before any TLS work
      }
    }
    Accept();
  });
}

HttpReply HttpsServer::Impl::Route(const HttpRequest& req, const std::string& authorization) {
  if (req.path == "/metrics") {
    if (req.method != "GET") return HttpReply{405, "text/plain", "GET /metrics\n", {{"Allow", "GET"}}};
    Scraper who;
    who.peer = req.peer;
    who.cert = req.cert;
    who.token = !who.cert && TokenMatches(authorization, token_digest);
    absl::Status st = options.authorize(who);
    if (!st.ok()) {
      HERD_LOG_WARN("metrics: refused {} from {}: {}", who.ToString(), who.peer, st.message());
      const bool unauthenticated = st.code() == absl::StatusCode::kUnauthenticated;
      HttpReply r{unauthenticated ? 401 : 403, "text/plain", absl::StrCat(st.message(), "\n"), {}};
      if (unauthenticated) r.headers.push_back({"WWW-Authenticate", "Bearer"});
      return r;
    }
    return HttpReply{200, std::string(metrics::Registry::kContentType), registry->Text(), {}};
  }
  if (!options.pages) return HttpReply{404, "text/plain", "not found\n", {}};
  return options.pages(req);
}

absl::StatusOr<std::unique_ptr<HttpsServer>> HttpsServer::Start(HttpsServerOptions options,
                                                                    metrics::Registry* registry) {
  const size_t colon = options.address.rfind(':');
  int port = -1;
  if (colon == std::string::npos || colon == 0 || !absl::SimpleAtoi(options.address.substr(colon + 1), &port) ||
      port < 0 || port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("--metrics ", options.address, ": expected HOST:PORT"));
  }
  std::string host = options.address.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  auto server = std::unique_ptr<HttpsServer>(new HttpsServer());
  auto impl = std::make_unique<Impl>();
  if (!options.token_file.empty()) {
    absl::StatusOr<std::string> token = ReadTokenFile(options.token_file);
    if (!token.ok()) return token.status();
    impl->token_digest = Sha256(*token);
  }
  server->server_name_ = pki::ServerName(options.identity.info.subject);
  if (!SetUpTls(*impl->tls.native_handle(), options.identity)) {
    return absl::InvalidArgumentError("metrics: cannot set up TLS with this process's credential");
  }
  beast::error_code ec;
  net::ip::address addr = net::ip::make_address(host, ec);
  if (ec) {
    tcp::resolver resolver(impl->ioc);
    auto found = resolver.resolve(host, "", ec);
    if (ec || found.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("--metrics ", options.address, ": cannot resolve ", host));
    }
    addr = found.begin()->endpoint().address();
  }
  const tcp::endpoint endpoint(addr, static_cast<uint16_t>(port));
  impl->acceptor.open(endpoint.protocol(), ec);
  if (!ec) impl->acceptor.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) impl->acceptor.bind(endpoint, ec);
  if (!ec) impl->acceptor.listen(net::socket_base::max_listen_connections, ec);
  if (ec) return absl::UnavailableError(absl::StrCat("metrics: cannot listen on ", options.address, ": ", ec.message()));
  const int bound_port = impl->acceptor.local_endpoint().port();
  server->bound_ = absl::StrCat(host.find(':') != std::string::npos ? absl::StrCat("[", host, "]") : host, ":",
                                bound_port);
  impl->workers = std::make_unique<net::thread_pool>(static_cast<size_t>(std::max(1, options.threads)));
  impl->registry = registry;
  impl->options = std::move(options);
  impl->Accept();
  Impl* raw = impl.get();
  impl->io_thread = std::thread([raw] { raw->ioc.run(); });
  server->impl_ = std::move(impl);
  return server;
}

HttpsServer::~HttpsServer() {
  if (!impl_) return;
  impl_->ioc.stop();
  if (impl_->io_thread.joinable()) impl_->io_thread.join();
  beast::error_code ignored;
  impl_->acceptor.close(ignored);
  impl_->workers->join();  // handlers in flight finish (their answers are dropped)
}

}  // namespace herd::https
