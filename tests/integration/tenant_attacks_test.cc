// Issue #33's attacks by a hostile tenant of a shared cell that had only
// unit tests, on a real cell (a master and agents as processes; alice, bob
// and carol plain users, root the admin): each test makes the attack as it
// was found and asserts what it broke -- package digests squatted (M1),
// frameworks hoarded (M2) or given roles and priorities not theirs (M3),
// idle connections starving the HTTPS (M4) and DNS (L2) ports, disk filled
// (M5), counts in one request and tasks at priority 0 (M6), refusals missing
// from the audit log and a flood rotating it (L3), and streams and grants
// that outlived a revocation (L4, item 7). Request ids (L1) and the stream
// flood (H3) are in tenant_limits_test.cc, the attacks on the root agent in
// hostile_test.cc. Needs root (tasks under their own uids, a tmpfs for the
// master's disk); labelled "root".
#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/statvfs.h>
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "harness/clients.h"
#include "harness/harness.h"
#include "pki/pki.h"
#include "rpc/rpc.h"
#include "testing/http_server.h"

namespace herd {
namespace {

namespace fs = std::filesystem;
using harness::Cell;
using harness::Child;
using harness::Eventually;
using harness::RunResult;
using namespace std::chrono_literals;

std::string Spec(const std::string& name, const std::string& user, const std::string& extra = "") {
  return absl::StrCat("name: ", name, "\nuser: ", user, "\n", extra,
                      "command: [\"sleep\", \"3600\"]\nresources: {cpu: 10m, memory: 16Mi}\n");
}

// TCP connections held open without a byte sent, each from a source address
// of this host (127.x.y.z): an attacker's, needing no credential.
class IdleConnections {
 public:
  IdleConnections(std::string host, int port) : host_(std::move(host)), port_(port) {}
  ~IdleConnections() {
    for (Conn& c : conns_) close(c.fd);
  }
  // Opens one from `source`; false if it could not connect.
  bool Open(const std::string& source) {
    const int fd = Connect(source);
    if (fd < 0) return false;
    conns_.push_back({source, fd});
    return true;
  }
  // Opens again (once each) those the server has closed, as the attacker
  // would; returns how many were still open.
  int Refill() {
    int open = 0;
    for (Conn& c : conns_) {
      char b;
      const ssize_t n = recv(c.fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        ++open;
        continue;
      }
      close(c.fd);
      c.fd = Connect(c.source);
    }
    return open;
  }
  size_t size() const { return conns_.size(); }

 private:
  struct Conn {
    std::string source;
    int fd;
  };
  int Connect(const std::string& source) const {
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    timeval tv{2, 0};  // bounds connect() on a full backlog
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    sockaddr_in local{};
    local.sin_family = AF_INET;
    inet_pton(AF_INET, source.c_str(), &local.sin_addr);
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(static_cast<uint16_t>(port_));
    inet_pton(AF_INET, host_.c_str(), &to.sin_addr);
    if (bind(fd, reinterpret_cast<sockaddr*>(&local), sizeof local) != 0 ||
        connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) != 0) {
      close(fd);
      return -1;
    }
    return fd;
  }
  const std::string host_;
  const int port_;
  std::vector<Conn> conns_;
};

// "HOST:PORT" split.
std::pair<std::string, int> HostPort(const std::string& address) {
  return {address.substr(0, address.rfind(':')), std::stoi(address.substr(address.rfind(':') + 1))};
}

// The audit log's records, parsed (the lines of every rotated file too).
std::vector<nlohmann::json> AuditRecords(const Cell& cell) {
  std::vector<nlohmann::json> out;
  const std::string text = harness::ReadFileOrEmpty(cell.dir().Sub("master/audit.log"));
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    nlohmann::json j = nlohmann::json::parse(std::string(line), nullptr, /*allow_exceptions=*/false);
    if (!j.is_discarded()) out.push_back(std::move(j));
  }
  return out;
}

