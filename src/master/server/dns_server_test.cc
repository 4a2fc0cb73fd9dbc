#include "master/server/dns_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <vector>

#include "absl/strings/numbers.h"
#include "gtest/gtest.h"

namespace herd::master {
namespace {

// A query for `name` (type A), id 0x4242.
std::string Query(const std::string& name) {
  std::string q("\x42\x42\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00", 12);
  size_t start = 0;
  while (start < name.size()) {
    size_t dot = name.find('.', start);
    if (dot == std::string::npos) dot = name.size();
    q.push_back(static_cast<char>(dot - start));
    q.append(name, start, dot - start);
    start = dot + 1;
  }
  q.append(std::string("\0\0\1\0\1", 5));
  return q;
}

class DnsServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto server = DnsServer::Start({.address = "127.0.0.1:0", .max_tcp_connections = 2, .tcp_idle_ms = 60'000},
                                   [](const dns::Question& q) {
                                     dns::Response r;
                                     if (q.name == "a.herd") {
                                       r.answer.push_back({"a.herd", dns::kTypeA, 5, dns::RdataA("10.0.0.1")});
                                     } else {
                                       r.rcode = dns::kNxDomain;
                                     }
                                     return r;
                                   });
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    int port = 0;
    ASSERT_TRUE(absl::SimpleAtoi(server_->address().substr(server_->address().rfind(':') + 1), &port));
    addr_.sin_family = AF_INET;
    addr_.sin_port = htons(static_cast<uint16_t>(port));
    addr_.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  }

  int Connect(int type) {
    int fd = socket(AF_INET, type, 0);
    EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr_), sizeof addr_), 0);
    timeval tv{10, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    return fd;
  }
  static std::string Framed(const std::string& m) {
    return std::string(1, static_cast<char>(m.size() >> 8)) + static_cast<char>(m.size() & 0xFF) + m;
  }
  // Reads exactly n bytes ("" on EOF or timeout).
  static std::string ReadN(int fd, size_t n) {
    std::string out(n, '\0');
    size_t got = 0;
    while (got < n) {
      ssize_t r = read(fd, out.data() + got, n - got);
      if (r <= 0) return "";
      got += r;
    }
    return out;
  }
  static std::string ReadFramed(int fd) {
    std::string len = ReadN(fd, 2);
    if (len.empty()) return "";
    return ReadN(fd, static_cast<uint8_t>(len[0]) << 8 | static_cast<uint8_t>(len[1]));
  }
  static int Rcode(const std::string& m) { return m.size() >= 4 ? m[3] & 0xF : -1; }

  std::unique_ptr<DnsServer> server_;
  sockaddr_in addr_{};
};

TEST_F(DnsServerTest, AnswersOverUdpAndIgnoresWhatIsNotAQuery) {
  int fd = Connect(SOCK_DGRAM);
  std::string q = Query("a.herd");
  ASSERT_EQ(send(fd, q.data(), q.size(), 0), static_cast<ssize_t>(q.size()));
  char buf[512];
  ssize_t n = recv(fd, buf, sizeof buf, 0);
  ASSERT_GT(n, 12);
  std::string reply(buf, n);
  EXPECT_EQ(Rcode(reply), dns::kNoError);
  EXPECT_EQ(reply.substr(reply.size() - 4), std::string("\x0a\x00\x00\x01", 4));
  // Garbage gets nothing; the next query is still answered.
  ASSERT_EQ(send(fd, "xy", 2, 0), 2);
  std::string nx = Query("b.herd");
  ASSERT_EQ(send(fd, nx.data(), nx.size(), 0), static_cast<ssize_t>(nx.size()));
  n = recv(fd, buf, sizeof buf, 0);
  ASSERT_GT(n, 12);
  EXPECT_EQ(Rcode(std::string(buf, n)), dns::kNxDomain);
  close(fd);
}

TEST_F(DnsServerTest, TcpAnswersPipelinedQueriesInOrderAndBoundsConnections) {
  int fd = Connect(SOCK_STREAM);
  std::string two = Framed(Query("a.herd")) + Framed(Query("b.herd"));
  ASSERT_EQ(write(fd, two.data(), two.size()), static_cast<ssize_t>(two.size()));
  EXPECT_EQ(Rcode(ReadFramed(fd)), dns::kNoError);
  EXPECT_EQ(Rcode(ReadFramed(fd)), dns::kNxDomain);

  // A second connection is served; a third, over the limit of two, is
  // closed at once; the first two still work.
  int second = Connect(SOCK_STREAM);
  std::string q = Framed(Query("a.herd"));
  ASSERT_EQ(write(second, q.data(), q.size()), static_cast<ssize_t>(q.size()));
  EXPECT_EQ(Rcode(ReadFramed(second)), dns::kNoError);
  int third = Connect(SOCK_STREAM);
  (void)!write(third, q.data(), q.size());
  EXPECT_EQ(ReadFramed(third), "");
  ASSERT_EQ(write(fd, q.data(), q.size()), static_cast<ssize_t>(q.size()));
  EXPECT_EQ(Rcode(ReadFramed(fd)), dns::kNoError);

  // Something that is not a query ends the connection.
  std::string junk = Framed("xy");
  ASSERT_EQ(write(second, junk.data(), junk.size()), static_cast<ssize_t>(junk.size()));
  EXPECT_EQ(ReadFramed(second), "");
  for (int f : {fd, second, third}) close(f);
}

