#include "agent/ports/port_allocator.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <set>

#include "absl/strings/str_cat.h"

namespace herd::agent {
namespace {

bool AlwaysFree(int32_t) { return true; }

TEST(PortAllocatorTest, NeverGivesOnePortToTwoOwners) {
  PortAllocator a(30000, 30099, AlwaysFree);
  std::set<int32_t> seen;
  for (int i = 0; i < 50; ++i) {
    absl::StatusOr<PortMap> p = a.Allocate(absl::StrCat("run", i), {"http", "admin"});
    ASSERT_TRUE(p.ok()) << p.status();
    ASSERT_EQ(p->size(), 2u);
    for (const auto& [name, port] : *p) {
      EXPECT_GE(port, 30000);
      EXPECT_LE(port, 30099);
      EXPECT_TRUE(seen.insert(port).second) << "port " << port << " given twice";
    }
  }
  EXPECT_EQ(a.allocated(), 100u);
  // Full: the next one waits, and says why.
  absl::StatusOr<PortMap> p = a.Allocate("late", {"http"});
  EXPECT_EQ(p.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(p.status().message(), "no free port for http in [30000, 30099]: 100 held by tasks, 0 in use by other programs");
  // Releases make room; churn never produces a duplicate.
  for (int round = 0; round < 200; ++round) {
    std::string victim = absl::StrCat("run", round % 50);
    for (const auto& [name, port] : a.PortsOf(victim)) seen.erase(port);
    a.Release(victim);
    EXPECT_TRUE(a.PortsOf(victim).empty());
    absl::StatusOr<PortMap> q = a.Allocate(victim, {"http", "admin"});
    ASSERT_TRUE(q.ok()) << q.status();
    for (const auto& [name, port] : *q) EXPECT_TRUE(seen.insert(port).second) << "port " << port << " given twice";
  }
}

TEST(PortAllocatorTest, SameOwnerKeepsItsPortsAndAllOrNothing) {
  PortAllocator a(30000, 30002, AlwaysFree);
  PortMap first = *a.Allocate("r", {"http"});
  EXPECT_EQ(*a.Allocate("r", {"http"}), first) << "asking again changes nothing";
  PortMap both = *a.Allocate("r", {"http", "grpc", "grpc"});
  EXPECT_EQ(both.size(), 2u);
  EXPECT_EQ(both.at("http"), first.at("http"));
  // One port left; two asked: none taken.
  EXPECT_FALSE(a.Allocate("s", {"a", "b"}).ok());
  EXPECT_EQ(a.allocated(), 2u);
  EXPECT_TRUE(a.Allocate("s", {"a"}).ok());
}

TEST(PortAllocatorTest, JustReleasedPortIsReusedLast) {
  PortAllocator a(30000, 30009, AlwaysFree);
  int32_t p = a.Allocate("r", {"x"})->at("x");
  a.Release("r");
  EXPECT_NE(a.Allocate("s", {"x"})->at("x"), p);
}

TEST(PortAllocatorTest, SkipsPortsTheHostUses) {
  std::set<int32_t> busy = {30000, 30002};
  PortAllocator a(30000, 30003, [&](int32_t p) { return !busy.contains(p); });
  PortMap p = *a.Allocate("r", {"a", "b"});
  EXPECT_EQ(p.at("a"), 30001);
  EXPECT_EQ(p.at("b"), 30003);
  absl::StatusOr<PortMap> q = a.Allocate("s", {"a"});
  EXPECT_EQ(q.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(q.status().message().find("2 in use by other programs"), absl::string_view::npos) << q.status();
}

TEST(PortAllocatorTest, ReserveRebuildsAndRefusesConflicts) {
  PortAllocator a(30000, 30003, AlwaysFree);
  ASSERT_TRUE(a.Reserve("old", {{"http", 30000}, {"far", 40000}}).ok());
  EXPECT_EQ(a.OwnerOf(30000), "old");
  EXPECT_EQ(a.Reserve("other", {{"http", 30000}}).code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(a.PortsOf("other").size(), 0u);
  PortMap p = *a.Allocate("new", {"a", "b", "c"});
  for (const auto& [name, port] : p) EXPECT_NE(port, 30000);
  EXPECT_EQ(a.allocated(), 4u) << "the out-of-range port is held but not counted";
}

// The real host check: a port something listens on is not free.
TEST(PortAllocatorTest, HostCheckSeesAListener) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  struct sockaddr_in addr = {};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(fd, reinterpret_cast<struct sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(listen(fd, 1), 0);
  socklen_t len = sizeof(addr);
  ASSERT_EQ(getsockname(fd, reinterpret_cast<struct sockaddr*>(&addr), &len), 0);
  int32_t port = ntohs(addr.sin_port);
  EXPECT_FALSE(TcpPortIsFree(port)) << port;
  PortAllocator a(port, port + 1);
  absl::StatusOr<PortMap> p = a.Allocate("r", {"http"});
  if (p.ok()) {
    EXPECT_EQ(p->at("http"), port + 1);  // port + 1 may happen to be taken too
  }
  close(fd);
  EXPECT_TRUE(TcpPortIsFree(port)) << port;
}

}  // namespace
}  // namespace herd::agent
