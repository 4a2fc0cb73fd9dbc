#include "agent/runtime/process.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <limits.h>
#include <unistd.h>

#include <cstdlib>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "agent/runtime/shim_protocol.h"
#include "base/errno_status.h"

namespace herd::agent {
namespace {


}  // namespace

std::string DefaultShimPath() {
  char buf[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return "herd-shim";
  std::string exe(buf, static_cast<size_t>(n));
  return exe.substr(0, exe.rfind('/') + 1) + "herd-shim";
}

absl::StatusOr<ProcStat> ReadProcStat(pid_t pid) {
  if (pid <= 0) return absl::InvalidArgumentError("bad pid");
  std::string path = absl::StrCat("/proc/", pid, "/stat");
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoToStatus(errno, path);
  char buf[1024];
  ssize_t n = read(fd, buf, sizeof(buf) - 1);
  int err = errno;
  close(fd);
  // A process that vanished between open and read gives ESRCH.
  if (n <= 0) return ErrnoToStatus(n < 0 ? err : ESRCH, path);
  absl::string_view text(buf, static_cast<size_t>(n));
  // comm (field 2) may hold spaces and parentheses: parse after the last ')'.
  size_t close_paren = text.rfind(')');
  if (close_paren == absl::string_view::npos) return absl::InternalError("malformed " + path);
  std::vector<absl::string_view> fields =
      absl::StrSplit(text.substr(close_paren + 1), ' ', absl::SkipEmpty());
  // fields[0] is field 3 (state); field 22 (starttime) is fields[19].
  ProcStat stat;
  if (fields.size() < 20 || fields[0].empty() || !absl::SimpleAtoi(fields[19], &stat.start_time)) {
    return absl::InternalError("malformed " + path);
  }
  stat.state = fields[0][0];
  return stat;
}

absl::StatusOr<ProcessId> IdentifyProcess(pid_t pid) {
  absl::StatusOr<ProcStat> stat = ReadProcStat(pid);
  if (!stat.ok()) return stat.status();
  return ProcessId{pid, stat->start_time};
}

bool IsRunning(const ProcessId& id) {
  if (!id.known()) return false;
  absl::StatusOr<ProcStat> stat = ReadProcStat(id.pid);
  return stat.ok() && stat->start_time == id.start_time && stat->state != 'Z' && stat->state != 'X';
}

absl::StatusOr<Fd> PidfdOpen(pid_t pid) {
  int fd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  if (fd < 0) return ErrnoToStatus(errno, absl::StrCat("pidfd_open(", pid, ")"));
  // pidfds are created O_CLOEXEC by the kernel.
  return Fd(fd);
}

absl::StatusOr<Fd> PidfdOpenChecked(const ProcessId& id) {
  absl::StatusOr<Fd> fd = PidfdOpen(id.pid);
  if (!fd.ok()) return fd.status();
  // The pid was `id` when we read its start time after opening, and `id`
  // already existed before (we learned it earlier), so the fd is `id`'s.
  absl::StatusOr<ProcStat> stat = ReadProcStat(id.pid);
  if (!stat.ok() || stat->start_time != id.start_time) {
    return absl::NotFoundError(absl::StrCat("pid ", id.pid, " is no longer the recorded process"));
  }
  return fd;
}

bool PidfdExited(int pidfd) {
  struct pollfd p = {pidfd, POLLIN, 0};
  return poll(&p, 1, 0) > 0;
}

void ReapIfChild(int pidfd) {
  siginfo_t info;
  while (waitid(P_PIDFD, static_cast<id_t>(pidfd), &info, WEXITED | WNOHANG) < 0 && errno == EINTR) {
  }
}

absl::Status SignalProcessGroup(pid_t pgid, int sig) {
  if (pgid <= 1) return absl::InvalidArgumentError(absl::StrCat("refusing to signal group ", pgid));
  if (kill(-pgid, sig) != 0) return ErrnoToStatus(errno, absl::StrCat("kill(-", pgid, ", ", sig, ")"));
  return absl::OkStatus();
}

absl::StatusOr<pid_t> Spawn(const SpawnOptions& options) {
  if (options.argv.empty()) return absl::InvalidArgumentError("empty argv");
  if (options.path.empty() || options.path[0] != '/') {
    return absl::InvalidArgumentError("spawn path must be absolute: " + options.path);
  }
  // posix_spawn (vfork-like in glibc: no page table copy, and it reports
  // exec failures) rather than fork: starts stay cheap in a large agent.
  std::vector<std::string> env_strings;
  env_strings.reserve(options.env.size());
  for (const auto& [key, value] : options.env) env_strings.push_back(absl::StrCat(key, "=", value));
  std::vector<char*> argv;
  for (const std::string& a : options.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (const std::string& e : env_strings) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);

  // posix_spawn cannot tell which step failed; check the directory first
  // so the common mistake gets a clear message.
  if (!options.cwd.empty()) {
    struct stat st;
    if (stat(options.cwd.c_str(), &st) != 0) return ErrnoToStatus(errno, absl::StrCat("chdir ", options.cwd));
    if (!S_ISDIR(st.st_mode)) return ErrnoToStatus(ENOTDIR, absl::StrCat("chdir ", options.cwd));
  }
  const char* out = options.stdout_path.empty() ? "/dev/null" : options.stdout_path.c_str();
  const char* err = options.stderr_path.empty() ? "/dev/null" : options.stderr_path.c_str();
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  if (options.stdout_fd >= 0) {
    posix_spawn_file_actions_adddup2(&actions, options.stdout_fd, 1);
  } else {
    posix_spawn_file_actions_addopen(&actions, 1, out, O_WRONLY | O_CREAT | O_APPEND, 0600);
  }
  if (options.stderr_fd >= 0) {
    posix_spawn_file_actions_adddup2(&actions, options.stderr_fd, 2);
  } else {
    posix_spawn_file_actions_addopen(&actions, 2, err, O_WRONLY | O_CREAT | O_APPEND, 0600);
  }
  if (!options.cwd.empty()) posix_spawn_file_actions_addchdir_np(&actions, options.cwd.c_str());
  posix_spawn_file_actions_addclosefrom_np(&actions, 3);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &all);
  short flags = POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF;
  if (options.own_process_group) {
    posix_spawnattr_setpgroup(&attr, 0);
    flags |= POSIX_SPAWN_SETPGROUP;
  }
  posix_spawnattr_setflags(&attr, flags);
  pid_t pid = 0;
  int rc = posix_spawn(&pid, options.path.c_str(), &actions, &attr, argv.data(), envp.data());
  posix_spawnattr_destroy(&attr);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) return ErrnoToStatus(rc, absl::StrCat("spawn ", options.path));
  return pid;
}

