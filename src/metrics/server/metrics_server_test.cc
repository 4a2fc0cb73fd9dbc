#include "metrics/server/metrics_server.h"

#include <sys/stat.h>

#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <httplib.h>

#include "absl/strings/match.h"
#include "absl/time/clock.h"

namespace herd::metrics {
namespace {

constexpr char kToken[] = "s3cret-token-of-the-scraper";

struct Pki {
  pki::Authority ca;
  pki::Credential master, user, machine;
};

Pki MakePki(const std::string& cell) {
  const int64_t now = absl::ToUnixSeconds(absl::Now());
  Pki p;
  p.ca = *pki::CreateAuthority(cell, now, 3600);
  p.master = *pki::IssueCredential(p.ca, {pki::Role::kMaster, "master"}, now, 3600);
  p.user = *pki::IssueCredential(p.ca, {pki::Role::kUser, "prometheus"}, now, 3600);
  p.machine = *pki::IssueCredential(p.ca, {pki::Role::kMachine, "m1"}, now, 3600);
  return p;
}

std::string TempFile(const std::string& name, const std::string& text, mode_t mode) {
  const std::string dir = ::testing::TempDir();
  const std::string path = (std::filesystem::path(dir) / name).string();
  std::ofstream(path) << text;
  chmod(path.c_str(), mode);
  return path;
}

struct Reply {
  bool connected = false;
  int status = 0;
  std::string body;
  std::string content_type;
};

// GET (or POST) /metrics over TLS, checking the server's certificate against
// `server_ca` and its name, presenting `client` if given.
Reply Scrape(const std::string& address, const Pki& server_pki, const pki::Credential* client,
             const std::string& bearer = "", bool post = false) {
  const std::string host = address.substr(0, address.rfind(':'));
  const int port = std::stoi(address.substr(address.rfind(':') + 1));
  X509* cert = nullptr;
  EVP_PKEY* key = nullptr;
  if (client != nullptr) {
    BIO* b = BIO_new_mem_buf(client->cert_pem.data(), static_cast<int>(client->cert_pem.size()));
    cert = PEM_read_bio_X509(b, nullptr, nullptr, nullptr);
    BIO_free(b);
    b = BIO_new_mem_buf(client->key_pem.data(), static_cast<int>(client->key_pem.size()));
    key = PEM_read_bio_PrivateKey(b, nullptr, nullptr, nullptr);
    BIO_free(b);
  }
  httplib::SSLClient cli(host, port, cert, key);
  X509_free(cert);
  EVP_PKEY_free(key);
  X509_STORE* store = X509_STORE_new();
  BIO* b = BIO_new_mem_buf(server_pki.ca.cert_pem.data(), static_cast<int>(server_pki.ca.cert_pem.size()));
  X509* ca = PEM_read_bio_X509(b, nullptr, nullptr, nullptr);
  BIO_free(b);
  X509_STORE_add_cert(store, ca);
  X509_free(ca);
  cli.set_ca_cert_store(store);
  // The certificate names the server by its identity ("master.herd"), not by
  // the address httplib would check it against; the Prometheus integration
  // test checks it by name (tls_config server_name).
  cli.enable_server_certificate_verification(false);
  cli.set_connection_timeout(5, 0);
  if (!bearer.empty()) cli.set_bearer_token_auth(bearer);
  httplib::Result r = post ? cli.Post("/metrics", std::string(4096, 'x'), "text/plain") : cli.Get("/metrics");
  Reply out;
  if (!r) return out;
  out.connected = true;
  out.status = r->status;
  out.body = r->body;
  out.content_type = r->get_header_value("Content-Type");
  return out;
}

class MetricsServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    pki_ = MakePki("local");
    registry_.GetCounter("herd_task_starts_total", "Task attempts started").Inc(3);
    MetricsServerOptions o;
    o.address = "127.0.0.1:0";
    o.identity = pki_.master;
    o.token_file = TempFile("token", std::string(kToken) + "\n", 0600);
    auto s = MetricsServer::Start(std::move(o), &registry_);
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = std::move(*s);
  }

  Pki pki_;
  Registry registry_;
  std::unique_ptr<MetricsServer> server_;
};

TEST_F(MetricsServerTest, ServesAUserCertificate) {
  EXPECT_EQ(server_->server_name(), "master.herd");
  Reply r = Scrape(server_->address(), pki_, &pki_.user);
  ASSERT_TRUE(r.connected);
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.content_type, "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_TRUE(absl::StrContains(r.body, "herd_task_starts_total 3")) << r.body;
}

TEST_F(MetricsServerTest, ServesTheBearerToken) {
  Reply r = Scrape(server_->address(), pki_, nullptr, kToken);
  ASSERT_TRUE(r.connected);
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_TRUE(absl::StrContains(r.body, "herd_task_starts_total 3")) << r.body;
}

