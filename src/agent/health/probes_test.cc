// The probes against real sockets and processes.
#include "agent/health/probes.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "agent/supervisor/testing.h"

namespace herd::agent {
namespace {

using ::herd::agent::testing::Eventually;
using ::herd::agent::testing::NowMs;
using ::herd::agent::testing::Slurp;

// Runs a probe on its own thread and returns its result, or nullopt if it
// has not returned within `bound`: a bound on a failure only, far above what
// the probe may take, so a busy machine cannot break the test (the probe's
// own timeouts are checked from below, and by its message).
template <typename Probe>
std::optional<ProbeResult> Returns(Probe probe, std::chrono::seconds bound = std::chrono::seconds(60)) {
  struct Shared {
    std::atomic<bool> done{false};
    ProbeResult result;
  };
  auto shared = std::make_shared<Shared>();
  std::thread([shared, probe] {
    shared->result = probe();
    shared->done = true;
  }).detach();
  if (!Eventually([&] { return shared->done.load(); }, bound)) return std::nullopt;
  return shared->result;
}

// A listener on 127.0.0.1:<ephemeral>.
struct Listener {
  Listener() {
    fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in addr = {};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(bind(fd, reinterpret_cast<struct sockaddr*>(&addr), sizeof(addr)), 0);
    EXPECT_EQ(listen(fd, 16), 0);
    socklen_t len = sizeof(addr);
    getsockname(fd, reinterpret_cast<struct sockaddr*>(&addr), &len);
    port = ntohs(addr.sin_port);
  }
  ~Listener() {
    if (server.joinable()) {
      shutdown(fd, SHUT_RDWR);
      server.join();
    }
    close(fd);
  }
  // Answers `n` connections with `response` after reading the request.
  void Answer(std::string response, int n = 1) {
    server = std::thread([this, response, n] {
      for (int i = 0; i < n; ++i) {
        int c = accept(fd, nullptr, nullptr);
        if (c < 0) return;
        std::string req;
        char buf[1024];
        while (req.find("\r\n\r\n") == std::string::npos) {
          ssize_t got = read(c, buf, sizeof(buf));
          if (got <= 0) break;
          req.append(buf, static_cast<size_t>(got));
        }
        last_request = req;
        (void)!write(c, response.data(), response.size());
        close(c);
      }
    });
  }
  int fd = -1;
  int32_t port = 0;
  std::thread server;
  std::string last_request;
};

int32_t UnusedPort() {
  Listener l;
  return l.port;  // closed again: nobody listens there now
}

TEST(ProbeTcpTest, RefusedAndAccepted) {
  int32_t port = UnusedPort();
  ProbeResult r = ProbeTcp(port, 1000);
  EXPECT_FALSE(r.healthy);
  EXPECT_EQ(r.message, absl::StrCat("connect to 127.0.0.1:", port, ": Connection refused"));
  Listener l;
  r = ProbeTcp(l.port, 1000);
  EXPECT_TRUE(r.healthy) << r.message;
}

TEST(ProbeHttpTest, StatusBelow400IsHealthy) {
  struct Case {
    std::string response;
    bool healthy;
    std::string message;
  };
  std::vector<Case> cases = {
      {"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok", true, "HTTP 200 from GET /healthz on port "},
      {"HTTP/1.1 302 Found\r\nLocation: /x\r\n\r\n", true, "HTTP 302 from GET /healthz on port "},
      {"HTTP/1.1 404 Not Found\r\n\r\n", false, "HTTP 404 from GET /healthz on port "},
      {"HTTP/1.0 500 Oops\r\n\r\n", false, "HTTP 500 from GET /healthz on port "},
      {"SSH-2.0-OpenSSH\r\n", false, "GET /healthz on port "},
      {"", false, "GET /healthz on port "},
  };
  for (const Case& c : cases) {
    Listener l;
    l.Answer(c.response);
    ProbeResult r = ProbeHttp(l.port, "/healthz", 2000);
    EXPECT_EQ(r.healthy, c.healthy) << c.response << " -> " << r.message;
    EXPECT_TRUE(absl::StartsWith(r.message, absl::StrCat(c.message))) << r.message;
    l.server.join();
    EXPECT_TRUE(absl::StartsWith(l.last_request, "GET /healthz HTTP/1.1\r\n")) << l.last_request;
    EXPECT_TRUE(absl::StrContains(l.last_request, "User-Agent: herd-health\r\n")) << l.last_request;
  }
  Listener l;
  l.Answer("HTTP/1.0 200 OK\r\n\r\n");
  ProbeResult r = ProbeHttp(l.port, "", 2000);
  l.server.join();
  EXPECT_TRUE(absl::StartsWith(l.last_request, "GET / HTTP/1.1\r\n")) << "empty path means /";
  r = ProbeHttp(UnusedPort(), "/", 1000);
  EXPECT_FALSE(r.healthy);
  EXPECT_TRUE(absl::EndsWith(r.message, "Connection refused")) << r.message;
}

TEST(ProbeHttpTest, TimeoutIsHonoured) {
  Listener l;  // accepts (backlog) but never answers
  int64_t t0 = NowMs();
  std::optional<ProbeResult> r = Returns([&] { return ProbeHttp(l.port, "/", 300); });
  ASSERT_TRUE(r) << "a probe with a 300 ms timeout did not return";
  EXPECT_GE(NowMs() - t0, 290);  // not before its timeout
  EXPECT_FALSE(r->healthy);
  EXPECT_TRUE(absl::EndsWith(r->message, "timed out after 300ms")) << r->message;
}

TEST(ProbeHttpTest, CancelEndsAProbeAtOnce) {
  Listener l;
  int cancel = eventfd(0, EFD_CLOEXEC);
  // A probe that would wait ten minutes for an answer ends when cancelled
  // (before or while it waits).
  std::thread t([&] {
    uint64_t one = 1;
    (void)!write(cancel, &one, sizeof(one));
  });
  std::optional<ProbeResult> r = Returns([&] { return ProbeHttp(l.port, "/", 600'000, cancel); });
  t.join();
  ASSERT_TRUE(r) << "a cancelled probe did not return";
  EXPECT_FALSE(r->healthy);
  EXPECT_TRUE(absl::EndsWith(r->message, "cancelled")) << r->message;
  close(cancel);
}

// A "task" to run commands beside: a plain child of the test.
class ProbeCommandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/herd-probe-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    SpawnOptions o;
    o.path = "/bin/sleep";
    o.argv = {"sleep", "1000"};
    o.env = {{"PATH", "/usr/bin:/bin"}, {"TASK_SECRET", "s3cret"}};
    o.cwd = dir_;
    absl::StatusOr<pid_t> pid = Spawn(o);
    ASSERT_TRUE(pid.ok()) << pid.status();
    absl::StatusOr<ProcessId> id = IdentifyProcess(*pid);
    ASSERT_TRUE(id.ok());
    task_ = *id;
    // posix_spawn returns once exec has begun, a moment before the kernel
    // has set up the new program's environment (/proc/PID/environ is empty
    // until then).
    ASSERT_TRUE(Eventually([&] { return !Slurp(absl::StrCat("/proc/", *pid, "/environ")).empty(); }));
  }
  void TearDown() override {
    kill(task_.pid, SIGKILL);
    waitpid(task_.pid, nullptr, 0);
    std::filesystem::remove_all(dir_);
  }
  InRunOptions In(std::vector<std::string> argv) {
    InRunOptions o;
    o.task = task_;
    o.argv = std::move(argv);
    return o;
  }
  std::string dir_;
  ProcessId task_;
};

TEST_F(ProbeCommandTest, ExitCodeDecidesAndSeesTheTasksEnvironmentAndDirectory) {
  ProbeResult r = ProbeCommand(
      In({"sh", "-c", "echo $TASK_SECRET $(pwd); test \"$TASK_SECRET\" = s3cret && test \"$(pwd)\" = " + dir_}), 5000);
  EXPECT_TRUE(r.healthy) << r.message;
  EXPECT_EQ(r.message, "command sh exited with code 0: s3cret " + dir_);
  r = ProbeCommand(In({"sh", "-c", "echo not ready; exit 3"}), 5000);
  EXPECT_FALSE(r.healthy);
  EXPECT_EQ(r.message, "command sh exited with code 3: not ready");
  r = ProbeCommand(In({"/no/such/binary"}), 5000);
  EXPECT_FALSE(r.healthy);
  EXPECT_TRUE(absl::StartsWith(r.message, "command /no/such/binary exited with code 127")) << r.message;
}

TEST_F(ProbeCommandTest, TimeoutKillsTheCommandAndWhatItStarted) {
  std::string pidfile = dir_ + "/child.pid";
  int64_t t0 = NowMs();
  std::optional<ProbeResult> r =
      Returns([&] { return ProbeCommand(In({"sh", "-c", "sleep 600 & echo $! > " + pidfile + "; wait"}), 300); });
  ASSERT_TRUE(r) << "a command probe with a 300 ms timeout did not return";
  EXPECT_GE(NowMs() - t0, 290);  // not before its timeout
  EXPECT_FALSE(r->healthy);
  EXPECT_EQ(r->message, "command sh timed out after 300ms");
  pid_t child = 0;
  ASSERT_TRUE(absl::SimpleAtoi(absl::StripAsciiWhitespace(Slurp(pidfile)), &child));
  EXPECT_TRUE(Eventually([&] { return !testing::Alive(child); })) << "the command's child outlived the timeout";
}

TEST_F(ProbeCommandTest, GoneTaskFails) {
  kill(task_.pid, SIGKILL);
  waitpid(task_.pid, nullptr, 0);
  ProbeResult r = ProbeCommand(In({"true"}), 1000);
  EXPECT_FALSE(r.healthy);
  EXPECT_TRUE(absl::StrContains(r.message, "is not running")) << r.message;
}

}  // namespace
}  // namespace herd::agent
