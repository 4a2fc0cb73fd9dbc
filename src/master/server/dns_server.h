// The master's DNS responder (herd master --dns HOST:PORT, docs/naming.md):
// answers for tasks' names from the cell state over UDP and TCP, on one
// port. DNS has no TLS, so this is the one port of a cell that does not
// speak it: it serves only names (what Resolve tells any user), listens on
// loopback unless told otherwise, and is off without the flag.
//
// Bounded: one thread for UDP, one for TCP; at most `max_tcp_connections`
// TCP connections (more are closed at once), each closed after
// `tcp_idle_ms` without a complete query or `max_queries_per_connection`
// queries; a TCP message is at most 65535 bytes by its framing.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "master/core/naming/dns_wire.h"

namespace herd::master {

struct DnsServerOptions {
  std::string address = "127.0.0.1:5353";  // port 0: pick one (address() says which)
  int max_tcp_connections = 64;
  int64_t tcp_idle_ms = 5'000;
  int max_queries_per_connection = 100;
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
