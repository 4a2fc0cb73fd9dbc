#include "agent/exec/spawn_in_run.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <map>
#include <thread>

#include "absl/strings/str_cat.h"
#include "agent/runtime/shim_protocol.h"
#include "base/clock.h"
#include "base/errno_status.h"

namespace herd::agent {

absl::StatusOr<InRunProcess> SpawnInRun(const InRunOptions& options) {
  if (options.argv.empty()) return absl::InvalidArgumentError("empty command");
  if (!IsRunning(options.task)) {
    return absl::FailedPreconditionError(absl::StrCat("task ", options.task.pid, " is not running"));
  }
  // The task's environment as it started, then the caller's additions.
  // Right after the task's exec the kernel may not have its new environment
  // in place yet (/proc/PID/environ reads empty); every task has HERD_*
  // variables, so empty means "not yet": wait for it briefly.
  absl::StatusOr<std::string> environ = ReadFile(absl::StrCat("/proc/", options.task.pid, "/environ"));
  for (int i = 0; i < 100 && environ.ok() && environ->empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    environ = ReadFile(absl::StrCat("/proc/", options.task.pid, "/environ"));
  }
  if (!environ.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot read the environment of task ", options.task.pid, ": ", environ.status().message()));
  }
  std::map<std::string, std::string> env;
  for (size_t start = 0; start < environ->size();) {
    size_t end = environ->find('\0', start);
    if (end == std::string::npos) end = environ->size();
    std::string entry = environ->substr(start, end - start);
    size_t eq = entry.find('=');
    if (eq != std::string::npos && eq > 0) env[entry.substr(0, eq)] = entry.substr(eq + 1);
    start = end + 1;
  }
  for (const auto& [k, v] : options.env) env[k] = v;

  const std::string shim = options.shim_path.empty() ? DefaultShimPath() : options.shim_path;
  SpawnOptions so;
  so.path = shim;
  so.argv = {shim, shim::kOptEnter, absl::StrCat(options.task.pid)};
  if (options.task.start_time != 0) {
    so.argv.insert(so.argv.end(), {shim::kOptStartTime, absl::StrCat(options.task.start_time)});
  }
  if (!options.cwd.empty()) so.argv.insert(so.argv.end(), {shim::kOptCwd, options.cwd});
  so.argv.push_back("--");
  so.argv.insert(so.argv.end(), options.argv.begin(), options.argv.end());
  so.env = std::move(env);

  int out[2], err[2];
  if (pipe2(out, O_CLOEXEC) != 0) return ErrnoToStatus(errno, "pipe");
  Fd out_r(out[0]), out_w(out[1]);
  if (pipe2(err, O_CLOEXEC) != 0) return ErrnoToStatus(errno, "pipe");
  Fd err_r(err[0]), err_w(err[1]);
  so.stdout_fd = out_w.get();
  so.stderr_fd = err_w.get();
  // Its own process group: a timeout kills the command and what it started.
  so.own_process_group = true;
  absl::StatusOr<pid_t> pid = Spawn(so);
  if (!pid.ok()) return pid.status();

  InRunProcess p;
  p.pid = *pid;
  absl::StatusOr<Fd> pidfd = PidfdOpen(*pid);
  if (!pidfd.ok()) {
    kill(*pid, SIGKILL);
    waitpid(*pid, nullptr, 0);
    return pidfd.status();
  }
  p.pidfd = *std::move(pidfd);
  p.stdout_fd = std::move(out_r);
  p.stderr_fd = std::move(err_r);
  return p;
}

absl::StatusOr<InRunResult> RunInRun(const InRunOptions& options, int64_t timeout_ms,
                                     const std::function<bool(bool is_stderr, absl::string_view data)>& output,
                                     const std::function<bool()>& keep_going) {
  absl::StatusOr<InRunProcess> spawned = SpawnInRun(options);
  if (!spawned.ok()) return spawned.status();
  InRunProcess& p = *spawned;
  InRunResult result;
  const int64_t deadline = timeout_ms > 0 ? SteadyNowMs() + timeout_ms : 0;
  bool killed = false;
  auto kill_all = [&] {
    if (killed) return;
    killed = true;
    kill(-p.pid, SIGKILL);  // the group: the shim, the command and its children
    kill(p.pid, SIGKILL);
  };
  Fd* pipes[2] = {&p.stdout_fd, &p.stderr_fd};
  for (Fd* fd : pipes) fcntl(fd->get(), F_SETFL, O_NONBLOCK);
  std::string buf(64 << 10, '\0');
  bool exited = false;
  // Until the command has exited and both pipes are at EOF (a child that
  // keeps a pipe open after the command exited is bounded by the deadline,
  // or by a short grace without one).
  int64_t drain_until = 0;
  while (true) {
    struct pollfd fds[3];
    int n = 0;
    int which[3];
    for (int s = 0; s < 2; ++s) {
      if (pipes[s]->valid()) {
        which[n] = s;
        fds[n++] = {pipes[s]->get(), POLLIN, 0};
      }
    }
    if (!exited) {
      which[n] = 2;
      fds[n++] = {p.pidfd.get(), POLLIN, 0};
    }
    if (n == 0) break;
    const int64_t now = SteadyNowMs();
    if (deadline > 0 && now >= deadline && !killed) {
      result.timed_out = true;
      kill_all();
    }
    if (keep_going && !killed && !keep_going()) {
      result.cancelled = true;
      kill_all();
    }
    if (exited && drain_until == 0) drain_until = now + (killed ? 500 : 2000);
    if (exited && now >= drain_until) break;
    int64_t wait = keep_going ? 200 : 1000;
    if (deadline > 0 && !killed) wait = std::min<int64_t>(wait, deadline - now);
    if (drain_until > 0) wait = std::min<int64_t>(wait, drain_until - now);
    int r = poll(fds, static_cast<nfds_t>(n), static_cast<int>(std::max<int64_t>(0, wait)));
    if (r < 0 && errno != EINTR) return ErrnoToStatus(errno, "poll");
    for (int i = 0; i < n && r > 0; ++i) {
      if (fds[i].revents == 0) continue;
      if (which[i] == 2) {
        // Ended (unreaped, so its pid and group id stay reserved): what it
        // left running in its group goes with it, and the pipes reach EOF.
        exited = true;
        kill(-p.pid, SIGKILL);
        continue;
      }
      Fd& fd = *pipes[which[i]];
      ssize_t got = read(fd.get(), buf.data(), buf.size());
      if (got > 0) {
        if (output && !killed && !output(which[i] == 1, absl::string_view(buf.data(), static_cast<size_t>(got)))) {
          result.cancelled = true;
          kill_all();
        }
      } else if (got == 0 || (errno != EAGAIN && errno != EINTR)) {
        fd.Reset();
      }
    }
  }
  int status = 0;
  while (waitpid(p.pid, &status, 0) < 0) {
    if (errno != EINTR) return ErrnoToStatus(errno, "waitpid");
  }
  if (WIFSIGNALED(status)) {
    result.signal = WTERMSIG(status);
  } else {
    result.exited = true;
    result.exit_code = WEXITSTATUS(status);
  }
  return result;
}

}  // namespace herd::agent
