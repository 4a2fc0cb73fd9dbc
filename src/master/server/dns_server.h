// The master's DNS responder (herd master --dns HOST:PORT, docs/naming.md):
// answers for tasks' names from the cell state over UDP and TCP, on one
// port. DNS has no TLS, so this is the one port of a cell that does not
// speak it: it serves only names (what Resolve tells any user), listens on
// loopback unless told otherwise, and is off without the flag.
//
// Bounded: one thread for UDP, one for TCP; at most `max_tcp_connections`
// TCP connections (more are closed at once), each closed after
// `tcp_idle_ms` without a complete query or `max_queries_per_connection`
// queries; a TCP message is at most 65535 bytes by its framing. Over UDP,
// where a source address can be forged, each source (an IPv4 address, an
// IPv6 /64) gets at most `udp_per_source_per_second` answers (bursts of
// twice that); beyond it queries are dropped unanswered, so the port cannot
// be used to flood a third party with answers bigger than the questions
// (a resolver retries, or asks over TCP, which cannot be forged).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>

#include "absl/status/statusor.h"
#include "master/core/naming/dns_wire.h"

namespace herd::master {

struct DnsServerOptions {
  std::string address = "127.0.0.1:5353";  // port 0: pick one (address() says which)
  int max_tcp_connections = 64;
  // One source address holds at most this many TCP connections; when all
  // are taken, a source with fewer takes one from the source holding the
  // most (its least recently active), so one client cannot starve the rest.
  int max_tcp_per_source = 8;
  int64_t tcp_idle_ms = 5'000;
  int max_queries_per_connection = 100;
  int udp_per_source_per_second = 200;
};

// Token buckets by UDP source (see above). Bounded: at most kMaxSources
// tracked; when full, the idle ones go, and if none is idle the table starts
// over (every source gets a fresh burst; memory does not grow).
class SourceLimiter {
 public:
  static constexpr size_t kMaxSources = 65'536;
  // `per_second` answers a second, bursts of twice that; 0: no limit.
  explicit SourceLimiter(int per_second) : rate_(per_second), burst_(2.0 * per_second) {}
  // Whether `source` may have an answer at `now_ms` (a monotonic clock).
  bool Allow(const std::string& source, double now_ms);
  size_t tracked() const { return buckets_.size(); }

 private:
  struct Bucket {
    double tokens;
    double last_ms;
  };
  void Prune(double now_ms);
  const double rate_;
  const double burst_;
  std::unordered_map<std::string, Bucket> buckets_;
};

class DnsServer {
 public:
  using AnswerFn = dns::AnswerFn;
  // Binds UDP and TCP on the address and starts serving `answer` (called on
  // the server's threads).
  static absl::StatusOr<std::unique_ptr<DnsServer>> Start(DnsServerOptions options, AnswerFn answer);
  ~DnsServer();  // stops serving
  const std::string& address() const { return address_; }

  struct Impl;

 private:
  explicit DnsServer(std::unique_ptr<Impl> impl, std::string address);
  std::unique_ptr<Impl> impl_;
  std::string address_;
};

}  // namespace herd::master
