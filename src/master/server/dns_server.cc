#include "master/server/dns_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <list>
#include <map>
#include <thread>
#include <unordered_map>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "base/clock.h"
#include "base/errno_status.h"
#include "base/log.h"

namespace herd::master {
namespace {

// "HOST:PORT" or "[V6]:PORT" -> a socket address.
absl::StatusOr<sockaddr_storage> ParseAddress(const std::string& address, socklen_t* len) {
  std::string host, port;
  if (!address.empty() && address[0] == '[') {
    const size_t close = address.find("]:");
    if (close == std::string::npos) return absl::InvalidArgumentError(absl::StrCat("bad address '", address, "'"));
    host = address.substr(1, close - 1);
    port = address.substr(close + 2);
  } else {
    const size_t colon = address.rfind(':');
    if (colon == std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat("'", address, "' is not HOST:PORT"));
    }
    host = address.substr(0, colon);
    port = address.substr(colon + 1);
  }
  int p;
  if (!absl::SimpleAtoi(port, &p) || p < 0 || p > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("bad port in '", address, "'"));
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* res = nullptr;
  if (int rc = getaddrinfo(host.empty() ? nullptr : host.c_str(), port.c_str(), &hints, &res); rc != 0) {
    return absl::InvalidArgumentError(absl::StrCat("cannot resolve '", host, "': ", gai_strerror(rc)));
  }
  sockaddr_storage out{};
  std::memcpy(&out, res->ai_addr, res->ai_addrlen);
  *len = res->ai_addrlen;
  freeaddrinfo(res);
  return out;
}

void SetPort(sockaddr_storage* a, uint16_t port) {
  if (a->ss_family == AF_INET6) {
    reinterpret_cast<sockaddr_in6*>(a)->sin6_port = htons(port);
  } else {
    reinterpret_cast<sockaddr_in*>(a)->sin_port = htons(port);
  }
}

uint16_t PortOf(int fd) {
  sockaddr_storage a{};
  socklen_t len = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  return ntohs(a.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&a)->sin6_port
                                       : reinterpret_cast<sockaddr_in*>(&a)->sin_port);
}

absl::StatusOr<int> Bind(const sockaddr_storage& a, socklen_t len, int type) {
  int fd = socket(a.ss_family, type | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return ErrnoToStatus(errno, "socket");
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(fd, reinterpret_cast<const sockaddr*>(&a), len) != 0) {
    absl::Status st = ErrnoToStatus(errno, "bind");
    close(fd);
    return st;
  }
  if (type == SOCK_STREAM && listen(fd, 64) != 0) {
    absl::Status st = ErrnoToStatus(errno, "listen");
    close(fd);
    return st;
  }
  return fd;
}

// One TCP client: a query is a 2-byte length and that many bytes (RFC 1035
// §4.2.2); answers go out the same way.
struct Connection {
  int fd = -1;
  std::string source;  // the client's address, without its port
  std::string in;
  std::string out;
  int64_t deadline_ms = 0;
  int queries = 0;
  bool eof = false;  // the client has sent all it will: answer, then close
  int64_t active_ms = 0;  // last read or write
};

std::string SourceOf(const sockaddr_storage& a) {
  char text[INET6_ADDRSTRLEN] = "";
  if (a.ss_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&a)->sin_addr, text, sizeof text);
  } else if (a.ss_family == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(&a)->sin6_addr, text, sizeof text);
  }
  return text;
}

}  // namespace

namespace {

// A UDP source for the limiter: an IPv4 address, or an IPv6 /64.
std::string SourceKey(const sockaddr_storage& from) {
  if (from.ss_family == AF_INET) {
    const auto* a = reinterpret_cast<const sockaddr_in*>(&from);
    return std::string(reinterpret_cast<const char*>(&a->sin_addr), 4);
  }
  if (from.ss_family == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&from);
    return std::string(reinterpret_cast<const char*>(&a->sin6_addr), 8);
  }
  return "";
}

}  // namespace

bool SourceLimiter::Allow(const std::string& source, double now_ms) {
  if (rate_ <= 0) return true;
  auto it = buckets_.find(source);
  if (it == buckets_.end()) {
    if (buckets_.size() >= kMaxSources) Prune(now_ms);
    it = buckets_.emplace(source, Bucket{burst_, now_ms}).first;
  }
  Bucket& b = it->second;
  b.tokens = std::min(burst_, b.tokens + std::max(0.0, now_ms - b.last_ms) * rate_ / 1000.0);
  b.last_ms = now_ms;
  if (b.tokens < 1) return false;
  b.tokens -= 1;
  return true;
}

