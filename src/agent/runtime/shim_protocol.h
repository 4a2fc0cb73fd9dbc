// The contract between the agent and herd-shim: the files the shim writes in
// a run directory. Header-only and dependency-free so the shim can include it.
//
//   herd-shim RUN_DIR -- ARGV...
//
// RUN_DIR/task.pid  "TASK_PID TASK_START SHIM_PID SHIM_START\n", written
//                   (tmp + rename) once the task has exec'd. *_START is field
//                   22 of /proc/PID/stat (clock ticks since boot), which with
//                   the pid identifies a process across pid reuse.
// RUN_DIR/exit      one line, written (tmp + rename) after the task ended and
//                   its process group was killed, just before the shim exits:
//                     "exited CODE" | "signaled SIGNO" | "failed MESSAGE"
// RUN_DIR/stdout, RUN_DIR/stderr  the task's output (appended).
#pragma once

namespace herd::agent::shim {

inline constexpr char kTaskPidFile[] = "task.pid";
inline constexpr char kExitFile[] = "exit";
inline constexpr char kStdoutFile[] = "stdout";
inline constexpr char kStderrFile[] = "stderr";
// The shim's own diagnostics (its stderr).
inline constexpr char kShimLogFile[] = "shim.log";
// Prefix of the "failed" message when execvp() itself failed; such failures
// are permanent (a missing binary does not appear by retrying).
inline constexpr char kExecFailedPrefix[] = "exec failed: ";

}  // namespace herd::agent::shim
