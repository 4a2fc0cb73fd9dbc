// herd-shim: the per-run parent of a task (like containerd-shim or conmon).
//
//   herd-shim RUN_DIR -- ARGV...
//
// The agent starts one shim per attempt of a run, with the task's environment
// and working directory. The shim leaves the agent's session, starts the task
// in its own process group, records its identity in RUN_DIR/task.pid, waits
// for it and records how it ended in RUN_DIR/exit (see shim_protocol.h).
// When the task exits, the rest of its process group and any orphans it left
// (the shim is a child subreaper) are killed, so the end of an attempt means
// all of its processes are gone. The shim outlives the agent, so tasks keep
// running while the agent is down and a restarted agent learns from
// RUN_DIR/exit how a task ended in the meantime.
//
// Deliberately tiny: libc only (linked statically), no threads, nothing but
// async-signal-safe calls between fork and exec.
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>

#include "agent/runtime/shim_protocol.h"

namespace {

namespace shim = herd::agent::shim;

std::string g_run_dir;

std::string RunPath(const char* name) { return g_run_dir + "/" + name; }

void Diag(const char* what, int err) {
  fprintf(stderr, "herd-shim %s: %s: %s\n", g_run_dir.c_str(), what, strerror(err));
}

bool WriteAll(int fd, const char* p, size_t n) {
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

// Writes RUN_DIR/name as a whole: a reader sees the old file or the new one.
bool WriteAtomic(const char* name, const std::string& text) {
  std::string tmp = RunPath((std::string(".") + name + ".tmp").c_str());
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    Diag("open tmp file", errno);
    return false;
  }
  bool ok = WriteAll(fd, text.data(), text.size());
  int err = errno;
  close(fd);
  if (!ok) {
    Diag("write tmp file", err);
    return false;
  }
  if (rename(tmp.c_str(), RunPath(name).c_str()) != 0) {
    Diag("rename", errno);
    return false;
  }
  return true;
}

// Field 22 of /proc/PID/stat (start time in clock ticks since boot); 0 if
// unreadable. The comm field may contain spaces and ')', so parse after the
// last ')'.
unsigned long long StartTime(pid_t pid) {
  char path[64];
  snprintf(path, sizeof(path), "/proc/%d/stat", static_cast<int>(pid));
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char buf[1024];
  ssize_t n = read(fd, buf, sizeof(buf) - 1);
  close(fd);
  if (n <= 0) return 0;
  buf[n] = '\0';
  char* p = strrchr(buf, ')');
  if (p == nullptr) return 0;
  ++p;
  // Fields 3..21 precede the start time.
  for (int field = 3; field <= 22; ++field) {
    while (*p == ' ') ++p;
    if (field == 22) return strtoull(p, nullptr, 10);
    while (*p != ' ' && *p != '\0') ++p;
  }
  return 0;
}

// Collects the pids of our children (live or zombie) into `out`; returns how
// many. Uses /proc/self/task/TID/children, else scans /proc for our ppid.
int ListChildren(pid_t self, pid_t* out, int max) {
  int count = 0;
  char path[64];
  snprintf(path, sizeof(path), "/proc/self/task/%d/children", static_cast<int>(self));
  if (FILE* f = fopen(path, "re")) {
    int pid;
    while (count < max && fscanf(f, "%d", &pid) == 1) out[count++] = pid;
    fclose(f);
    return count;
  }
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return 0;
  while (struct dirent* e = readdir(proc)) {
    char* end;
    long pid = strtol(e->d_name, &end, 10);
    if (*end != '\0' || pid <= 0 || count >= max) continue;
    snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
    FILE* f = fopen(path, "re");
    if (f == nullptr) continue;
    char buf[512];
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char* p = strrchr(buf, ')');
    char state;
    int ppid;
    if (p != nullptr && sscanf(p + 1, " %c %d", &state, &ppid) == 2 && ppid == self) {
      out[count++] = static_cast<pid_t>(pid);
    }
  }
  closedir(proc);
  return count;
}

// Kills and reaps every remaining child of ours: as a child subreaper we
// inherit the task's orphans, including ones that left its process group
// (setsid daemons). Bounded, so a process stuck in the kernel (D state)
// cannot keep the exit record from being written.
void KillOrphans() {
  constexpr int kMaxRounds = 2000;  // x 2.5ms = 5s
  const pid_t self = getpid();
  pid_t children[1024];
  for (int round = 0; round < kMaxRounds; ++round) {
    while (waitpid(-1, nullptr, WNOHANG) > 0) {
    }
    int n = ListChildren(self, children, 1024);
    if (n == 0) return;
    // Our children: their pids cannot be reused until we reap them.
    for (int i = 0; i < n; ++i) kill(children[i], SIGKILL);
    usleep(2500);
  }
}

int Finish(const std::string& exit_line) {
  return WriteAtomic(shim::kExitFile, exit_line + "\n") ? 0 : 1;
}

int Fail(const std::string& what, int err) {
  Diag(what.c_str(), err);
  return Finish("failed " + what + ": " + strerror(err));
}

// Runs in the forked child: becomes the task. Only async-signal-safe calls.
[[noreturn]] void ExecTask(char** argv, int in, int out, int err, int report_fd) {
  setpgid(0, 0);
  struct sigaction dfl;
  memset(&dfl, 0, sizeof(dfl));
  dfl.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig) {
    if (sig != SIGKILL && sig != SIGSTOP) sigaction(sig, &dfl, nullptr);
  }
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  if (dup2(in, 0) < 0 || dup2(out, 1) < 0 || dup2(err, 2) < 0) {
    int e = errno;
    (void)!write(report_fd, &e, sizeof(e));
    _exit(127);
  }
  // Nothing but stdio crosses into the task.
  close_range(3, ~0U, CLOSE_RANGE_CLOEXEC);
  execvp(argv[0], argv);
  int e = errno;
  (void)!write(report_fd, &e, sizeof(e));
  _exit(127);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4 || strcmp(argv[2], "--") != 0) {
    fprintf(stderr, "usage: herd-shim RUN_DIR -- ARGV...\n");
    return 2;
  }
  g_run_dir = argv[1];
  char** task_argv = argv + 3;

  // Own session: the agent's terminal, session and death do not reach us.
  setsid();
  // The task's orphans become our children, so none outlives the run
  // unnoticed and none is left as a zombie.
  prctl(PR_SET_CHILD_SUBREAPER, 1);
  signal(SIGINT, SIG_IGN);
  signal(SIGHUP, SIG_IGN);
  signal(SIGTERM, SIG_IGN);
  signal(SIGPIPE, SIG_IGN);

  int out = open(RunPath(shim::kStdoutFile).c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (out < 0) return Fail("open stdout", errno);
  int err = open(RunPath(shim::kStderrFile).c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (err < 0) return Fail("open stderr", errno);
  int in = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (in < 0) return Fail("open /dev/null", errno);
  int report[2];
  if (pipe2(report, O_CLOEXEC) != 0) return Fail("pipe", errno);

  pid_t pid = fork();
  if (pid < 0) return Fail("fork", errno);
  if (pid == 0) ExecTask(task_argv, in, out, err, report[1]);

  setpgid(pid, pid);  // also done by the child; whichever runs first wins
  close(report[1]);
  close(in);
  close(out);
  close(err);
  int exec_errno = 0;
  ssize_t n;
  do {
    n = read(report[0], &exec_errno, sizeof(exec_errno));
  } while (n < 0 && errno == EINTR);
  close(report[0]);
  if (n == static_cast<ssize_t>(sizeof(exec_errno))) {
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    return Finish(std::string("failed ") + shim::kExecFailedPrefix + strerror(exec_errno) + " (" +
                  task_argv[0] + ")");
  }

  // The task has exec'd (or is already a zombie, whose stat still reads).
  char line[128];
  snprintf(line, sizeof(line), "%d %llu %d %llu\n", static_cast<int>(pid), StartTime(pid),
           static_cast<int>(getpid()), StartTime(getpid()));
  WriteAtomic(shim::kTaskPidFile, line);

  // Wait for the task without reaping it, so its pid (and thus its process
  // group id) cannot be reused while we kill what it left behind in its
  // group. Orphaned descendants re-parented to us meanwhile are reaped.
  while (true) {
    siginfo_t info;
    memset(&info, 0, sizeof(info));
    if (waitid(P_ALL, 0, &info, WEXITED | WNOWAIT) < 0) {
      if (errno == EINTR) continue;
      return Fail("waitid", errno);
    }
    if (info.si_pid == pid) break;
    waitpid(info.si_pid, nullptr, 0);
  }
  kill(-pid, SIGKILL);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return Fail("waitpid", errno);
  }
  KillOrphans();
  if (WIFSIGNALED(status)) return Finish("signaled " + std::to_string(WTERMSIG(status)));
  return Finish("exited " + std::to_string(WEXITSTATUS(status)));
}
