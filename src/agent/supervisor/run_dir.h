// A run's directory, ROOT/runs/RUN_ID/, and what the agent keeps in it so a
// restarted agent can carry on:
//
//   run.pb     the TaskRun (serialized v1::TaskRun), written when the run is
//              created; recovery needs its argv, env and restart policy
//   state      the agent's record of the run (key=value lines, see
//              RunState), rewritten atomically on every change
//   task.pid   written by herd-shim once the task has exec'd
//   exit       written by herd-shim when the task has ended
//   stdout, stderr   the task's output; shim.log  the shim's diagnostics
//   sandbox/   the task's working directory
//
// The directory outlives the run (for its logs) until the retention expires.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "agent/runtime/process.h"
#include "herd/v1/agent.pb.h"
#include "herd/v1/objects.pb.h"

namespace herd::agent {

// The agent's persisted record of one run.
struct RunState {
  v1::Task::Phase phase = v1::Task::STARTING;
  bool desired = true;    // false: being stopped
  bool terminal = false;  // ended for good
  bool removed = false;   // stopped and forgotten; only the logs remain
  int64_t removed_ms = 0; // wall time of removal (for log retention)
  int32_t restarts = 0;
  int32_t exit_code = 0;
  int32_t exit_signal = 0;
  std::string message;
  std::string last_exit;   // how the previous attempt ended ("exited with code 3")
  int64_t started_ms = 0;  // wall time the current/last attempt started
  int64_t backoff_ms = 0;  // the delay of the latest backoff (0: none yet)
  ProcessId shim;          // the current attempt's shim, once spawned
  // Attempts in a row that failed soon after starting (reset by a success or
  // an attempt that ran long): a crash loop once it reaches the agent's
  // threshold.
  int32_t quick_failures = 0;
  bool oom = false;      // the last attempt was killed by the OOM killer
  bool evicted = false;  // terminal because the agent evicted it (memory shortage)
};

std::string EncodeRunState(const RunState& state);
absl::StatusOr<RunState> DecodeRunState(absl::string_view text);

// Run ids become directory names: 1-200 characters of [A-Za-z0-9_.:-],
// not starting with '.'.
absl::Status ValidateRunId(absl::string_view run_id);

class RunDir {
 public:
  explicit RunDir(std::string path) : path_(std::move(path)) {}

  const std::string& path() const { return path_; }
  std::string File(absl::string_view name) const;
  std::string Sandbox() const { return File("sandbox"); }

  // Creates the directory and its sandbox (parents must exist).
  absl::Status Create() const;
  absl::Status WriteSpec(const v1::TaskRun& spec) const;
  absl::StatusOr<v1::TaskRun> ReadSpec() const;
  absl::Status WriteState(const RunState& state) const;
  absl::StatusOr<RunState> ReadState() const;
  // Removes the shim's task.pid and exit files of the previous attempt.
  absl::Status ClearAttempt() const;

 private:
  std::string path_;
};

// The environment a task runs with: its TaskRun env, then `extra` (from
// extensions, e.g. HERD_PORT_HTTP), then HERD_TASK_INDEX, HERD_JOB,
// HERD_RUN_ID, HERD_TASK_DIR (the sandbox), and PATH if unset.
std::map<std::string, std::string> TaskEnvironment(const v1::TaskRun& spec, const RunDir& dir,
                                                   const std::map<std::string, std::string>& extra = {});

// Replaces ${NAME} in `text` by vars[NAME] where NAME is known; everything
// else (unknown names, "$x", a lone "$") is left as it is.
std::string SubstituteVariables(absl::string_view text, const std::map<std::string, std::string>& vars);

// The task's working directory: the sandbox, or TaskRun.workdir relative to
// it (an absolute workdir is used as is). Creates it under the sandbox.
absl::StatusOr<std::string> PrepareWorkdir(const v1::TaskRun& spec, const RunDir& dir);

}  // namespace herd::agent