void SourceLimiter::Prune(double now_ms) {
  // A bucket idle long enough to be full again holds nothing worth keeping.
  const double refill_ms = burst_ * 1000.0 / rate_;
  std::erase_if(buckets_, [&](const auto& kv) { return now_ms - kv.second.last_ms >= refill_ms; });
  if (buckets_.size() >= kMaxSources) buckets_.clear();
}

struct DnsServer::Impl {
  DnsServerOptions options;
  AnswerFn answer;
  int udp = -1;
  int tcp = -1;
  int wake[2] = {-1, -1};  // a byte here stops the threads
  std::thread udp_thread;
  std::thread tcp_thread;

  ~Impl() {
    if (wake[1] >= 0) (void)!write(wake[1], "x", 1);
    if (udp_thread.joinable()) udp_thread.join();
    if (tcp_thread.joinable()) tcp_thread.join();
    for (int fd : {udp, tcp, wake[0], wake[1]}) {
      if (fd >= 0) close(fd);
    }
  }

  void ServeUdp() {
    std::vector<char> buf(dns::kTcpPayload);
    SourceLimiter limiter(options.udp_per_source_per_second);
    while (true) {
      pollfd fds[2] = {{udp, POLLIN, 0}, {wake[0], POLLIN, 0}};
      if (poll(fds, 2, -1) < 0 && errno != EINTR) return;
      if (fds[1].revents) return;
      if (!(fds[0].revents & POLLIN)) continue;
      sockaddr_storage from{};
      socklen_t len = sizeof from;
      ssize_t n = recvfrom(udp, buf.data(), buf.size(), 0, reinterpret_cast<sockaddr*>(&from), &len);
      if (n <= 0 || !limiter.Allow(SourceKey(from), static_cast<double>(SteadyNowMs()))) continue;
      std::string reply = dns::Respond(absl::string_view(buf.data(), n), false, answer);
      if (!reply.empty()) sendto(udp, reply.data(), reply.size(), 0, reinterpret_cast<sockaddr*>(&from), len);
    }
  }

  // Reads what is there; answers each complete query. False: close it.
  bool Read(Connection& c) {
    // At most one whole message waits here: a longer buffer always holds a
    // complete query, answered before more is read.
    char buf[4096];
    while (c.in.size() < 2 + dns::kTcpPayload) {
      ssize_t n = read(c.fd, buf, std::min(sizeof buf, 2 + dns::kTcpPayload - c.in.size()));
      if (n == 0) {
        c.eof = true;
        break;
      }
      if (n < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) break;
        return false;
      }
      c.in.append(buf, n);
    }
    // Answers wait while earlier ones are unsent (a client that does not
    // read holds at most about two answers here).
    while (c.in.size() >= 2 && c.out.size() < dns::kTcpPayload && c.queries < options.max_queries_per_connection) {
      const size_t len = static_cast<uint8_t>(c.in[0]) << 8 | static_cast<uint8_t>(c.in[1]);
      if (c.in.size() < 2 + len) break;
      std::string reply = dns::Respond(absl::string_view(c.in).substr(2, len), true, answer);
      c.in.erase(0, 2 + len);
      if (reply.empty()) return false;
      c.out.push_back(static_cast<char>(reply.size() >> 8));
      c.out.push_back(static_cast<char>(reply.size() & 0xFF));
      c.out.append(reply);
      c.deadline_ms = SteadyNowMs() + options.tcp_idle_ms;
      ++c.queries;
    }
    return true;
  }

  bool Write(Connection& c) {
    while (!c.out.empty()) {
      ssize_t n = send(c.fd, c.out.data(), c.out.size(), MSG_NOSIGNAL);
      if (n < 0) {
        if (errno == EINTR) continue;
        return errno == EAGAIN || errno == EWOULDBLOCK;
      }
      c.out.erase(0, n);
    }
    return true;
  }

  // Whether a new connection from `source` may be served, closing another
  // source's to make room if all are taken: only one whose source holds at
  // least two more than `source` would (a fair share, so one client cannot
  // hold every connection).
  bool Admit(std::list<Connection>& conns, const std::string& source) {
    std::map<std::string, int> held;
    for (const Connection& c : conns) ++held[c.source];
    const int mine = held[source];
    if (mine >= options.max_tcp_per_source) return false;
    if (static_cast<int>(conns.size()) < options.max_tcp_connections) return true;
    auto victim = conns.end();
    for (auto it = conns.begin(); it != conns.end(); ++it) {
      const int n = held[it->source];
      if (n <= mine + 1) continue;  // no more than its share above the newcomer's
      const int v = victim == conns.end() ? 0 : held[victim->source];
      if (n > v || (n == v && it->active_ms < victim->active_ms)) victim = it;
    }
    if (victim == conns.end()) return false;
    close(victim->fd);
    conns.erase(victim);
    return true;
  }

  void ServeTcp() {
    std::list<Connection> conns;
    while (true) {
      std::vector<pollfd> fds = {{wake[0], POLLIN, 0}, {tcp, POLLIN, 0}};
      int64_t now = SteadyNowMs();
      int64_t next = now + options.tcp_idle_ms;
      for (Connection& c : conns) {
        fds.push_back({c.fd, static_cast<short>(c.out.empty() ? POLLIN : POLLOUT), 0});
        next = std::min(next, c.deadline_ms);
      }
      if (poll(fds.data(), fds.size(), static_cast<int>(std::max<int64_t>(0, next - now) + 1)) < 0 &&
          errno != EINTR) {
        break;
      }
      if (fds[0].revents) break;
      now = SteadyNowMs();
      size_t i = 2;
      for (auto it = conns.begin(); it != conns.end(); ++i) {
        const short ev = fds[i].revents;
        bool keep = true;
        if (ev & (POLLERR | POLLNVAL)) keep = false;
        if (keep && (ev & (POLLIN | POLLHUP))) keep = Read(*it);
        if (keep && !it->out.empty()) keep = Write(*it);
        if (keep && it->out.empty() && !it->in.empty()) keep = Read(*it);  // queries that waited
        const bool done = (it->eof || it->queries >= options.max_queries_per_connection) && it->out.empty();
        if (keep && (ev & (POLLIN | POLLOUT))) it->active_ms = now;
        if (!keep || done || now > it->deadline_ms) {
          close(it->fd);
          it = conns.erase(it);
        } else {
          ++it;
        }
      }
      if (fds[1].revents & POLLIN) {
        while (true) {
          sockaddr_storage peer{};
          socklen_t peer_len = sizeof peer;
          int fd = accept4(tcp, reinterpret_cast<sockaddr*>(&peer), &peer_len, SOCK_CLOEXEC | SOCK_NONBLOCK);
          if (fd < 0) break;
          const std::string source = SourceOf(peer);
          if (!Admit(conns, source)) {
            close(fd);  // over its share: the client tries again later
            continue;
          }
          Connection c;
          c.fd = fd;
          c.source = source;
          c.deadline_ms = now + options.tcp_idle_ms;
          c.active_ms = now;
          conns.push_back(std::move(c));
        }
      }
    }
    for (Connection& c : conns) close(c.fd);
  }
};

