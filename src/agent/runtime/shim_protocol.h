// The contract between the agent and herd-shim: its command line and the
// files it writes in a run directory. Header-only and dependency-free so the
// shim can include it.
//
//   herd-shim RUN_DIR [OPTIONS] -- ARGV...
//
// Options (all optional; an older agent passing none gets the plain shim):
//   --cgroup FILE      the task joins this cgroup (FILE is a cgroup.procs);
//                      repeated once per hierarchy on cgroup v1
//   --log-max-bytes N  rotate stdout/stderr when a file would pass N bytes
//                      (0: never); the shim reads the task's output from
//                      pipes and writes the files itself
//   --log-keep K       rotated files kept per stream: stdout.1 .. stdout.K
//   --namespaces       own mount, pid and uts namespaces (the task is pid 1
//                      of its pid namespace; /proc shows only its processes)
//   --hostname NAME    the uts namespace's host name (with --namespaces)
//   --root DIR         the task's root directory (with --namespaces):
//                      DIR becomes / (pivot_root); /proc and /dev are
//                      mounted in it, DIR/proc and DIR/dev must exist
//   --bind SRC DST     with --root: SRC (a directory of the machine, e.g. the
//                      run's sandbox) is bind-mounted on DIR/DST (which must
//                      exist) in the task's mount namespace; repeatable
//   --cwd DIR          working directory inside the task's root (default:
//                      the shim's own working directory; needed with --root)
//   --uid N, --gid N   the task runs as this user and group (no
//                      supplementary groups)
//   --lease-file FILE  at-most-once runs: the machine's lease (below). The
//                      shim reads it before starting the task (an expired
//                      lease: the task is not started) and every
//                      kLeaseCheckMs while it runs; once the lease has
//                      expired (or the file cannot be read, or is from an
//                      earlier boot) it stops the task: SIGTERM to its
//                      process group, SIGKILL (and cgroup.kill on cgroup v2)
//                      after --lease-grace-ms.
//   --lease-grace-ms N the grace period of that stop
//
//   herd-shim --enter TASK_PID [--start-time T] [--cwd DIR] -- ARGV...
//
// Runs ARGV beside a running task (herd exec, command health checks): joins
// each of the task's cgroups (/proc/TASK_PID/cgroup, hierarchies found in
// /proc/self/mountinfo, v1 and v2) that differs from the shim's own, enters
// its uts, pid and mount namespaces where they differ from ours, its root
// and working directory (or DIR inside its root), and its uid and gid
// (/proc/TASK_PID/status; no supplementary groups), then execs ARGV with the
// shim's stdio and environment. With --start-time (field 22 of
// /proc/TASK_PID/stat) it refuses a process that merely reused the pid. A
// pid namespace applies to children only, so when it differs the shim forks,
// forwards SIGTERM/SIGINT/SIGHUP/SIGQUIT/SIGUSR1/2, and exits as the child did
// (a signal death is re-raised); the child dies with the shim (PDEATHSIG).
// Exit status: ARGV's, or 125 if entering failed (reason on stderr), 126 if
// ARGV is not executable, 127 if it was not found.
//
// RUN_DIR/task.pid  "TASK_PID TASK_START SHIM_PID SHIM_START\n", written
//                   (tmp + rename) once the task has exec'd. *_START is field
//                   22 of /proc/PID/stat (clock ticks since boot), which with
//                   the pid identifies a process across pid reuse.
// RUN_DIR/exit      one line, written (tmp + rename) after the task ended and
//                   its process group was killed, just before the shim exits:
//                     "exited CODE" | "signaled SIGNO" | "failed MESSAGE"
//                   A stop for an expired lease adds a second line
//                   "lease-expired WHY" (e.g. "signaled 15\nlease-expired no
//                   contact with the master for 3012 ms"); a task not
//                   started for it is "failed the task was not started".
// RUN_DIR/stdout, RUN_DIR/stderr  the task's output (appended), with
//                   rotated predecessors stdout.1 (newest) .. stdout.K.
//
// ROOT/lease        the machine's lease for at-most-once runs, written by
//                   the agent (tmp + rename) whenever a poll of the master
//                   renews it: "DEADLINE_MS CONTACT_MS BOOT_ID\n", where
//                   DEADLINE_MS is the CLOCK_MONOTONIC time (ms) the lease
//                   runs out, CONTACT_MS the contact with the master it
//                   was renewed from, and BOOT_ID the kernel's
//                   /proc/sys/kernel/random/boot_id (CLOCK_MONOTONIC starts
//                   over when the machine boots).
#pragma once

#include <cstdio>
#include <cstdlib>
#include <cstring>

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
// Prefix of the "failed" message when setting the task up failed before
// exec (joining its cgroup, namespaces, root, user): not permanent.
inline constexpr char kSetupFailedPrefix[] = "setup failed: ";

inline constexpr char kOptCgroup[] = "--cgroup";
inline constexpr char kOptLogMaxBytes[] = "--log-max-bytes";
inline constexpr char kOptLogKeep[] = "--log-keep";
inline constexpr char kOptNamespaces[] = "--namespaces";
// No seccomp filter and the capability bounding set kept (task_hardening.h).
inline constexpr char kOptUnconfined[] = "--unconfined";
inline constexpr char kOptHostname[] = "--hostname";
inline constexpr char kOptRoot[] = "--root";
inline constexpr char kOptCwd[] = "--cwd";
// --cwd-base DIR: --cwd is relative to DIR (the sandbox), opened by root
// beneath DIR without following any symlink, and entered (fchdir) once the
// task's uid is taken: DIR's parents need not let the task pass.
inline constexpr char kOptCwdBase[] = "--cwd-base";
inline constexpr char kOptBind[] = "--bind";
inline constexpr char kOptEnter[] = "--enter";
inline constexpr char kOptStartTime[] = "--start-time";
// herd-shim --pause: an alloc's placeholder (the task an alloc's run
// executes): waits for SIGTERM or SIGINT, then exits 0.
inline constexpr char kOptPause[] = "--pause";
// herd-shim --enter's exit codes when ARGV did not run.
inline constexpr int kEnterFailedExit = 125;
inline constexpr int kEnterNotExecutableExit = 126;
inline constexpr int kEnterNotFoundExit = 127;
inline constexpr char kOptUid[] = "--uid";
inline constexpr char kOptGid[] = "--gid";
inline constexpr char kOptLeaseFile[] = "--lease-file";
inline constexpr char kOptLeaseGraceMs[] = "--lease-grace-ms";

// At-most-once runs (see --lease-file).
inline constexpr char kLeaseFile[] = "lease";  // in the agent's root directory
inline constexpr char kBootIdPath[] = "/proc/sys/kernel/random/boot_id";
inline constexpr long long kLeaseCheckMs = 100;
// The exit file's second line after a stop for an expired lease.
inline constexpr char kLeaseExpiredLine[] = "lease-expired ";
inline constexpr char kNotStartedMessage[] = "the task was not started";

struct Lease {
  long long deadline_ms = 0;  // CLOCK_MONOTONIC
  long long contact_ms = 0;
  char boot_id[64] = {0};
};

// Parses the lease file's text; false if it is malformed.
inline bool ParseLease(const char* text, Lease* out) {
  char boot[64] = {0};
  long long deadline = 0, contact = 0;
  if (std::sscanf(text, "%lld %lld %63s", &deadline, &contact, boot) != 3) return false;
  if (deadline <= 0 || contact > deadline) return false;
  out->deadline_ms = deadline;
  out->contact_ms = contact;
  std::memcpy(out->boot_id, boot, sizeof(boot));
  return true;
}

}  // namespace herd::agent::shim