class TenantAttacksTest : public ::testing::Test {
 protected:
  explicit TenantAttacksTest(std::vector<std::string> master_flags = {})
      : cell_(harness::TenantCellOptions(std::move(master_flags))) {}
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root: tasks get uids of their own only from a root agent";
    ASSERT_TRUE(cell_.StartMaster().ok()) << cell_.LogTails();
  }
  std::string TaskText(const std::string& job) const {
    auto t = cell_.Tasks(job);
    return t.ok() ? t->DebugString() : t.status().ToString();
  }
  std::unique_ptr<v1::Herd::Stub> Stub(const std::string& user) const {
    return harness::MasterStub(cell_, cell_.UserCredential(user));
  }
  v1::CellInfo Info() const {
    absl::StatusOr<v1::CellInfo> info = cell_.HerdJson<v1::CellInfo>({"cell"});
    EXPECT_TRUE(info.ok()) << info.status();
    return info.ok() ? *info : v1::CellInfo();
  }
  static v1::FrameworkInfo Fw(const std::string& name, const std::string& role = "", int32_t priority = 0) {
    v1::FrameworkInfo f;
    f.set_name(name);
    f.set_role(role);
    f.set_priority(priority);
    f.set_failover_timeout_ms(600'000);
    return f;
  }
  harness::FrameworkStream Subscribe(const std::string& user, const v1::FrameworkInfo& info) {
    auto stub = harness::FrameworksStub(cell_, cell_.UserCredential(user));
    return harness::FrameworkStream::Subscribe(stub.get(), info);
  }
  // A dry-run submit of `spec` as `user`, straight to the master.
  grpc::Status DrySubmit(const std::string& user, const v1::JobSpec& spec) const {
    auto stub = Stub(user);
    v1::SubmitRequest req;
    req.set_dry_run(true);
    *req.add_jobs() = spec;
    v1::SubmitResponse resp;
    auto ctx = rpc::Context("", 30'000);
    return stub->Submit(ctx.get(), req, &resp);
  }

  Cell cell_;
};

// ---- M1: digest squatting ----

// Bob named the sha256 of alice's package with a URL serving other bytes.
// Fetches were keyed by digest alone, so alice's runs waited on bob's fetch
// and took its failure: her restart:always tasks went DEAD ("does not have
// sha256 ...; not restarted"). Here bob's fetch is in flight (his server
// holds the rest of his bytes) when alice's task needs the package.
TEST_F(TenantAttacksTest, ADigestSquattedFromAnotherUrlLeavesOthersTasksRunning) {
  ASSERT_TRUE(cell_.StartAgents(1).ok()) << cell_.LogTails();
  const harness::Archive alice_pkg = harness::MakeArchive(cell_.dir(), "alice-pkg", "alice's package\n");
  const harness::Archive bob_pkg = harness::MakeArchive(cell_.dir(), "bob-pkg", "bob's bytes\n");
  const std::string alice_bytes = harness::ReadFileOrEmpty(alice_pkg.path);
  const std::string bob_bytes = harness::ReadFileOrEmpty(bob_pkg.path);
  ASSERT_FALSE(alice_bytes.empty());
  ASSERT_FALSE(bob_bytes.empty());
  // Bob's server sends half his bytes, then the rest once alice's run waits
  // for the package (or 25 s, below the agent's 30 s stall limit, so his
  // fetch ends in the digest mismatch, not in a retry).
  absl::Notification release;
  testing::HttpServer server([&](const testing::HttpRequest& r, testing::HttpConn& c) {
    if (r.path == "/alice.tar") {
      c.Respond(200, alice_bytes);
      return;
    }
    if (r.path != "/bob.tar") {
      c.Respond(404, "");
      return;
    }
    c.Write(absl::StrCat("HTTP/1.1 200 OK\r\nContent-Length: ", bob_bytes.size(), "\r\nConnection: close\r\n\r\n"));
    c.Write(absl::string_view(bob_bytes).substr(0, bob_bytes.size() / 2));
    release.WaitForNotificationWithTimeout(absl::Seconds(25));
    c.Write(absl::string_view(bob_bytes).substr(bob_bytes.size() / 2));
  });
  struct Release {
    absl::Notification& n;
    ~Release() {
      if (!n.HasBeenNotified()) n.Notify();
    }
  } release_at_end{release};  // before the server goes
  auto with_package = [](const std::string& sha, const std::string& url, const std::string& rest) {
    return absl::StrCat("packages:\n  - {name: shared, sha256: ", sha, ", url: \"", url, "\"}\n", rest);
  };
  const std::string bob_spec = absl::StrCat("name: squat\nuser: bob\npriority: batch\n",
                                            with_package(alice_pkg.sha256, server.Url("bob.tar"), ""),
                                            "command: [\"sleep\", \"3600\"]\nresources: {cpu: 10m, memory: 16Mi}\n");
  RunResult b = cell_.HerdAs("bob", {"submit", cell_.WriteSpec("squat.yaml", bob_spec)});
  ASSERT_EQ(b.exit_code, 0) << b.Describe();
  ASSERT_TRUE(Eventually(
      [&] {
        for (const testing::HttpRequest& r : server.requests()) {
          if (r.path == "/bob.tar") return true;
        }
        return false;
      },
      60s))
      << TaskText("bob/squat") << cell_.LogTails();

  // Alice's job, restart: always, needs the package while bob's fetch runs.
  const std::string alice_spec = absl::StrCat(
      "name: files\nuser: alice\npriority: batch\nrestart: {policy: always, backoff: 100ms}\n",
      with_package(alice_pkg.sha256, server.Url("alice.tar"), ""),
      "command: [\"sh\", \"-c\", \"cat $HERD_PACKAGE_SHARED/bin/hello.txt; exec sleep 3600\"]\n"
      "resources: {cpu: 10m, memory: 16Mi}\n");
  RunResult a = cell_.Herd({"submit", cell_.WriteSpec("files.yaml", alice_spec)});
  ASSERT_EQ(a.exit_code, 0) << a.Describe();
  // Her run waits for the package (on the agent's fetcher, or, before, on
  // bob's fetch of that digest); then bob's server finishes.
  EXPECT_TRUE(Eventually([&] { return absl::StrContains(TaskText("alice/files"), "fetching package shared"); }, 30s))
      << TaskText("alice/files");
  release.Notify();
  std::map<int, int64_t> pids = cell_.WaitRunning("alice/files", 1, 60s);
  ASSERT_EQ(pids.size(), 1u) << TaskText("alice/files");
  EXPECT_TRUE(Eventually([&] { return cell_.Herd({"logs", "files/0"}).out == "alice's package\n"; }, 30s))
      << cell_.Herd({"logs", "files/0"}).Describe();
  // Bob's fetch failed on his own bytes, and only his run took it.
  ASSERT_TRUE(Eventually([&] { return absl::StrContains(TaskText("bob/squat"), "does not have sha256"); }, 60s))
      << TaskText("bob/squat");

  // Alice's task keeps restarting as it should: killed, it comes back with
  // her package.
  ASSERT_GT(pids[0], 0);
  ASSERT_EQ(kill(static_cast<pid_t>(pids[0]), SIGKILL), 0);
  ASSERT_TRUE(Eventually(
      [&] {
        auto t = cell_.Tasks("alice/files");
        return t.ok() && t->tasks_size() == 1 && t->tasks(0).state() == v1::Task::RUNNING &&
               t->tasks(0).phase() == v1::Task::ACTIVE && t->tasks(0).restarts() >= 1;
      },
      60s))
      << TaskText("alice/files") << cell_.Herd({"logs", "files/0"}).Describe();
}

// ---- M2, M3: frameworks ----

class FrameworkLimitsTest : public TenantAttacksTest {
 protected:
  FrameworkLimitsTest() : TenantAttacksTest({"--framework-max-per-user=3", "--framework-role=gold=3,users=carol"}) {}
};

// M2 with the master's defaults (so the attack as it was found fails on a
// master without the cap, not just on its flags): bob's 21st framework is
// refused, alice's is not.
TEST_F(TenantAttacksTest, WithTheDefaultsAUserRegistersAtMostTwentyFrameworks) {
  for (int i = 0; i < 20; ++i) {
    harness::FrameworkStream s = Subscribe("bob", Fw(absl::StrCat("hoard", i)));
    ASSERT_TRUE(s.subscribed) << i << ": " << s.refused.error_message();
    s.Close();
  }
  harness::FrameworkStream over = Subscribe("bob", Fw("hoard20"));
  ASSERT_FALSE(over.subscribed) << "bob registered a 21st framework";
  EXPECT_EQ(over.refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << over.refused.error_message();
  harness::FrameworkStream mine = Subscribe("alice", Fw("mine"));
  EXPECT_TRUE(mine.subscribed) << mine.refused.error_message();
  mine.Close();
}

// M3's priority half with the master's defaults: bob, whose quota in band
// monitoring (priority 450) is zero, is refused it for a framework as for a
// job.
TEST_F(TenantAttacksTest, WithTheDefaultsAFrameworkTakesNoPriorityItsUserHasNoQuotaFor) {
  RunResult q = cell_.HerdAs("root", {"quota", "set", "bob", "monitoring", "cpu=0,memory=0"});
  ASSERT_EQ(q.exit_code, 0) << q.Describe();
  harness::FrameworkStream high = Subscribe("bob", Fw("high", "", 450));
  ASSERT_FALSE(high.subscribed) << "bob's framework took priority 450";
  EXPECT_EQ(high.refused.error_code(), grpc::StatusCode::PERMISSION_DENIED) << high.refused.error_message();
}

// M6's counts with the master's defaults: 200 labels or 200 constraints in
// one job are refused (a 200k-label dry run went through).
TEST_F(TenantAttacksTest, WithTheDefaultsCountsInOneRequestAreCapped) {
  v1::JobSpec spec;
  spec.set_name("many");
  spec.set_user("bob");
  spec.set_task_count(1);
  spec.mutable_task()->add_command("sleep");
  spec.mutable_task()->mutable_resources()->set_cpu_millis(10);
  spec.mutable_task()->mutable_resources()->set_memory_bytes(16 << 20);
  ASSERT_TRUE(DrySubmit("bob", spec).ok()) << DrySubmit("bob", spec).error_message();
  v1::JobSpec labels = spec;
  for (int i = 0; i < 200; ++i) (*labels.mutable_labels())[absl::StrCat("l", i)] = "v";
  EXPECT_EQ(DrySubmit("bob", labels).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  v1::JobSpec constraints = spec;
  for (int i = 0; i < 200; ++i) {
    v1::Constraint* c = constraints.add_constraints();
    c->set_attribute(absl::StrCat("a", i));
    c->set_op(v1::Constraint::EXISTS);
  }
  EXPECT_EQ(DrySubmit("bob", constraints).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

// M2: bob registered 997 frameworks (disconnected, each kept for its
// failover timeout) and alice's was refused: "the cell has 1000
// frameworks". Now bob is held to --framework-max-per-user and alice
// registers hers.
TEST_F(FrameworkLimitsTest, OneUserCannotRegisterFrameworksPastTheCapAndOthersStillCan) {
  for (int i = 0; i < 3; ++i) {
    harness::FrameworkStream s = Subscribe("bob", Fw(absl::StrCat("hoard", i)));
    ASSERT_TRUE(s.subscribed) << i << ": " << s.refused.error_message();
    s.Close();  // disconnected, still registered within its failover timeout
  }
  for (int i = 3; i < 10; ++i) {
    harness::FrameworkStream s = Subscribe("bob", Fw(absl::StrCat("hoard", i)));
    ASSERT_FALSE(s.subscribed) << "bob registered framework " << i + 1;
    EXPECT_EQ(s.refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << s.refused.error_message();
    EXPECT_TRUE(absl::StrContains(s.refused.error_message(), "--framework-max-per-user 3"))
        << s.refused.error_message();
  }
  harness::FrameworkStream mine = Subscribe("alice", Fw("mine"));
  EXPECT_TRUE(mine.subscribed) << mine.refused.error_message();
  mine.Close();
}

// M3: bob subscribed as role gold (weight 3, set aside for someone else)
// at priority 450 and got it. Now a reserved role is its users' (and
// admins'), and a priority in a band where the user's quota is zero is
// refused as for a job.
TEST_F(FrameworkLimitsTest, AFrameworkCannotTakeAReservedRoleOrAPriorityItHasNoQuotaFor) {
  harness::FrameworkStream gold = Subscribe("bob", Fw("gold", "gold"));
  ASSERT_FALSE(gold.subscribed) << "bob took role gold";
  EXPECT_EQ(gold.refused.error_code(), grpc::StatusCode::PERMISSION_DENIED) << gold.refused.error_message();
  EXPECT_TRUE(absl::StrContains(gold.refused.error_message(), "role gold is reserved")) << gold.refused.error_message();
  harness::FrameworkStream carols = Subscribe("carol", Fw("gold", "gold"));
  EXPECT_TRUE(carols.subscribed) << "carol is among gold's users: " << carols.refused.error_message();
  carols.Close();

  RunResult q = cell_.HerdAs("root", {"quota", "set", "bob", "monitoring", "cpu=0,memory=0"});
  ASSERT_EQ(q.exit_code, 0) << q.Describe();
  harness::FrameworkStream high = Subscribe("bob", Fw("high", "", 450));
  ASSERT_FALSE(high.subscribed) << "bob's framework took priority 450";
  EXPECT_EQ(high.refused.error_code(), grpc::StatusCode::PERMISSION_DENIED) << high.refused.error_message();
  EXPECT_TRUE(absl::StrContains(high.refused.error_message(), "no quota in band monitoring"))
      << high.refused.error_message();
  // What bob may have, he gets.
  harness::FrameworkStream batch = Subscribe("bob", Fw("batch", "", 100));
  EXPECT_TRUE(batch.subscribed) << batch.refused.error_message();
  batch.Close();
}

// ---- M4: the HTTPS port ----

class HttpsTest : public TenantAttacksTest {
 protected:
  HttpsTest() : TenantAttacksTest({"--http", "127.0.0.1:0"}) {}
};

// M4: 256 idle TCP connections from a spread of loopback addresses, no
// credential needed, held every connection of the master's HTTPS port: an
// authorised /metrics scrape got no answer in 4 of 6 tries. Here 8 networks
// of 32 addresses each hold one connection per address (the per-network
// cap), reopened by the attacker whenever the server closes one.
TEST_F(HttpsTest, IdleConnectionsFromSpreadAddressesDoNotStarveAnAuthorisedScrape) {
  const auto [host, port] = HostPort(Info().http());
  ASSERT_EQ(host, "127.0.0.1");
  IdleConnections idle(host, port);
  for (int net = 0; net < 8; ++net) {
    for (int h = 1; h <= 32; ++h) idle.Open(absl::StrCat("127.0.", 100 + net, ".", h));
  }
  ASSERT_GT(idle.size(), 240u) << "could not connect from the addresses";
  const std::string credential = cell_.UserCredential("bob");
  int answered = 0;
  for (int i = 0; i < 6; ++i) {
    const int open = idle.Refill();
    httplib::SSLClient cli("127.0.0.1", port, credential, credential);
    cli.enable_server_certificate_verification(false);  // the name, not the address, is in its certificate
    cli.set_connection_timeout(10, 0);  // bounds a failure
    cli.set_read_timeout(10, 0);
    httplib::Result r = cli.Get("/metrics");
    const bool ok = r && r->status == 200 && absl::StrContains(r->body, "# TYPE");
    answered += ok;
    std::printf("MEASURE scrape %d with %d idle connections held: %s\n", i, open,
                (r ? absl::StrCat("status ", r->status) : absl::StrCat("no answer (", static_cast<int>(r.error()), ")"))
                    .c_str());
  }
  EXPECT_EQ(answered, 6);
}

// ---- L2: the DNS port over TCP ----

class DnsTest : public TenantAttacksTest {
 protected:
  DnsTest() : TenantAttacksTest({"--dns", "127.0.0.1:0"}) {}
};

// L2: one source holding 80 TCP connections to the DNS server made 20 of 20
// other `dig +tcp` queries fail. Now each source holds at most a few, and a
// newcomer takes one from the source holding the most.
TEST_F(DnsTest, OneSourceHoldingTcpConnectionsDoesNotFailOthersQueries) {
  ASSERT_EQ(harness::Run({"/usr/bin/dig", "-v"}).exit_code, 0) << "no dig: scripts/setup.sh installs bind9-dnsutils";
  ASSERT_EQ(cell_.Herd({"submit", cell_.WriteSpec("web.yaml", Spec("web", "alice"))}).exit_code, 0);
  const auto [host, port] = HostPort(Info().dns());
  ASSERT_EQ(host, "127.0.0.1");
  IdleConnections idle(host, port);
  for (int i = 0; i < 80; ++i) idle.Open("127.0.50.50");
  int answered = 0;
  std::string failure;
  for (int i = 0; i < 20; ++i) {
    idle.Refill();
    RunResult r = harness::Run({"/usr/bin/dig", "@" + host, "-p", absl::StrCat(port), "-b", "127.0.0.1", "+tcp",
                                "+time=2", "+tries=1", "web.alice.herd.local", "A"},
                               30s);
    // An answer, whatever its rcode: the server took the query.
    const bool ok = r.exit_code == 0 && absl::StrContains(r.out, "->>HEADER<<-");
    answered += ok;
    if (!ok && failure.empty()) failure = r.Describe();
  }
  std::printf("MEASURE %d of 20 dig +tcp answered while one source held 80 connections\n", answered);
  EXPECT_EQ(answered, 20) << failure;
}

// ---- M5: disk ----

// A tmpfs of its own under the test's directory (the master's data
// directory, say), so filling it fills no real disk. Stops the cell before
// it goes.
class Tmpfs {
 public:
  // What the directory held (the master's credential) is copied onto it.
  Tmpfs(Cell* cell, std::string path, const std::string& size) : cell_(cell), path_(std::move(path)) {
    fs::create_directories(path_);
    std::vector<std::pair<std::string, std::string>> files;
    for (const auto& e : fs::directory_iterator(path_)) {
      if (e.is_regular_file()) files.emplace_back(e.path().filename().string(), harness::ReadFileOrEmpty(e.path()));
    }
    mounted_ = mount("tmpfs", path_.c_str(), "tmpfs", MS_NOSUID | MS_NODEV,
                     absl::StrCat("size=", size, ",mode=0700").c_str()) == 0;
    if (!mounted_) return;
    for (const auto& [name, contents] : files) {
      const std::string p = path_ + "/" + name;
      std::ofstream(p, std::ios::binary) << contents;
      chmod(p.c_str(), 0600);
    }
  }
  ~Tmpfs() {
    if (!mounted_) return;
    cell_->Shutdown();
    if (umount2(path_.c_str(), 0) != 0) umount2(path_.c_str(), MNT_DETACH);
  }
  bool mounted() const { return mounted_; }
  int64_t FreeBytes() const {
    struct statvfs v;
    return statvfs(path_.c_str(), &v) == 0 ? static_cast<int64_t>(v.f_bavail) * static_cast<int64_t>(v.f_frsize) : -1;
  }
  // Fills it until about `leave` bytes are free (a file of zeros; bounded by
  // its size); returns the file.
  std::string FillLeaving(int64_t leave) {
    const std::string file = path_ + "/filler";
    std::ofstream out(file, std::ios::binary | std::ios::trunc);
    const std::string mib(1 << 20, '\0');
    for (int64_t have = FreeBytes(); have > leave + (1 << 20); have = FreeBytes()) {
      out.write(mib.data(), static_cast<std::streamsize>(mib.size()));
      out.flush();
      if (!out) break;
    }
    return file;
  }

 private:
  Cell* const cell_;
  const std::string path_;
  bool mounted_ = false;
};

class DiskTest : public TenantAttacksTest {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root: a tmpfs for the master's data";
    master_disk_ = std::make_unique<Tmpfs>(&cell_, cell_.dir().Sub("master"), "128m");
    ASSERT_TRUE(master_disk_->mounted()) << "mount tmpfs: " << strerror(errno);
    TenantAttacksTest::SetUp();
  }
  void TearDown() override { master_disk_.reset(); }
  std::unique_ptr<Tmpfs> master_disk_;
};

// M5: `disk:` was not enforced: bob's task (disk: 1Mi) wrote 145 MiB and
// filled the disk; then every change was refused, the admin's kill that
// would have freed it included ("disk has 0 MiB free, below its reserve").
// Now the agent kills a task over its disk limit saying why, and below the
// master's reserve (64 MiB; the master's data is on a 128 MiB tmpfs the
// test fills) a kill still goes through while a submit is refused.
TEST_F(DiskTest, ATaskOverItsDiskLimitIsKilledAndBelowTheReserveAKillStillGoesThrough) {
  ASSERT_TRUE(cell_.StartAgents(1).ok()) << cell_.LogTails();
  const std::string filler =
      "name: filler\nuser: bob\npriority: batch\nresources: {cpu: 10m, memory: 64Mi, disk: 1Mi}\n"
      "command: [\"sh\", \"-c\", \"dd if=/dev/zero of=$HERD_TASK_DIR/big bs=1M count=8 2>/dev/null; echo wrote; "
      "exec sleep 3600\"]\n";
  RunResult r = cell_.HerdAs("bob", {"submit", cell_.WriteSpec("filler.yaml", filler)});
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  std::string status;
  ASSERT_TRUE(Eventually(
      [&] {
        status = cell_.HerdAs("bob", {"status", "filler"}).out;
        return absl::StrContains(status, "over its disk limit of 1Mi");
      },
      90s))
      << status << TaskText("bob/filler") << cell_.LogTails();

  // The master's disk below its reserve (above a quarter of it).
  master_disk_->FillLeaving(40 << 20);
  const int64_t free = master_disk_->FreeBytes();
  ASSERT_LT(free, 64 << 20);
  ASSERT_GT(free, 16 << 20);
  RunResult refused = cell_.HerdAs("bob", {"submit", cell_.WriteSpec("more.yaml", Spec("more", "bob"))});
  EXPECT_EQ(refused.exit_code, 1) << refused.Describe();
  EXPECT_TRUE(absl::StrContains(refused.err, "below its reserve")) << refused.err;
  RunResult kill = cell_.HerdAs("root", {"kill", "bob/filler"});
  ASSERT_EQ(kill.exit_code, 0) << "the admin's kill that frees space was refused: " << kill.Describe();
  EXPECT_TRUE(Eventually([&] { return absl::IsNotFound(cell_.Job("bob/filler").status()); }, 30s))
      << cell_.Job("bob/filler").status();
}

// ---- M6: counts in one request, tasks at priority 0 ----

class TaskCapTest : public TenantAttacksTest {
 protected:
  TaskCapTest() : TenantAttacksTest({"--max-tasks-per-user=5"}) {}
};

// M6: 200k labels, 100k constraints in one dry run went through, and
// priority 0 had no limit (300k tasks in 3 submits). Asked of the master
// directly (the CLI checks the spec too).
TEST_F(TaskCapTest, CountsInOneRequestAndTasksAtPriorityZeroAreCapped) {
  auto bob = Stub("bob");
  auto submit = [&](const v1::JobSpec& spec) {
    v1::SubmitRequest req;
    req.set_dry_run(true);
    *req.add_jobs() = spec;
    v1::SubmitResponse resp;
    auto ctx = rpc::Context("", 30'000);
    return bob->Submit(ctx.get(), req, &resp);
  };
  v1::JobSpec spec;
  spec.set_name("many");
  spec.set_user("bob");
  spec.set_task_count(1);
  spec.mutable_task()->add_command("sleep");
  spec.mutable_task()->mutable_resources()->set_cpu_millis(10);
  spec.mutable_task()->mutable_resources()->set_memory_bytes(16 << 20);
  ASSERT_TRUE(submit(spec).ok()) << submit(spec).error_message();
  v1::JobSpec labels = spec;
  for (int i = 0; i < 200; ++i) (*labels.mutable_labels())[absl::StrCat("l", i)] = "v";
  grpc::Status st = submit(labels);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << st.error_message();
  EXPECT_TRUE(absl::StrContains(st.error_message(), "labels")) << st.error_message();
  EXPECT_TRUE(absl::StrContains(st.error_message(), "at most 64")) << st.error_message();
  v1::JobSpec constraints = spec;
  for (int i = 0; i < 200; ++i) {
    v1::Constraint* c = constraints.add_constraints();
    c->set_attribute(absl::StrCat("a", i));
    c->set_op(v1::Constraint::EXISTS);
  }
  st = submit(constraints);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << st.error_message();
  EXPECT_TRUE(absl::StrContains(st.error_message(), "constraints")) << st.error_message();
  EXPECT_TRUE(absl::StrContains(st.error_message(), "at most 128")) << st.error_message();

  // Tasks at priority 0: bob's fifth task goes in, his sixth does not.
  ASSERT_EQ(cell_.HerdAs("bob", {"submit", cell_.WriteSpec("a.yaml", Spec("a", "bob", "priority: 0\ntasks: 4\n"))})
                .exit_code,
            0);
  RunResult over = cell_.HerdAs("bob", {"submit", cell_.WriteSpec("b.yaml", Spec("b", "bob", "priority: 0\ntasks: 2\n"))});
  EXPECT_EQ(over.exit_code, 1) << over.Describe();
  EXPECT_TRUE(absl::StrContains(over.err, "--max-tasks-per-user")) << over.err;
  EXPECT_TRUE(absl::IsNotFound(cell_.Job("bob/b").status()));
  RunResult one = cell_.HerdAs("bob", {"submit", cell_.WriteSpec("c.yaml", Spec("c", "bob", "priority: 0\n"))});
  EXPECT_EQ(one.exit_code, 0) << one.Describe();
  // Per user: alice has her own five; admins are not held to it.
  RunResult alice = cell_.Herd({"submit", cell_.WriteSpec("d.yaml", Spec("d", "alice", "priority: 0\ntasks: 5\n"))});
  EXPECT_EQ(alice.exit_code, 0) << alice.Describe();
  RunResult root = cell_.HerdAs("root", {"submit", cell_.WriteSpec("e.yaml", Spec("e", "root", "priority: 0\ntasks: 20\n"))});
  EXPECT_EQ(root.exit_code, 0) << root.Describe();
}

// ---- L3: the audit log ----

class AuditTest : public TenantAttacksTest {
 protected:
  // No request rate: the flood below is the audit log's to bound.
  AuditTest() : TenantAttacksTest({"--user-rate=0"}) {}
};

// L3: the audit log missed a refused act-as (--user alice), a refused
// checkpoint export and calls with a revoked credential; and one user wrote
// 11.5 MB of lines in 10 minutes, enough to rotate others' records away.
TEST_F(AuditTest, RefusalsAndRevokedCallsAreAuditedAndAFloodIsSuppressed) {
  ASSERT_EQ(cell_.Herd({"submit", cell_.WriteSpec("web.yaml", Spec("web", "alice"))}).exit_code, 0);
  auto find = [&](const std::function<bool(const nlohmann::json&)>& pred) {
    for (const nlohmann::json& j : AuditRecords(cell_)) {
      if (pred(j)) return true;
    }
    return false;
  };
  auto field = [](const nlohmann::json& j, const char* key) { return j.value(key, std::string()); };

  RunResult act = cell_.HerdAs("bob", {"--user", "alice", "kill", "web"});
  EXPECT_EQ(act.exit_code, 1) << act.Describe();
  EXPECT_TRUE(find([&](const nlohmann::json& j) {
    return field(j, "user") == "bob" && field(j, "acting_for") == "alice" && field(j, "action") == "identify" &&
           j.value("allowed", true) == false;
  })) << "no record of bob's refused act-as\n" << harness::ReadFileOrEmpty(cell_.dir().Sub("master/audit.log"));

  RunResult exp = cell_.HerdAs("bob", {"checkpoint", "export", cell_.dir().Sub("cp.bin")});
  EXPECT_EQ(exp.exit_code, 1) << exp.Describe();
  EXPECT_TRUE(find([&](const nlohmann::json& j) {
    return field(j, "user") == "bob" && field(j, "action") == "export-checkpoint" && j.value("allowed", true) == false;
  })) << "no record of bob's refused export";

  ASSERT_EQ(cell_.HerdAs("root", {"user", "revoke", "carol"}).exit_code, 0);
  RunResult revoked = cell_.HerdAs("carol", {"jobs"});
  EXPECT_EQ(revoked.exit_code, 1) << revoked.Describe();
  EXPECT_TRUE(find([&](const nlohmann::json& j) {
    return field(j, "user") == "carol" && field(j, "action") == "identify" && j.value("allowed", true) == false &&
           absl::StrContains(field(j, "why"), "revoked");
  })) << "no record of carol's call with a revoked credential";

  // The flood: bob's refused kills, as fast as he can send them (at most
  // 20,000), until the log says it suppressed some of his lines.
  auto bob = Stub("bob");
  int calls = 0;
  bool suppressed = false;
  for (; calls < 20'000 && !suppressed; ++calls) {
    v1::KillRequest req;
    req.set_job("alice/web");
    v1::KillResponse resp;
    auto ctx = rpc::Context("", 10'000);
    grpc::Status st = bob->Kill(ctx.get(), req, &resp);
    ASSERT_EQ(st.error_code(), grpc::StatusCode::PERMISSION_DENIED) << st.error_message();
    if (calls % 100 == 99) {
      suppressed = absl::StrContains(harness::ReadFileOrEmpty(cell_.dir().Sub("master/audit.log")), "\"suppressed\"");
    }
  }
  ASSERT_TRUE(suppressed) << calls << " refused calls and no suppressed line";
  int bob_lines = 0;
  bool counted = false;
  for (const nlohmann::json& j : AuditRecords(cell_)) {
    if (field(j, "user") == "bob" && field(j, "action") == "kill-job") ++bob_lines;
    if (field(j, "user") == "bob" && j.contains("suppressed")) counted = j["suppressed"].get<int64_t>() > 0;
  }
  std::printf("MEASURE %d refused kills by bob, %d of them written to the audit log\n", calls, bob_lines);
  EXPECT_TRUE(counted);
  EXPECT_LT(bob_lines, calls) << "every line of the flood was written";
  // Alice's own records still go in.
  ASSERT_EQ(cell_.Herd({"kill", "web"}).exit_code, 0);
  EXPECT_TRUE(find([&](const nlohmann::json& j) {
    return field(j, "user") == "alice" && field(j, "action") == "kill-job" && j.value("allowed", false) == true;
  })) << "alice's kill is not in the audit log after bob's flood";
}

// ---- L4, item 7: revocation ends streams and grants at once ----

// L4: an open WatchNames stream outlived its user's revocation.
TEST_F(TenantAttacksTest, RevokingAUserEndsTheirWatchNamesStreamAtOnce) {
  ASSERT_EQ(cell_.Herd({"submit", cell_.WriteSpec("web.yaml", Spec("web", "alice"))}).exit_code, 0);
  auto alice = Stub("alice");
  // The deadline only bounds a failure: a stream that is not ended by the
  // revocation ends there, DEADLINE_EXCEEDED.
  harness::NamesStream s = harness::NamesStream::Watch(alice.get(), "alice/web", 60'000);
  ASSERT_TRUE(s.open) << s.refused.error_message();
  ASSERT_EQ(cell_.HerdAs("root", {"user", "revoke", "alice"}).exit_code, 0);
  v1::WatchNamesResponse more;
  while (s.reader->Read(&more)) {
  }
  grpc::Status st = s.reader->Finish();
  s.open = false;
  EXPECT_NE(st.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << "the stream outlived the revocation";
  EXPECT_NE(st.error_code(), grpc::StatusCode::OK);
}

// Item 7 (L4): an exec grant issued before a revocation still worked after
// it, for the rest of its 60 s, and streams it opened (herd exec, herd logs
// -f) went on. Now the master's next poll tells the agent, which refuses
// the grant and ends the streams.
TEST_F(TenantAttacksTest, RevokingAUserRefusesTheirGrantsAndEndsTheirExecAndLogStreams) {
  ASSERT_TRUE(cell_.StartAgents(1).ok()) << cell_.LogTails();
  const std::string spec = "name: web\nuser: alice\npriority: batch\nresources: {cpu: 10m, memory: 16Mi}\n"
                           "command: [\"sh\", \"-c\", \"while true; do echo tick; sleep 0.2; done\"]\n";
  ASSERT_EQ(cell_.Herd({"submit", cell_.WriteSpec("web.yaml", spec)}).exit_code, 0);
  cell_.WaitRunning("alice/web", 1);
  const std::string cred = cell_.UserCredential("alice");
  auto herd = [&](const std::vector<std::string>& args) {
    std::vector<std::string> argv = {harness::HerdBinary(), "--master", cell_.master_address(), "--credentials", cred};
    argv.insert(argv.end(), args.begin(), args.end());
    return argv;
  };
  auto exec = Child::Spawn("exec", herd({"exec", "web/0", "--", "sh", "-c", "echo started; exec sleep 600"}),
                           cell_.dir().Sub("logs/exec.log"));
  ASSERT_TRUE(exec.ok()) << exec.status();
  auto logs = Child::Spawn("logs", herd({"logs", "-f", "web/0"}), cell_.dir().Sub("logs/logs-f.log"));
  ASSERT_TRUE(logs.ok()) << logs.status();
  ASSERT_TRUE(Eventually(
      [&] {
        return absl::StrContains(harness::ReadFileOrEmpty((*exec)->log_path()), "started") &&
               absl::StrContains(harness::ReadFileOrEmpty((*logs)->log_path()), "tick");
      },
      30s))
      << harness::ReadFileOrEmpty((*exec)->log_path()) << harness::ReadFileOrEmpty((*logs)->log_path());
  // A grant alice holds from before (valid 60 s).
  auto alice = harness::MasterStub(cell_, cred);
  v1::GrantAccessRequest gr;
  gr.set_job("alice/web");
  gr.set_index(0);
  gr.set_action(v1::EXEC);
  v1::GrantAccessResponse granted;
  {
    auto ctx = rpc::Context("", 10'000);
    grpc::Status st = alice->GrantAccess(ctx.get(), gr, &granted);
    ASSERT_TRUE(st.ok()) << st.error_message();
  }
  const v1::Machine& machine = granted.task().machine();
  auto exec_with = [&](const std::string& credential, const v1::AccessGrant& grant) {
    auto agent = harness::AgentStub(machine.address(), machine.name(), credential);
    v1::ExecRequest req;
    req.set_run_id(granted.task().run_id());
    req.add_argv("true");
    *req.mutable_grant() = grant;
    auto ctx = rpc::Context("", 10'000);
    auto reader = agent->Exec(ctx.get(), req);
    v1::ExecOutput out;
    while (reader->Read(&out)) {
    }
    return reader->Finish();
  };
  grpc::Status before = exec_with(cred, granted.grant());
  ASSERT_TRUE(before.ok()) << "the grant works before the revocation: " << before.error_message();

  ASSERT_EQ(cell_.HerdAs("root", {"user", "revoke", "alice"}).exit_code, 0);
  // The live streams end (bounded well below the grant's 60 s).
  EXPECT_TRUE(Eventually([&] { return !(*exec)->Running() && !(*logs)->Running(); }, 20s))
      << "herd exec and herd logs -f went on after the revocation";
  EXPECT_TRUE(absl::StrContains(harness::ReadFileOrEmpty((*exec)->log_path()), "revoked"))
      << harness::ReadFileOrEmpty((*exec)->log_path());
  EXPECT_TRUE(absl::StrContains(harness::ReadFileOrEmpty((*logs)->log_path()), "revoked"))
      << harness::ReadFileOrEmpty((*logs)->log_path());
  // The grant from before is refused (it has ~50 s left).
  grpc::Status after = exec_with(cred, granted.grant());
  EXPECT_EQ(after.error_code(), grpc::StatusCode::PERMISSION_DENIED) << after.error_message();
  EXPECT_TRUE(absl::StrContains(after.error_message(), "revoked")) << after.error_message();

  // A new credential (issued after the revocation) with the old grant: still
  // refused; with a grant of its own: served.
  const std::string fresh = cell_.dir().Sub("alice2.pem");
  ASSERT_TRUE(Eventually(
      [&] {
        return cell_.HerdAs("root", {"user", "add", "alice", "--out", fresh}).exit_code == 0 &&
               cell_.HerdWith(fresh, {"jobs"}).exit_code == 0;
      },
      10s));
  grpc::Status old_grant = exec_with(fresh, granted.grant());
  EXPECT_EQ(old_grant.error_code(), grpc::StatusCode::PERMISSION_DENIED) << old_grant.error_message();
  RunResult again = cell_.HerdWith(fresh, {"exec", "web/0", "--", "echo", "back"});
  EXPECT_EQ(again.exit_code, 0) << again.Describe();
  EXPECT_EQ(again.out, "back\n");
}

}  // namespace
}  // namespace herd