DnsServer::DnsServer(std::unique_ptr<Impl> impl, std::string address)
    : impl_(std::move(impl)), address_(std::move(address)) {}

DnsServer::~DnsServer() = default;

absl::StatusOr<std::unique_ptr<DnsServer>> DnsServer::Start(DnsServerOptions options, AnswerFn answer) {
  socklen_t len = 0;
  absl::StatusOr<sockaddr_storage> addr = ParseAddress(options.address, &len);
  if (!addr.ok()) return addr.status();
  auto impl = std::make_unique<Impl>();
  // Port 0: UDP picks one and TCP takes the same; if another process holds
  // that one for TCP, try another.
  const bool any_port = (addr->ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&*addr)->sin6_port
                                                     : reinterpret_cast<sockaddr_in*>(&*addr)->sin_port) == 0;
  absl::Status last;
  for (int attempt = 0; attempt < (any_port ? 10 : 1); ++attempt) {
    sockaddr_storage a = *addr;
    absl::StatusOr<int> udp = Bind(a, len, SOCK_DGRAM);
    if (!udp.ok()) return absl::Status(udp.status().code(), absl::StrCat("DNS on ", options.address, ": ",
                                                                         udp.status().message()));
    SetPort(&a, PortOf(*udp));
    absl::StatusOr<int> tcp = Bind(a, len, SOCK_STREAM);
    if (tcp.ok()) {
      impl->udp = *udp;
      impl->tcp = *tcp;
      break;
    }
    close(*udp);
    last = tcp.status();
  }
  if (impl->tcp < 0) {
    return absl::Status(last.code(), absl::StrCat("DNS on ", options.address, ": ", last.message()));
  }
  if (pipe2(impl->wake, O_CLOEXEC) != 0) return ErrnoToStatus(errno, "pipe2");
  const std::string host = options.address.substr(0, options.address.rfind(':'));
  std::string bound = absl::StrCat(host, ":", PortOf(impl->udp));
  impl->options = std::move(options);
  impl->answer = std::move(answer);
  Impl* raw = impl.get();
  impl->udp_thread = std::thread([raw] { raw->ServeUdp(); });
  impl->tcp_thread = std::thread([raw] { raw->ServeTcp(); });
  return std::unique_ptr<DnsServer>(new DnsServer(std::move(impl), std::move(bound)));
}

}  // namespace herd::master
