// One health probe each: TCP connect, HTTP GET, a command run in the task.
// Each returns within its timeout (plus a few milliseconds), or sooner when
// `cancel_fd` (an eventfd, or -1) becomes readable; they block the calling
// thread, so the health extension runs them on its own threads.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "agent/exec/spawn_in_run.h"

namespace herd::agent {

struct ProbeResult {
  bool healthy = false;
  std::string message;  // "HTTP 200 from GET /healthz", "connect to 127.0.0.1:20001: Connection refused"
};

// Healthy if a TCP connection to 127.0.0.1:`port` is accepted.
ProbeResult ProbeTcp(int32_t port, int64_t timeout_ms, int cancel_fd = -1);

// Healthy if GET `path` on 127.0.0.1:`port` (HTTP/1.0) answers with a status
// below 400. Only the status line is read.
ProbeResult ProbeHttp(int32_t port, const std::string& path, int64_t timeout_ms, int cancel_fd = -1);

// Healthy if the command (run beside the task through herd-shim --enter: in
// its cgroups, namespaces, directory and user, with its environment) exits 0.
// Killed with its process group at the timeout. The message quotes the
// start of its output.
ProbeResult ProbeCommand(const InRunOptions& options, int64_t timeout_ms, int cancel_fd = -1);

}  // namespace herd::agent