// Issue #33, L2: one source holding every TCP connection made every other
// client's query fail. A source gets at most its share; when all are
// taken, a newcomer from another source takes the greedy one's oldest.
TEST(DnsServerFairness, OneSourceCannotHoldEveryTcpConnection) {
  auto server = DnsServer::Start(
      {.address = "127.0.0.1:0", .max_tcp_connections = 4, .max_tcp_per_source = 3, .tcp_idle_ms = 60'000},
      [](const dns::Question& q) {
        dns::Response r;
        r.answer.push_back({q.name, dns::kTypeA, 5, dns::RdataA("10.0.0.1")});
        return r;
      });
  ASSERT_TRUE(server.ok()) << server.status();
  int port = 0;
  ASSERT_TRUE(absl::SimpleAtoi((*server)->address().substr((*server)->address().rfind(':') + 1), &port));
  auto connect_from = [&](const char* source) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in local{};
    local.sin_family = AF_INET;
    inet_pton(AF_INET, source, &local.sin_addr);
    EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&local), sizeof local), 0) << strerror(errno);
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(static_cast<uint16_t>(port));
    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to), 0);
    timeval tv{10, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    return fd;
  };
  const std::string query = Query("a.herd");
  const std::string q = std::string(1, static_cast<char>(query.size() >> 8)) +
                        static_cast<char>(query.size() & 0xFF) + query;
  // Answered: a whole framed answer comes back (a closed connection gives
  // EOF or a reset).
  auto read_n = [](int fd, size_t n) {
    std::string out(n, '\0');
    size_t got = 0;
    while (got < n) {
      ssize_t r = read(fd, out.data() + got, n - got);
      if (r <= 0) return false;
      got += static_cast<size_t>(r);
    }
    return true;
  };
  auto answered = [&](int fd) {
    if (send(fd, q.data(), q.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(q.size())) return false;
    unsigned char len[2];
    if (read(fd, len, 1) != 1 || read(fd, len + 1, 1) != 1) return false;
    return read_n(fd, static_cast<size_t>(len[0]) << 8 | len[1]);
  };
  // The greedy source: three connections answered, a fourth refused.
  std::vector<int> greedy;
  for (int i = 0; i < 3; ++i) greedy.push_back(connect_from("127.0.0.2"));
  for (int fd : greedy) EXPECT_TRUE(answered(fd));
  int over = connect_from("127.0.0.2");
  EXPECT_FALSE(answered(over)) << "past its share of the connections";
  // Two other clients are served: the first takes the last free one, the
  // second the greedy source's least recently active.
  int a = connect_from("127.0.0.3");
  EXPECT_TRUE(answered(a));
  int b = connect_from("127.0.0.4");
  EXPECT_TRUE(answered(b));
  EXPECT_FALSE(answered(greedy[0])) << "the greedy source's oldest connection was closed for the newcomer";
  EXPECT_TRUE(answered(greedy[2]));
  for (int fd : greedy) close(fd);
  for (int fd : {over, a, b}) close(fd);
}

}  // namespace
}  // namespace herd::master

namespace herd::master {
namespace {

TEST(SourceLimiter, EachSourceGetsItsRateAndBurst) {
  SourceLimiter limiter(5);  // 5 a second, bursts of 10
  int allowed = 0;
  for (int i = 0; i < 40; ++i) allowed += limiter.Allow("a", 1000) ? 1 : 0;
  EXPECT_EQ(allowed, 10);
  // Another source is not held back by the first.
  EXPECT_TRUE(limiter.Allow("b", 1000));
  // 200 ms later: one more for "a".
  EXPECT_TRUE(limiter.Allow("a", 1200));
  EXPECT_FALSE(limiter.Allow("a", 1200));
  // A second later, five more.
  allowed = 0;
  for (int i = 0; i < 10; ++i) allowed += limiter.Allow("a", 2200) ? 1 : 0;
  EXPECT_EQ(allowed, 5);
  SourceLimiter off(0);
  for (int i = 0; i < 1000; ++i) ASSERT_TRUE(off.Allow("a", 0));
}

TEST(SourceLimiter, ForgedSourcesCannotGrowItsMemory) {
  SourceLimiter limiter(5);
  for (size_t i = 0; i < SourceLimiter::kMaxSources + 100; ++i) {
    limiter.Allow(std::to_string(i), 1000);  // all busy at once: the table starts over when full
  }
  EXPECT_LE(limiter.tracked(), SourceLimiter::kMaxSources);
  EXPECT_GT(limiter.tracked(), 0u);
}

}  // namespace
}  // namespace herd::master