TEST_F(MetricsServerTest, RefusesAnonymousAndWrongTokens) {
  Reply none = Scrape(server_->address(), pki_, nullptr);
  ASSERT_TRUE(none.connected);
  EXPECT_EQ(none.status, 401);
  EXPECT_FALSE(absl::StrContains(none.body, "herd_task_starts_total"));
  Reply wrong = Scrape(server_->address(), pki_, nullptr, "s3cret-token-of-the-scrapeR");
  EXPECT_EQ(wrong.status, 401);
  Reply prefix = Scrape(server_->address(), pki_, nullptr, "s3cret");
  EXPECT_EQ(prefix.status, 401);
}

TEST_F(MetricsServerTest, RefusesAMachineCertificate) {
  Reply r = Scrape(server_->address(), pki_, &pki_.machine);
  ASSERT_TRUE(r.connected);
  EXPECT_EQ(r.status, 403);
  EXPECT_TRUE(absl::StrContains(r.body, "machine m1 may not read metrics")) << r.body;
}

TEST_F(MetricsServerTest, ACertificateOfAnotherCellFailsTheHandshake) {
  Pki other = MakePki("other");
  Reply r = Scrape(server_->address(), pki_, &other.user);
  EXPECT_FALSE(r.connected && r.status == 200) << r.status << " " << r.body;
}

TEST_F(MetricsServerTest, OnlyGetMetricsWithinLimits) {
  Reply post = Scrape(server_->address(), pki_, &pki_.user, "", /*post=*/true);
  ASSERT_TRUE(post.connected);
  EXPECT_NE(post.status, 200);
  EXPECT_FALSE(absl::StrContains(post.body, "herd_task_starts_total"));
}

TEST(MetricsServer, TokenFilesMustBePrivateAndLongEnough) {
  EXPECT_FALSE(ReadTokenFile(TempFile("open", std::string(kToken), 0644)).ok());
  EXPECT_FALSE(ReadTokenFile(TempFile("short", "abc", 0600)).ok());
  EXPECT_FALSE(ReadTokenFile(TempFile("two", "abcdefgh ijklmnopq", 0600)).ok());
  EXPECT_FALSE(ReadTokenFile("/nonexistent/token").ok());
  auto ok = ReadTokenFile(TempFile("ok", std::string("  ") + kToken + "\n", 0640));
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(*ok, kToken);
}

TEST(MetricsServer, BadAddressesAreRefused) {
  Pki p = MakePki("local");
  Registry r;
  for (const char* a : {"nope", "127.0.0.1:99999", ":80"}) {
    MetricsServerOptions o;
    o.address = a;
    o.identity = p.master;
    EXPECT_EQ(MetricsServer::Start(o, &r).status().code(), absl::StatusCode::kInvalidArgument) << a;
  }
}


// One TLS handshake with `session` offered for resumption (null: a full
// one); returns the session the server gave, and whether it resumed.
SSL_SESSION* Handshake(const std::string& address, SSL_SESSION* session, bool* reused) {
  const std::string host = address.substr(0, address.rfind(':'));
  const int port = std::stoi(address.substr(address.rfind(':') + 1));
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, host.c_str(), &sa.sin_addr);
  if (connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0) {
    close(fd);
    return nullptr;
  }
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  SSL_CTX_set_max_proto_version(ctx, TLS1_2_VERSION);  // the session is known right after the handshake
  SSL* ssl = SSL_new(ctx);
  SSL_set_fd(ssl, fd);
  if (session != nullptr) SSL_set_session(ssl, session);
  SSL_SESSION* out = nullptr;
  if (SSL_connect(ssl) == 1) {
    *reused = SSL_session_reused(ssl) == 1;
    out = SSL_get1_session(ssl);
  }
  SSL_shutdown(ssl);
  SSL_free(ssl);
  SSL_CTX_free(ctx);
  close(fd);
  return out;
}

// A browser's second connection resumes the first one's TLS session. With
// client certificates asked for, OpenSSL fails such a handshake unless the
// server set a session id context: Chromium then failed every script the UI
// loaded over a second connection (ERR_SSL_PROTOCOL_ERROR).
TEST_F(MetricsServerTest, ASecondConnectionResumesTheSession) {
  bool reused = false;
  SSL_SESSION* first = Handshake(server_->address(), nullptr, &reused);
  ASSERT_NE(first, nullptr);
  EXPECT_FALSE(reused);
  SSL_SESSION* second = Handshake(server_->address(), first, &reused);
  ASSERT_NE(second, nullptr) << "the resumed handshake failed";
  EXPECT_TRUE(reused);
  SSL_SESSION_free(first);
  SSL_SESSION_free(second);
}

}  // namespace
}  // namespace herd::metrics
