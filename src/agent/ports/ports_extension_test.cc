// The ports extension driving a real Supervisor and real tasks.
#include "agent/ports/ports_extension.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <random>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "agent/supervisor/testing.h"

namespace herd::agent {
namespace {

using namespace ::herd::agent::testing;  // NOLINT

// A range of `n` ports that are free now, above the kernel's ephemeral
// range (so that outgoing connections of other tests do not land in it).
int32_t FreeRange(int32_t n) {
  std::mt19937 rng(static_cast<uint32_t>(getpid() ^ NowMs()));
  for (int attempt = 0; attempt < 100; ++attempt) {
    int32_t base = 61000 + static_cast<int32_t>(rng() % (65000 - 61000 - n));
    bool ok = true;
    for (int32_t p = base; p < base + n && ok; ++p) ok = TcpPortIsFree(p);
    if (ok) return base;
  }
  ADD_FAILURE() << "no free port range";
  return 61000;
}

std::string WaitForStdout(const std::string& path, size_t lines) {
  std::string out;
  ::herd::testing::Eventually([&] {
    out = Slurp(path);
    return static_cast<size_t>(std::count(out.begin(), out.end(), '\n')) >= lines;
  });
  return out;
}

class PortsTest : public SupervisorFixture {
 protected:
  std::unique_ptr<Supervisor> NewWithPorts(int32_t min, int32_t max, Supervisor::Options opts = {}) {
    allocator_ = std::make_shared<PortAllocator>(min, max);
    ports_ = std::make_shared<PortsExtension>(allocator_);
    opts.extensions.push_back(ports_);
    return New(opts);
  }
  static v1::TaskRun WithPorts(v1::TaskRun run, std::vector<std::string> names) {
    for (std::string& n : names) run.add_port_names(std::move(n));
    return run;
  }

  std::shared_ptr<PortAllocator> allocator_;
  std::shared_ptr<PortsExtension> ports_;
};

TEST(PortsFormatTest, EnvNamesAndFileRoundTrip) {
  EXPECT_EQ(PortEnvName("http"), "HERD_PORT_HTTP");
  EXPECT_EQ(PortEnvName("grpc-web.v2"), "HERD_PORT_GRPC_WEB_V2");
  PortMap p = {{"http", 20001}, {"admin-ui", 20002}};
  EXPECT_EQ(*DecodePorts(EncodePorts(p)), p);
  EXPECT_FALSE(DecodePorts("http x\n").ok());
  EXPECT_FALSE(DecodePorts("http 70000\n").ok());
}

TEST_F(PortsTest, EnvAndSubstitutionReachTheTask) {
  int32_t base = FreeRange(10);
  sup_ = NewWithPorts(base, base + 9);
  v1::TaskRun run = WithPorts(MakeRun("ports.env", {"/bin/sh", "-c",
                                                    "echo env=$HERD_PORT_HTTP arg=$0 admin=$HERD_PORT_ADMIN_UI "
                                                    "sub=$SUB; exec sleep 1000",
                                                    "${port.http}"}),
                              {"http", "admin-ui"});
  (*run.mutable_env())["SUB"] = "${port.admin-ui}/x";
  sup_->SetDesired({run});
  std::optional<v1::RunStatus> s = WaitFor(*sup_, run.run_id(), IsActive);
  ASSERT_TRUE(s);
  ASSERT_EQ(s->ports().size(), 2u);
  int32_t http = s->ports().at("http"), admin = s->ports().at("admin-ui");
  EXPECT_NE(http, admin);
  EXPECT_GE(std::min(http, admin), base);
  EXPECT_LE(std::max(http, admin), base + 9);
  EXPECT_EQ(WaitForStdout(RunDirOf(run.run_id()) + "/stdout", 1),
            absl::StrCat("env=", http, " arg=", http, " admin=", admin, " sub=", admin, "/x\n"));
  EXPECT_EQ(Slurp(RunDirOf(run.run_id()) + "/ports"), absl::StrCat("admin-ui ", admin, "\nhttp ", http, "\n"));
  sup_->SetDesired({});
  WaitFor(*sup_, run.run_id(), IsGone);
  EXPECT_EQ(allocator_->allocated(), 0u) << "released with the run";
}

TEST_F(PortsTest, UniqueAcrossManyRuns) {
  constexpr int kRuns = 40;
  int32_t base = FreeRange(2 * kRuns);
  sup_ = NewWithPorts(base, base + 2 * kRuns - 1);
  std::vector<v1::TaskRun> runs;
  for (int i = 0; i < kRuns; ++i) runs.push_back(WithPorts(Sh(absl::StrCat("ports.many.", i), "exec sleep 1000"), {"a", "b"}));
  sup_->SetDesired(runs);
  std::set<int32_t> seen;
  for (const v1::TaskRun& run : runs) {
    std::optional<v1::RunStatus> s = WaitFor(*sup_, run.run_id(), IsActive);
    ASSERT_TRUE(s);
    ASSERT_EQ(s->ports().size(), 2u);
    for (const auto& [name, port] : s->ports()) {
      EXPECT_TRUE(seen.insert(port).second) << "port " << port << " given twice";
      EXPECT_GE(port, base);
      EXPECT_LT(port, base + 2 * kRuns);
    }
  }
  EXPECT_EQ(seen.size(), 2u * kRuns);
}

TEST_F(PortsTest, RestartsKeepTheirPorts) {
  int32_t base = FreeRange(10);
  sup_ = NewWithPorts(base, base + 9);
  v1::TaskRun run = WithPorts(Sh("ports.restart", "echo $HERD_PORT_HTTP; exit 1", v1::RestartPolicy::ON_FAILURE),
                              {"http"});
  run.mutable_restart()->set_max_restarts(3);
  sup_->SetDesired({run});
  std::optional<v1::RunStatus> s = WaitFor(*sup_, run.run_id(), IsTerminal);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->restarts(), 3);
  std::string port = absl::StrCat(s->ports().at("http"));
  EXPECT_EQ(Slurp(RunDirOf(run.run_id()) + "/stdout"), absl::StrCat(port, "\n", port, "\n", port, "\n", port, "\n"));
}

TEST_F(PortsTest, ExhaustionWaitsUntilAPortIsFreed) {
  int32_t base = FreeRange(2);
  // On a clock that does not move, the once-a-second re-check of waiting
  // runs never comes: only the freed ports can wake b.
  Supervisor::Options opts;
  opts.clock = &manual_clock_;
  sup_ = NewWithPorts(base, base + 1, opts);
  v1::TaskRun a = WithPorts(Sh("ports.a", "exec sleep 1000"), {"x", "y"});
  v1::TaskRun b = WithPorts(Sh("ports.b", "exec sleep 1000"), {"x"});
  sup_->SetDesired({a});
  ASSERT_TRUE(WaitFor(*sup_, a.run_id(), IsActive));
  sup_->SetDesired({a, b});
  std::optional<v1::RunStatus> s = WaitFor(*sup_, b.run_id(), [](const std::optional<v1::RunStatus>& s) {
    return s && absl::StartsWith(s->message(), "waiting: ");
  });
  ASSERT_TRUE(s);
  EXPECT_EQ(s->phase(), v1::Task::STARTING);
  EXPECT_EQ(s->message(), absl::StrCat("waiting: no free port for x in [", base, ", ", base + 1,
                                       "]: 2 held by tasks, 0 in use by other programs"));
  EXPECT_TRUE(s->ports().empty());
  sup_->SetDesired({b});  // a stops and frees its ports; b starts
  s = WaitFor(*sup_, b.run_id(), IsActive);
  ASSERT_TRUE(s) << "freed ports should wake the waiting run (no once-a-second re-check)";
  EXPECT_EQ(s->restarts(), 0);
  EXPECT_EQ(s->ports().size(), 1u);
}

TEST_F(PortsTest, PortsInUseOnTheHostAreSkipped) {
  int32_t base = FreeRange(2);
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(fd, 0);
  struct sockaddr_in addr = {};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(base));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(fd, reinterpret_cast<struct sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(listen(fd, 1), 0);
  sup_ = NewWithPorts(base, base + 1);
  v1::TaskRun run = WithPorts(Sh("ports.busy", "exec sleep 1000"), {"http"});
  sup_->SetDesired({run});
  std::optional<v1::RunStatus> s = WaitFor(*sup_, run.run_id(), IsActive);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->ports().at("http"), base + 1);
  close(fd);
}

