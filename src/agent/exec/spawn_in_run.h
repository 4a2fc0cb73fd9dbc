// Running a command beside a task, inside its cgroups, namespaces, root,
// working directory and user, with its environment: what `herd exec` (Borg's
// borgssh) and command health checks need. The work is done by
// `herd-shim --enter` (runtime/shim_protocol.h), so the agent itself never
// joins a task's namespaces.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "agent/runtime/process.h"

namespace herd::agent {

struct InRunOptions {
  // herd-shim; empty: "herd-shim" next to the running executable.
  std::string shim_path;
  // The task to join (Supervisor::TaskOf). Its start time guards against a
  // reused pid.
  ProcessId task;
  std::vector<std::string> argv;  // argv[0] is looked up in the task's PATH
  // Added to (or replacing entries of) the task's environment, which is read
  // from /proc/PID/environ (the environment the task started with).
  std::map<std::string, std::string> env;
  // Working directory inside the task's root; empty: the task's own.
  std::string cwd;
};

// A command started by SpawnInRun. Its stdin is /dev/null; stdout and
// stderr are the read ends of pipes. It leads its own process group (pgid ==
// pid), which also holds the command when it runs in the task's pid
// namespace (the shim forks there).
struct InRunProcess {
  pid_t pid = 0;
  Fd pidfd;
  Fd stdout_fd;
  Fd stderr_fd;
};

// Starts the command. Errors: FAILED_PRECONDITION if the task is not running
// (any more), INVALID_ARGUMENT for an empty argv, INTERNAL otherwise.
absl::StatusOr<InRunProcess> SpawnInRun(const InRunOptions& options);

// How a command run in a task ended.
struct InRunResult {
  bool exited = false;  // false: killed by `signal`
  int exit_code = 0;
  int signal = 0;
  bool timed_out = false;  // killed (SIGKILL to its process group) at the deadline
  bool cancelled = false;  // killed because `output` returned false
};

// SpawnInRun, then carries its output to `output` (called with is_stderr and
// a chunk, on the calling thread; returning false kills the command) until
// it exits, killing it after `timeout_ms` (0: no limit). `output` may be
// empty (output discarded). `keep_going`, if given, is asked at least every
// 200ms; false kills the command (cancelled), e.g. when the client left.
// Exit codes 125-127 come from the shim when the command could not be
// started in the task (its reason is on stderr).
absl::StatusOr<InRunResult> RunInRun(const InRunOptions& options, int64_t timeout_ms,
                                     const std::function<bool(bool is_stderr, absl::string_view data)>& output,
                                     const std::function<bool()>& keep_going = nullptr);

}  // namespace herd::agent
