// Low-level process plumbing for the agent: spawning a program with a clean
// environment, telling processes apart across pid reuse, pidfds for exit
// notification, signalling process groups, and reading what herd-shim wrote.
// Linux only.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "base/files.h"  // Fd, WriteFileAtomic

namespace herd::agent {


// A process as the kernel knows it: a pid alone may name a different process
// after the first one ended, so every check also compares the start time
// (field 22 of /proc/PID/stat, clock ticks since boot), which differs for
// any later process with the same pid (and after a reboot).
struct ProcessId {
  pid_t pid = 0;
  uint64_t start_time = 0;

  bool known() const { return pid > 0; }
  bool operator==(const ProcessId&) const = default;
};

// What /proc/PID/stat says about a pid right now.
struct ProcStat {
  char state = '?';  // R, S, D, Z (zombie), ...
  uint64_t start_time = 0;
};
absl::StatusOr<ProcStat> ReadProcStat(pid_t pid);

// The identity of `pid` as of now (NOT_FOUND if there is no such process).
absl::StatusOr<ProcessId> IdentifyProcess(pid_t pid);

// True if `id` names a process that exists, has not exited (zombies count as
// exited) and is the same process (start time matches).
bool IsRunning(const ProcessId& id);

// pidfd_open(2): an fd that becomes readable when the process exits. Works
// for any process, not only our children.
absl::StatusOr<Fd> PidfdOpen(pid_t pid);

// Opens a pidfd for `id` and then re-checks the identity, so the fd is known
// to refer to that very process (not a later one with the same pid).
// NOT_FOUND if the process is gone or the pid now names another process.
absl::StatusOr<Fd> PidfdOpenChecked(const ProcessId& id);

// True once the process behind `pidfd` has exited (a non-blocking poll).
bool PidfdExited(int pidfd);

// Reaps the process behind `pidfd` if it is our child and has exited.
// ECHILD (an adopted process, reaped by its own parent) and "still running"
// are not errors. Going through the pidfd (not the pid) can never reap an
// unrelated child that reused the pid.
void ReapIfChild(int pidfd);

// kill(-pgid, sig). ESRCH (group already gone) is reported as NOT_FOUND.
absl::Status SignalProcessGroup(pid_t pgid, int sig);

struct SpawnOptions {
  std::string path;                          // executable, absolute (no PATH lookup)
  std::vector<std::string> argv;             // argv[0] included
  std::map<std::string, std::string> env;    // the whole environment
  std::string cwd;                           // empty: inherit
  std::string stdout_path;                   // appended; empty: /dev/null
  std::string stderr_path;                   // appended; empty: /dev/null
  // Instead of the paths: these descriptors (e.g. pipes) become stdout/stderr.
  int stdout_fd = -1;
  int stderr_fd = -1;
  // The program leads a new process group (so all it starts can be killed).
  bool own_process_group = false;
};

// herd-shim next to the running executable (the agent's, or a test's):
// where the shim is looked for when no path is configured.
std::string DefaultShimPath();

// Starts a program (posix_spawn) with stdin from /dev/null, every fd above 2
// closed, and the signal mask and dispositions reset. Returns once the
// program has exec'd; a chdir or exec failure is returned as an error
// (nothing is left running then). Safe to call from a multi-threaded process.
absl::StatusOr<pid_t> Spawn(const SpawnOptions& options);

// How a task attempt ended, as recorded by herd-shim in RUN_DIR/exit.
struct ExitStatus {
  enum class Kind { kExited, kSignaled, kFailed };
  Kind kind = Kind::kFailed;
  int exit_code = 0;   // kExited
  int signal = 0;      // kSignaled
  std::string message; // kFailed: why the task could not run
  // A failure that restarting cannot fix (exec failed: missing binary, ...).
  bool permanent = false;
  // The kernel's OOM killer ended it: it used more memory than its limit
  // (set by the cgroup extension, which reads the cgroup's OOM count).
  bool oom = false;
  // Set when the agent itself ended the attempt (unhealthy, machine short of
  // memory), or the shim did because the machine's lease expired: said
  // instead of the bare signal.
  std::string killed_because;
  // herd-shim stopped the task (or did not start it) because the machine's
  // lease from the master had expired (an at-most-once run; the exit file's
  // "lease-expired WHY" line).
  bool lease_expired = false;

  bool success() const { return kind == Kind::kExited && exit_code == 0; }
  // "exited with code 3", "killed by signal 9 (SIGKILL)", or the message;
  // "out of memory: ..." or the agent's reason first when known.
  std::string Describe() const;
  // Only how the process ended.
  std::string DescribeBare() const;
};

// Parses the shim's exit record: its first line ("exited 3", "signaled 9",
// "failed MSG"), then an optional "lease-expired WHY" line.
absl::StatusOr<ExitStatus> ParseExitLine(absl::string_view line);
// Reads RUN_DIR/exit. NOT_FOUND if the shim has not written it.
absl::StatusOr<ExitStatus> ReadExitFile(const std::string& run_dir);

// What the shim wrote to RUN_DIR/task.pid.
struct TaskPidRecord {
  ProcessId task;
  ProcessId shim;
};
absl::StatusOr<TaskPidRecord> ParseTaskPid(absl::string_view text);
// NOT_FOUND if the shim has not written it (yet).
absl::StatusOr<TaskPidRecord> ReadTaskPidFile(const std::string& run_dir);

// The whole of a (small) file. Writing one is herd::WriteFileAtomic
// (base/files.h).
absl::StatusOr<std::string> ReadFile(const std::string& path);

// "SIGKILL"-style name of a signal number ("SIG37" if unnamed).
std::string SignalName(int sig);

}  // namespace herd::agent
