// Tasks' names on a real cell (docs/naming.md): the master's DNS responder
// asked with dig over UDP and TCP, `herd resolve` and `herd resolve --watch`,
// and the answers following a task that dies with its machine.
#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "gtest/gtest.h"
#include "harness/harness.h"

namespace herd::harness {
namespace {

using namespace std::chrono_literals;

// m1 on 127.0.0.1 and m2 on 127.0.0.2, so a task's address says where it is.
Cell::Options WithDns() {
  Cell::Options o;
  o.master_flags = {"--dns", "127.0.0.1:0"};
  return o;
}

class NamingTest : public ::testing::Test {
 protected:
  NamingTest() : cell_(WithDns()) {}

  void SetUp() override {
    ASSERT_EQ(harness::Run({"/usr/bin/dig", "-v"}).exit_code, 0) << "no dig: scripts/setup.sh installs bind9-dnsutils";
    ASSERT_TRUE(cell_.StartMaster().ok()) << cell_.LogTails();
    cell_.Place("m2", Cell::Site{{}, "127.0.0.2"});
    ASSERT_TRUE(cell_.StartAgent("m1", "r1").ok()) << cell_.LogTails();
    ASSERT_TRUE(cell_.StartAgent("m2", "r2").ok()) << cell_.LogTails();
    absl::StatusOr<v1::CellInfo> info = cell_.HerdJson<v1::CellInfo>({"cell"});
    ASSERT_TRUE(info.ok()) << info.status();
    dns_ = info->dns();
    ASSERT_FALSE(dns_.empty()) << "herd cell --json has no dns";
    RunResult r = cell_.Herd({"submit", cell_.WriteSpec("hello.yaml", R"(name: hello
user: alice
priority: production
tasks: 2
different_machines: true
command: ["sleep", "3600"]
resources: {cpu: 100m, memory: 16Mi, ports: [http]}
health_check:
  command: [/bin/true]
  interval: 200ms
)")});
    ASSERT_EQ(r.exit_code, 0) << r.Describe();
    cell_.WaitRunning("hello", 2);
  }

  // dig's whole output; `args` after the server and port.
  std::string DigFull(const std::vector<std::string>& args) const {
    std::vector<std::string> argv = {"/usr/bin/dig", "@" + dns_.substr(0, dns_.rfind(':')), "-p",
                                     dns_.substr(dns_.rfind(':') + 1), "+time=2", "+tries=2"};
    argv.insert(argv.end(), args.begin(), args.end());
    RunResult r = harness::Run(argv, 30s);
    EXPECT_EQ(r.exit_code, 0) << r.Describe();
    return r.out;
  }
  // Its answer lines (with +short: the records' data), sorted.
  std::vector<std::string> Dig(const std::vector<std::string>& args) const {
    std::vector<std::string> lines = absl::StrSplit(DigFull(args), '\n', absl::SkipWhitespace());
    std::sort(lines.begin(), lines.end());
    return lines;
  }

  absl::StatusOr<v1::ResolveResponse> Resolve(const std::string& name) const {
    return cell_.HerdJson<v1::ResolveResponse>({"resolve", name});
  }

  Cell cell_;
  std::string dns_;
};

TEST_F(NamingTest, DigFindsTasksJobsAndNamedPortsAndTheAnswersFollowATaskThatDies) {
  // Both tasks healthy (their check passes): the job's name has both.
  ASSERT_TRUE(Eventually(
      [&] { return Dig({"+short", "hello.alice.local.herd"}) == std::vector<std::string>{"127.0.0.1", "127.0.0.2"}; },
      30s))
      << absl::StrJoin(Dig({"+short", "hello.alice.local.herd"}), ",") << "\n" << cell_.LogTails();

  absl::StatusOr<v1::ResolveResponse> names = Resolve("/local/alice/hello");
  ASSERT_TRUE(names.ok()) << names.status();
  ASSERT_EQ(names->records_size(), 2);
  std::map<std::string, int> on;  // address -> task index
  std::vector<std::string> srv;
  for (const v1::NameRecord& r : names->records()) {
    EXPECT_EQ(r.dns(), absl::StrCat(r.index(), ".hello.alice.local.herd"));
    EXPECT_EQ(r.health(), "healthy");
    EXPECT_TRUE(r.ready());
    ASSERT_TRUE(r.ports().contains("http")) << r.ShortDebugString();
    on[r.address()] = r.index();
    srv.push_back(absl::StrCat("0 1 ", r.ports().at("http"), " ", r.index(), ".hello.alice.local.herd."));
    // The task's own name, over UDP and TCP.
    EXPECT_EQ(Dig({"+short", r.dns()}), std::vector<std::string>{r.address()});
    EXPECT_EQ(Dig({"+short", "+tcp", r.dns()}), std::vector<std::string>{r.address()});
  }
  ASSERT_EQ(on.size(), 2u);
  std::sort(srv.begin(), srv.end());
  EXPECT_EQ(Dig({"+short", "SRV", "_http._tcp.hello.alice.local.herd"}), srv);
  // The SRV answer carries the targets' addresses.
  std::string full = DigFull({"SRV", "_http._tcp.hello.alice.local.herd"});
  EXPECT_TRUE(absl::StrContains(full, "ADDITIONAL SECTION")) << full;
  EXPECT_TRUE(absl::StrContains(full, "flags: qr aa")) << full;

  std::string nx = DigFull({"nope.alice.local.herd"});
  EXPECT_TRUE(absl::StrContains(nx, "status: NXDOMAIN")) << nx;
  std::string nx_tcp = DigFull({"+tcp", "7.hello.alice.local.herd"});
  EXPECT_TRUE(absl::StrContains(nx_tcp, "status: NXDOMAIN")) << nx_tcp;
  std::string refused = DigFull({"example.com"});
  EXPECT_TRUE(absl::StrContains(refused, "status: REFUSED")) << refused;

  // Watch the job's names, then take m2 away with its task.
  const int moved = on.at("127.0.0.2");
  const std::string watch_log = cell_.dir().Sub("watch.out");
  auto watch = Child::Spawn("watch",
                            {HerdBinary(), "--master", cell_.master_address(), "--credentials",
                             cell_.UserCredential("alice"), "resolve", "hello.alice.local.herd", "--watch", "--json"},
                            watch_log);
  ASSERT_TRUE(watch.ok()) << watch.status();
  ASSERT_TRUE(Eventually([&] { return absl::StrContains(ReadFileOrEmpty(watch_log), "\"initial\":true"); }, 30s))
      << ReadFileOrEmpty(watch_log);

  cell_.StopAgent("m2");
  const std::string task = absl::StrCat(moved, ".hello.alice.local.herd");
  // m2 goes down after missed polls; its task is no longer RUNNING there,
  // and with different_machines it has nowhere else to go.
  ASSERT_TRUE(Eventually([&] { return Dig({"+short", "hello.alice.local.herd"}) ==
                                      std::vector<std::string>{"127.0.0.1"}; },
                         60s))
      << absl::StrJoin(Dig({"+short", "hello.alice.local.herd"}), ",") << "\n" << cell_.LogTails();
  EXPECT_TRUE(Dig({"+short", task}).empty());
  EXPECT_EQ(Dig({"+short", "SRV", "_http._tcp.hello.alice.local.herd"}).size(), 1u);

  // The watcher was told: a later message names the task, off 127.0.0.2.
  const std::string name = absl::StrCat("/local/alice/hello/", moved);
  ASSERT_TRUE(Eventually(
      [&] {
        for (absl::string_view line : absl::StrSplit(ReadFileOrEmpty(watch_log), '\n', absl::SkipWhitespace())) {
          absl::StatusOr<v1::WatchNamesResponse> m = ParseJsonAs<v1::WatchNamesResponse>(std::string(line));
          if (!m.ok() || m->initial()) continue;
          for (const v1::NameRecord& r : m->changed()) {
            if (r.name() == name && r.address() != "127.0.0.2") return true;
          }
        }
        return false;
      },
      30s))
      << ReadFileOrEmpty(watch_log);
  (*watch)->Kill();
}

TEST_F(NamingTest, ResolveNamesEveryFormAndRefusesUnknownOnes) {
  for (const char* name : {"/local/alice/hello/1", "alice/hello/1", "1.hello.alice.local.herd"}) {
    absl::StatusOr<v1::ResolveResponse> r = Resolve(name);
    ASSERT_TRUE(r.ok()) << name << ": " << r.status();
    ASSERT_EQ(r->records_size(), 1) << name;
    EXPECT_EQ(r->records(0).name(), "/local/alice/hello/1");
  }
  // Any user reads names, as they read job status.
  RunResult bob = cell_.HerdAs("bob", {"resolve", "alice/hello"});
  EXPECT_EQ(bob.exit_code, 0) << bob.Describe();
  EXPECT_TRUE(absl::StrContains(bob.out, "/local/alice/hello/0")) << bob.out;
  RunResult unknown = cell_.Herd({"resolve", "/local/alice/nope"});
  EXPECT_NE(unknown.exit_code, 0);
  EXPECT_TRUE(absl::StrContains(unknown.err, "no job alice/nope")) << unknown.Describe();
}

}  // namespace
}  // namespace herd::harness