TEST_F(PortsTest, AllocationSurvivesAnAgentRestart) {
  int32_t base = FreeRange(4);
  sup_ = NewWithPorts(base, base + 3);
  v1::TaskRun first = WithPorts(Sh("ports.first", "echo $HERD_PORT_A $HERD_PORT_B; exec sleep 1000"), {"a", "b"});
  sup_->SetDesired({first});
  std::optional<v1::RunStatus> s = WaitFor(*sup_, first.run_id(), IsActive);
  ASSERT_TRUE(s);
  PortMap before(s->ports().begin(), s->ports().end());
  int64_t pid = s->pid();

  // The agent restarts: a new allocator that knows nothing but the run
  // directories.
  sup_.reset();
  sup_ = NewWithPorts(base, base + 3);
  s = WaitFor(*sup_, first.run_id(), IsActive);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->pid(), pid) << "adopted, not restarted";
  EXPECT_EQ(PortMap(s->ports().begin(), s->ports().end()), before);
  for (const auto& [name, port] : before) EXPECT_EQ(allocator_->OwnerOf(port), first.run_id());

  // New runs get the other ports, never the adopted run's.
  v1::TaskRun second = WithPorts(Sh("ports.second", "exec sleep 1000"), {"a", "b"});
  v1::TaskRun third = WithPorts(Sh("ports.third", "exec sleep 1000"), {"a"});
  sup_->SetDesired({first, second});
  s = WaitFor(*sup_, second.run_id(), IsActive);
  ASSERT_TRUE(s);
  for (const auto& [name, port] : s->ports()) {
    EXPECT_NE(port, before["a"]);
    EXPECT_NE(port, before["b"]);
  }
  sup_->SetDesired({first, second, third});
  s = WaitFor(*sup_, third.run_id(), [](const std::optional<v1::RunStatus>& s) {
    return s && absl::StartsWith(s->message(), "waiting: no free port");
  });
  ASSERT_TRUE(s);
}

}  // namespace
}  // namespace herd::agent
