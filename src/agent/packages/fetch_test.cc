// FetchToFile over http and https against real servers on loopback
// (testing/http_server.h) whose handlers misbehave on purpose: https with
// the cell CA and the system CAs (and not with an unknown CA), redirects
// followed but bounded and only to http(s), the size limit with and without
// a Content-Length, a cut download resumed with Range (and started over when
// the server ignores Range), timeouts on a silent or stalled server, retries
// of 5xx but not of 4xx, and stopping.
#include "agent/packages/fetch.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "pki/pki.h"
#include "testing/eventually.h"
#include "testing/http_server.h"

namespace herd::agent {
namespace {

using ::herd::testing::Eventually;
using ::herd::testing::HttpConn;
using ::herd::testing::HttpRequest;
using ::herd::testing::HttpServer;
using ::herd::testing::ServeBytes;

// A body of `n` bytes that is not periodic (so a resume at the wrong
// offset shows in the digest).
std::shared_ptr<const std::string> Body(size_t n) {
  auto s = std::make_shared<std::string>(n, '\0');
  uint32_t x = 12345;
  for (char& c : *s) {
    x = x * 1103515245 + 12345;
    c = static_cast<char>(x >> 16);
  }
  return s;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// A CA and a server credential from it, valid for 127.0.0.1.
struct Pki {
  pki::Authority ca;
  HttpServer::Tls server;
};
Pki MakePki(const std::string& name) {
  const int64_t now = time(nullptr);
  absl::StatusOr<pki::Authority> ca = pki::CreateAuthority(name, now, 3600);
  EXPECT_TRUE(ca.ok()) << ca.status();
  absl::StatusOr<pki::Credential> cred =
      pki::IssueCredential(*ca, pki::Subject{pki::Role::kMachine, "pkgs." + name}, now, 3600, "IP:127.0.0.1");
  EXPECT_TRUE(cred.ok()) << cred.status();
  return Pki{*ca, {cred->cert_pem, cred->key_pem}};
}

class FetchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // Loopback servers: never through a proxy of the machine's.
    for (const char* v : {"http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"}) {
      unsetenv(v);
    }
    char tmpl[] = "/tmp/herd-fetch-XXXXXX";
    dir_ = mkdtemp(tmpl);
    dest_ = dir_ + "/archive";
    options_.attempts = 3;
    options_.backoff_initial_ms = 1;  // retries at once: the tests wait for nothing
    options_.backoff_max_ms = 2;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  absl::StatusOr<Fetched> Fetch(const std::string& url) { return FetchToFile(url, dest_, options_); }

  std::string dir_, dest_;
  FetchOptions options_;
};

TEST_F(FetchTest, Http) {
  auto body = Body(300'000);
  HttpServer server(ServeBytes("web.tar", body));
  absl::StatusOr<Fetched> f = Fetch(server.Url("web.tar"));
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->sha256, Sha256Hex(*body));
  EXPECT_EQ(f->size_bytes, 300'000);
  EXPECT_EQ(f->resumed_bytes, 0);
  EXPECT_EQ(ReadAll(dest_), *body);
  EXPECT_EQ(server.request_count(), 1);
  EXPECT_EQ(server.requests()[0].Header("user-agent"), "herd-agent");
}

TEST_F(FetchTest, HttpsTrustsTheCellCaAndTheSystemCas) {
  auto body = Body(100'000);
  Pki cell = MakePki("cell");
  Pki public_ca = MakePki("public");  // stands for a CA the system trusts
  Pki stranger = MakePki("stranger");
  HttpServer cell_server(ServeBytes("a.tar", body), cell.server);
  HttpServer public_server(ServeBytes("a.tar", body), public_ca.server);
  HttpServer stranger_server(ServeBytes("a.tar", body), stranger.server);
  options_.system_ca_file = dir_ + "/system-cas.pem";
  std::ofstream(options_.system_ca_file) << public_ca.ca.cert_pem;
  options_.extra_ca_pem = cell.ca.cert_pem;

  for (HttpServer* s : {&cell_server, &public_server}) {
    absl::StatusOr<Fetched> f = Fetch(s->Url("a.tar"));
    ASSERT_TRUE(f.ok()) << s->Url("a.tar") << ": " << f.status();
    EXPECT_EQ(f->sha256, Sha256Hex(*body));
  }
  absl::StatusOr<Fetched> f = Fetch(stranger_server.Url("a.tar"));
  EXPECT_EQ(f.status().code(), absl::StatusCode::kUnauthenticated) << f.status();
  EXPECT_TRUE(absl::StrContains(f.status().message(), stranger_server.Url("a.tar"))) << f.status();
  EXPECT_EQ(stranger_server.request_count(), 0) << "a certificate error is not retried, nor is a request sent";

  // The cell's server is trusted because of extra_ca_pem, not by accident.
  options_.extra_ca_pem.clear();
  f = Fetch(cell_server.Url("a.tar"));
  EXPECT_EQ(f.status().code(), absl::StatusCode::kUnauthenticated) << f.status();
}

TEST_F(FetchTest, FollowsRedirects) {
  auto body = Body(50'000);
  Pki cell = MakePki("cell");
  options_.extra_ca_pem = cell.ca.cert_pem;
  HttpServer https(ServeBytes("v2/web.tar", body), cell.server);
  // /web.tar -> /v1/web.tar (relative) -> https://.../v2/web.tar.
  HttpServer http([&](const HttpRequest& req, HttpConn& conn) {
    if (req.path == "/web.tar") conn.Respond(302, "moved\n", {{"Location", "/v1/web.tar"}});
    if (req.path == "/v1/web.tar") conn.Respond(301, "", {{"Location", https.Url("v2/web.tar")}});
  });
  absl::StatusOr<Fetched> f = Fetch(http.Url("web.tar"));
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->sha256, Sha256Hex(*body));
  EXPECT_EQ(ReadAll(dest_), *body) << "a redirect's body is not part of the archive";
  EXPECT_EQ(http.request_count(), 2);
  EXPECT_EQ(https.request_count(), 1);
}

TEST_F(FetchTest, RefusesARedirectLoopAndTooManyRedirects) {
  HttpServer loop([&](const HttpRequest&, HttpConn& conn) { conn.Respond(302, "", {{"Location", "/again"}}); });
  options_.max_redirects = 3;
  absl::StatusOr<Fetched> f = Fetch(loop.Url("again"));
  ASSERT_FALSE(f.ok());
  EXPECT_TRUE(absl::StrContains(f.status().message(), "redirects")) << f.status();
  EXPECT_TRUE(absl::StrContains(f.status().message(), loop.Url("again"))) << f.status();
  EXPECT_EQ(loop.request_count(), 4) << "the first request and 3 redirects, not retried";

  // A chain of two redirects: one more than allowed, then just allowed.
  options_.max_redirects = 1;
  HttpServer two([&](const HttpRequest& req, HttpConn& conn) {
    if (req.path == "/1") conn.Respond(302, "", {{"Location", "/2"}});
    if (req.path == "/2") conn.Respond(302, "", {{"Location", "/3"}});
    if (req.path == "/3") conn.Respond(200, "done");
  });
  f = Fetch(two.Url("1"));
  EXPECT_FALSE(f.ok());
  EXPECT_TRUE(absl::StrContains(f.status().message(), "redirects")) << f.status();
  options_.max_redirects = 2;
  f = Fetch(two.Url("1"));
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(ReadAll(dest_), "done");
}

TEST_F(FetchTest, RefusesNonHttpSchemes) {
  absl::StatusOr<Fetched> f = Fetch("ftp://127.0.0.1/web.tar");
  EXPECT_EQ(f.status().code(), absl::StatusCode::kInvalidArgument) << f.status();
  std::ofstream(dir_ + "/secret") << "not for the network\n";
  for (const std::string& to : {absl::StrCat("file://", dir_, "/secret"), std::string("ftp://127.0.0.1/x.tar"),
                                std::string("gopher://127.0.0.1/x")}) {
    HttpServer server([&](const HttpRequest&, HttpConn& conn) { conn.Respond(302, "", {{"Location", to}}); });
    f = Fetch(server.Url("web.tar"));
    EXPECT_EQ(f.status().code(), absl::StatusCode::kInvalidArgument) << to << ": " << f.status();
    EXPECT_TRUE(absl::StrContains(f.status().message(), "http and https only")) << f.status();
    EXPECT_EQ(server.request_count(), 1);
    EXPECT_FALSE(absl::StrContains(ReadAll(dest_), "not for the network"));
  }
}

TEST_F(FetchTest, RefusesAnArchiveOverTheLimitBeforeTheDownload) {
  auto body = Body(2 << 20);
  HttpServer server([&](const HttpRequest&, HttpConn& conn) { conn.Respond(200, *body); });
  options_.max_bytes = 1 << 20;
  absl::StatusOr<Fetched> f = Fetch(server.Url("big.tar"));
  EXPECT_EQ(f.status().code(), absl::StatusCode::kFailedPrecondition) << f.status();
  EXPECT_TRUE(absl::StrContains(f.status().message(), server.Url("big.tar"))) << f.status();
  EXPECT_TRUE(
      absl::StrContains(f.status().message(), "the archive is 2097152 bytes, over the size limit of 1048576 bytes"))
      << f.status();
  EXPECT_EQ(std::filesystem::file_size(dest_), 0u) << "nothing of the body is written";
  EXPECT_EQ(server.request_count(), 1) << "not retried";
}

TEST_F(FetchTest, RefusesAnArchiveOverTheLimitWithoutALength) {
  auto body = Body(3 << 20);
  // Chunked, and the old way: no length, the body ends when the server
  // closes.
  HttpServer chunked([&](const HttpRequest&, HttpConn& conn) {
    conn.Write("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n");
    for (size_t off = 0; off < body->size(); off += 100'000) {
      absl::string_view part = absl::string_view(*body).substr(off, 100'000);
      if (!conn.Write(absl::StrCat(absl::Hex(part.size()), "\r\n", part, "\r\n"))) return;
    }
    conn.Write("0\r\n\r\n");
  });
  HttpServer unsized(
      [&](const HttpRequest&, HttpConn& conn) { conn.Write(absl::StrCat("HTTP/1.0 200 OK\r\n\r\n", *body)); });
  for (HttpServer* s : {&chunked, &unsized}) {
    options_.max_bytes = 0;
    absl::StatusOr<Fetched> f = Fetch(s->Url("big.tar"));
    ASSERT_TRUE(f.ok()) << f.status();
    EXPECT_EQ(f->sha256, Sha256Hex(*body)) << "without a limit, the server works";

    options_.max_bytes = 1 << 20;
    f = Fetch(s->Url("big.tar"));
    EXPECT_EQ(f.status().code(), absl::StatusCode::kFailedPrecondition) << f.status();
    EXPECT_TRUE(absl::StrContains(f.status().message(), s->Url("big.tar"))) << f.status();
    EXPECT_TRUE(absl::StrContains(f.status().message(), "the archive is at least ")) << f.status();
    EXPECT_TRUE(absl::StrContains(f.status().message(), "over the size limit of 1048576 bytes")) << f.status();
    EXPECT_LE(std::filesystem::file_size(dest_), 1u << 20) << "never more than the limit on disk";
    EXPECT_EQ(s->request_count(), 2) << "not retried";
  }
}

// Sends the headers (with the whole length) and the first `cut` bytes of
// `body` on the first request, then hangs up; answers the others with
// ServeBytes (Range honoured or not).
HttpServer::Handler CutOnce(std::shared_ptr<const std::string> body, size_t cut, bool ranges) {
  auto first = std::make_shared<std::atomic<bool>>(true);
  auto rest = ServeBytes("web.tar", body, ranges);
  return [=](const HttpRequest& req, HttpConn& conn) {
    if (first->exchange(false)) {
      conn.Write(absl::StrCat("HTTP/1.1 200 OK\r\nContent-Length: ", body->size(), "\r\n\r\n"));
      conn.Write(absl::string_view(*body).substr(0, cut));
      return;
    }
    rest(req, conn);
  };
}

TEST_F(FetchTest, ResumesAnInterruptedDownload) {
  auto body = Body(1 << 20);
  for (bool tls : {false, true}) {
    Pki cell = MakePki("cell");
    options_.extra_ca_pem = cell.ca.cert_pem;
    HttpServer server(CutOnce(body, 300'000, /*ranges=*/true),
                      tls ? std::optional<HttpServer::Tls>(cell.server) : std::nullopt);
    absl::StatusOr<Fetched> f = Fetch(server.Url("web.tar"));
    ASSERT_TRUE(f.ok()) << f.status();
    EXPECT_EQ(f->sha256, Sha256Hex(*body));
    EXPECT_EQ(f->size_bytes, 1 << 20);
    EXPECT_EQ(f->resumed_bytes, 300'000);
    EXPECT_EQ(f->requests, 2);
    std::vector<HttpRequest> reqs = server.requests();
    ASSERT_EQ(reqs.size(), 2u);
    EXPECT_EQ(reqs[0].Header("range"), "");
    EXPECT_EQ(reqs[1].Header("range"), "bytes=300000-");
  }
}

TEST_F(FetchTest, StartsOverWhenTheServerIgnoresRange) {
  auto body = Body(1 << 20);
  HttpServer server(CutOnce(body, 300'000, /*ranges=*/false));
  absl::StatusOr<Fetched> f = Fetch(server.Url("web.tar"));
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->sha256, Sha256Hex(*body));
  EXPECT_EQ(f->resumed_bytes, 0);
  EXPECT_EQ(ReadAll(dest_), *body);
  std::vector<HttpRequest> reqs = server.requests();
  ASSERT_EQ(reqs.size(), 3u) << "cut; asked to resume, got 200; everything again";
  EXPECT_EQ(reqs[1].Header("range"), "bytes=300000-");
  EXPECT_EQ(reqs[2].Header("range"), "");
}

TEST_F(FetchTest, ResumesWhatAnEarlierCallLeft) {
  auto body = Body(1 << 20);
  HttpServer server(CutOnce(body, 400'000, /*ranges=*/true));
  options_.attempts = 1;
  absl::StatusOr<Fetched> f = Fetch(server.Url("web.tar"));
  EXPECT_EQ(f.status().code(), absl::StatusCode::kUnavailable) << f.status();
  EXPECT_TRUE(absl::StrContains(f.status().message(), "(after 1 attempt)")) << f.status();
  EXPECT_EQ(std::filesystem::file_size(dest_), 400'000u) << "the partial file is kept";

  options_.resume_existing = true;
  f = Fetch(server.Url("web.tar"));
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->sha256, Sha256Hex(*body));
  EXPECT_EQ(f->resumed_bytes, 400'000);
  EXPECT_EQ(server.requests().at(1).Header("range"), "bytes=400000-");
}

TEST_F(FetchTest, TimesOutOnAServerThatNeverAnswers) {
  HttpServer silent([](const HttpRequest&, HttpConn& conn) { conn.Hang(); });
  options_.timeout_ms = 300;
  options_.attempts = 2;
  absl::StatusOr<Fetched> f = Fetch(silent.Url("web.tar"));
  EXPECT_EQ(f.status().code(), absl::StatusCode::kUnavailable) << f.status();
  EXPECT_TRUE(absl::StrContains(f.status().message(), "timed out")) << f.status();
  EXPECT_TRUE(absl::StrContains(f.status().message(), "(after 2 attempts)")) << f.status();
  EXPECT_EQ(silent.request_count(), 2) << "a timeout is retried";
}

TEST_F(FetchTest, GivesUpOnAStalledTransfer) {
  auto body = Body(1 << 20);
  HttpServer stalls([&](const HttpRequest&, HttpConn& conn) {
    conn.Write(absl::StrCat("HTTP/1.1 200 OK\r\nContent-Length: ", body->size(), "\r\n\r\n"));
    conn.Write(absl::string_view(*body).substr(0, 1000));
    conn.Hang();
  });
  options_.low_speed_bytes_per_s = 10'000;
  options_.low_speed_time_s = 1;
  options_.attempts = 1;
  absl::StatusOr<Fetched> f = Fetch(stalls.Url("web.tar"));
  EXPECT_EQ(f.status().code(), absl::StatusCode::kUnavailable) << f.status();
  EXPECT_TRUE(absl::StrContains(f.status().message(), "too slow")) << f.status();
}

TEST_F(FetchTest, RetriesServerErrorsNotClientErrors) {
  auto body = Body(10'000);
  auto serve = ServeBytes("web.tar", body);
  std::atomic<int> failures{2};
  HttpServer flaky([&](const HttpRequest& req, HttpConn& conn) {
    if (failures-- > 0) {
      conn.Respond(503, "busy\n");
    } else {
      serve(req, conn);
    }
  });
  absl::StatusOr<Fetched> f = Fetch(flaky.Url("web.tar"));
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->sha256, Sha256Hex(*body));
  EXPECT_EQ(f->requests, 3);
  EXPECT_EQ(ReadAll(dest_), *body) << "error pages are not part of the archive";

  HttpServer down([&](const HttpRequest&, HttpConn& conn) { conn.Respond(500, "down\n"); });
  f = Fetch(down.Url("web.tar"));
  EXPECT_EQ(f.status().code(), absl::StatusCode::kUnavailable) << f.status();
  EXPECT_TRUE(absl::StrContains(f.status().message(), "HTTP 500 (after 3 attempts)")) << f.status();
  EXPECT_EQ(down.request_count(), 3);

  for (auto [code, want] : {std::pair{404, absl::StatusCode::kNotFound}, std::pair{410, absl::StatusCode::kNotFound},
                            std::pair{403, absl::StatusCode::kInternal}}) {
    HttpServer refuses([&](const HttpRequest&, HttpConn& conn) { conn.Respond(code, "no\n"); });
    f = Fetch(refuses.Url("web.tar"));
    EXPECT_EQ(f.status().code(), want) << f.status();
    EXPECT_TRUE(absl::StrContains(f.status().message(), absl::StrCat("HTTP ", code))) << f.status();
    EXPECT_EQ(refuses.request_count(), 1) << code << " is not retried";
  }

  // Nobody listening: retried, then UNAVAILABLE.
  int port = 0;
  {
    HttpServer gone([](const HttpRequest&, HttpConn&) {});
    port = gone.port();
  }
  f = Fetch(absl::StrCat("http://127.0.0.1:", port, "/web.tar"));
  EXPECT_EQ(f.status().code(), absl::StatusCode::kUnavailable) << f.status();
}

TEST_F(FetchTest, StopCancels) {
  HttpServer silent([](const HttpRequest&, HttpConn& conn) { conn.Hang(); });
  std::atomic<bool> stop{false};
  std::thread stopper([&] {
    Eventually([&] { return silent.request_count() > 0; });
    stop = true;
  });
  absl::StatusOr<Fetched> f = FetchToFile(silent.Url("web.tar"), dest_, options_, &stop);
  stopper.join();
  EXPECT_EQ(f.status().code(), absl::StatusCode::kCancelled) << f.status();
}

TEST_F(FetchTest, LocalFilesHaveTheLimitToo) {
  std::ofstream(dir_ + "/local.tar") << std::string(5000, 'x');
  options_.max_bytes = 4096;
  absl::StatusOr<Fetched> f = Fetch(dir_ + "/local.tar");
  EXPECT_EQ(f.status().code(), absl::StatusCode::kFailedPrecondition) << f.status();
  EXPECT_TRUE(
      absl::StrContains(f.status().message(),
                        "read " + dir_ + "/local.tar: the archive is 5000 bytes, over the size limit of 4096 bytes"))
      << f.status();
  options_.max_bytes = 5000;
  f = Fetch("file://" + dir_ + "/local.tar");
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->size_bytes, 5000);
}

}  // namespace
}  // namespace herd::agent