std::string SignalName(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  if (abbrev == nullptr) return absl::StrCat("SIG", sig);
  return absl::StrCat("SIG", abbrev);
}

std::string ExitStatus::Describe() const {
  std::string bare = DescribeBare();
  if (!killed_because.empty()) return absl::StrCat(killed_because, " (", bare, ")");
  if (oom) return absl::StrCat("out of memory: killed by the kernel's OOM killer for exceeding its memory limit (", bare, ")");
  return bare;
}

std::string ExitStatus::DescribeBare() const {
  switch (kind) {
    case Kind::kExited:
      return absl::StrCat("exited with code ", exit_code);
    case Kind::kSignaled:
      return absl::StrCat("killed by signal ", signal, " (", SignalName(signal), ")");
    case Kind::kFailed:
      return message;
  }
  return message;
}

namespace {
absl::StatusOr<ExitStatus> ParseFirstExitLine(absl::string_view line);
}  // namespace

absl::StatusOr<ExitStatus> ParseExitLine(absl::string_view text) {
  text = absl::StripTrailingAsciiWhitespace(text);
  absl::string_view line = text, more;
  if (size_t nl = text.find('\n'); nl != absl::string_view::npos) {
    line = absl::StripTrailingAsciiWhitespace(text.substr(0, nl));
    more = text.substr(nl + 1);
  }
  absl::StatusOr<ExitStatus> status = ParseFirstExitLine(line);
  if (!status.ok()) return status;
  for (absl::string_view extra : absl::StrSplit(more, '\n', absl::SkipWhitespace())) {
    extra = absl::StripTrailingAsciiWhitespace(extra);
    if (absl::ConsumePrefix(&extra, shim::kLeaseExpiredLine)) {
      status->lease_expired = true;
      status->killed_because = absl::StrCat("lease expired: ", extra);
    }
    // Other lines: from a newer shim; ignored.
  }
  return status;
}

namespace {
absl::StatusOr<ExitStatus> ParseFirstExitLine(absl::string_view line) {
  ExitStatus status;
  absl::string_view rest = line;
  if (absl::ConsumePrefix(&rest, "exited ")) {
    status.kind = ExitStatus::Kind::kExited;
    if (absl::SimpleAtoi(rest, &status.exit_code)) return status;
  } else if (absl::ConsumePrefix(&rest, "signaled ")) {
    status.kind = ExitStatus::Kind::kSignaled;
    if (absl::SimpleAtoi(rest, &status.signal)) return status;
  } else if (absl::ConsumePrefix(&rest, "failed ")) {
    status.kind = ExitStatus::Kind::kFailed;
    status.exit_code = 127;
    status.message = std::string(rest);
    status.permanent = absl::StartsWith(rest, shim::kExecFailedPrefix);
    return status;
  }
  return absl::DataLossError(absl::StrCat("malformed exit record: \"", line, "\""));
}
}  // namespace

absl::StatusOr<ExitStatus> ReadExitFile(const std::string& run_dir) {
  absl::StatusOr<std::string> text = ReadFile(run_dir + "/" + shim::kExitFile);
  if (!text.ok()) return text.status();
  return ParseExitLine(*text);
}

absl::StatusOr<TaskPidRecord> ParseTaskPid(absl::string_view text) {
  std::vector<absl::string_view> f =
      absl::StrSplit(absl::StripAsciiWhitespace(text), ' ', absl::SkipEmpty());
  TaskPidRecord r;
  if (f.size() != 4 || !absl::SimpleAtoi(f[0], &r.task.pid) ||
      !absl::SimpleAtoi(f[1], &r.task.start_time) || !absl::SimpleAtoi(f[2], &r.shim.pid) ||
      !absl::SimpleAtoi(f[3], &r.shim.start_time) || r.task.pid <= 0 || r.shim.pid <= 0) {
    return absl::DataLossError(absl::StrCat("malformed task.pid: \"", text, "\""));
  }
  return r;
}

absl::StatusOr<TaskPidRecord> ReadTaskPidFile(const std::string& run_dir) {
  absl::StatusOr<std::string> text = ReadFile(run_dir + "/" + shim::kTaskPidFile);
  if (!text.ok()) return text.status();
  return ParseTaskPid(*text);
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoToStatus(errno, path);
  Fd owned(fd);
  std::string out;
  char buf[8192];
  while (true) {
    ssize_t n = read(fd, buf, sizeof(buf));
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoToStatus(errno, path);
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

}  // namespace herd::agent
