// herd-shim: the per-run parent of a task (like containerd-shim or conmon).
//
//   herd-shim RUN_DIR [OPTIONS] -- ARGV...      (options: shim_protocol.h)
//
// The agent starts one shim per attempt of a run, with the task's environment
// and working directory. The shim leaves the agent's session, starts the task
// in its own process group (and, as asked, its cgroup, namespaces, root
// directory and user), records its identity in RUN_DIR/task.pid, waits for
// it and records how it ended in RUN_DIR/exit. With --log-max-bytes it also
// carries the task's output from pipes into RUN_DIR/stdout and stderr,
// rotating them by size. With --lease-file (at-most-once runs) it stops the
// task once the machine's lease from the master has expired, even while no
// agent runs. When the task exits, the rest of its process group
// and any orphans it left (the shim is a child subreaper) are killed, so the
// end of an attempt means all of its processes are gone. The shim outlives
// the agent, so tasks keep running while the agent is down or upgraded, and a
// restarted agent learns from RUN_DIR/exit how a task ended in the meantime.
//
// Deliberately tiny: libc only (linked statically) and single-threaded.
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <linux/openat2.h>
#include <sys/syscall.h>
#ifndef SYS_openat2
#define SYS_openat2 437
#endif
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "agent/runtime/shim_protocol.h"
#include "agent/runtime/task_hardening.h"
#include "base/clock.h"  // header-only use: the shim links nothing of Herd

namespace {

namespace shim = herd::agent::shim;
namespace agent = herd::agent;

std::string g_run_dir;

std::string RunPath(const std::string& name) { return g_run_dir + "/" + name; }

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
  std::string tmp = RunPath(std::string(".") + name + ".tmp");
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
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

// ---- Options ----------------------------------------------------------

struct Options {
  std::vector<std::string> cgroups;
  long long log_max_bytes = 0;
  int log_keep = 0;
  bool namespaces = false;
  // --unconfined: no seccomp filter, bounding set kept (the job's
  // isolation.seccomp, granted by run-as-root).
  bool unconfined = false;
  std::string hostname;
  std::string root;
  std::string cwd;
  std::string cwd_base;  // --cwd-base: cwd is beneath it
  long uid = -1;
  long gid = -1;
  // --bind SRC DST: (source, destination inside the root).
  std::vector<std::pair<std::string, std::string>> binds;
  std::string lease_file;
  long long lease_grace_ms = 10'000;
};

bool ParseNumber(const char* text, long long min, long long* out) {
  char* end;
  errno = 0;
  long long v = strtoll(text, &end, 10);
  if (errno != 0 || *end != '\0' || end == text || v < min) return false;
  *out = v;
  return true;
}

// Parses argv[2..] up to "--"; returns the index of the first task argument,
// or 0 (with a message on stderr) if the command line is wrong.
int ParseOptions(int argc, char** argv, Options* o) {
  int i = 2;
  for (; i < argc && strcmp(argv[i], "--") != 0; ++i) {
    const char* opt = argv[i];
    if (strcmp(opt, shim::kOptNamespaces) == 0) {
      o->namespaces = true;
      continue;
    }
    if (strcmp(opt, shim::kOptUnconfined) == 0) {
      o->unconfined = true;
      continue;
    }
    if (i + 1 >= argc) {
      fprintf(stderr, "herd-shim: %s needs a value\n", opt);
      return 0;
    }
    const char* val = argv[++i];
    long long n = 0;
    if (strcmp(opt, shim::kOptCgroup) == 0) {
      o->cgroups.push_back(val);
    } else if (strcmp(opt, shim::kOptLogMaxBytes) == 0 && ParseNumber(val, 0, &n)) {
      o->log_max_bytes = n;
    } else if (strcmp(opt, shim::kOptLogKeep) == 0 && ParseNumber(val, 0, &n) && n <= 1000) {
      o->log_keep = static_cast<int>(n);
    } else if (strcmp(opt, shim::kOptHostname) == 0) {
      o->hostname = val;
    } else if (strcmp(opt, shim::kOptRoot) == 0) {
      o->root = val;
    } else if (strcmp(opt, shim::kOptCwd) == 0) {
      o->cwd = val;
    } else if (strcmp(opt, shim::kOptCwdBase) == 0) {
      o->cwd_base = val;
    } else if (strcmp(opt, shim::kOptBind) == 0) {
      if (i + 1 >= argc || strcmp(argv[i + 1], "--") == 0) {
        fprintf(stderr, "herd-shim: %s needs SRC and DST\n", opt);
        return 0;
      }
      o->binds.emplace_back(val, argv[++i]);
    } else if (strcmp(opt, shim::kOptUid) == 0 && ParseNumber(val, 0, &n)) {
      o->uid = static_cast<long>(n);
    } else if (strcmp(opt, shim::kOptGid) == 0 && ParseNumber(val, 0, &n)) {
      o->gid = static_cast<long>(n);
    } else if (strcmp(opt, shim::kOptLeaseFile) == 0) {
      o->lease_file = val;
    } else if (strcmp(opt, shim::kOptLeaseGraceMs) == 0 && ParseNumber(val, 0, &n)) {
      o->lease_grace_ms = n;
    } else {
      fprintf(stderr, "herd-shim: bad option %s %s\n", opt, val);
      return 0;
    }
  }
  if (i + 1 >= argc) {
    fprintf(stderr, "usage: herd-shim RUN_DIR [OPTIONS] -- ARGV...\n");
    return 0;
  }
  if ((!o->root.empty() || !o->hostname.empty()) && !o->namespaces) {
    fprintf(stderr, "herd-shim: --root and --hostname need --namespaces\n");
    return 0;
  }
  if (!o->binds.empty() && o->root.empty()) {
    fprintf(stderr, "herd-shim: --bind needs --root\n");
    return 0;
  }
  return i + 1;
}

// ---- Logs --------------------------------------------------------------

// One of the task's output streams: read from a pipe, appended to
// RUN_DIR/NAME, rotated to NAME.1 .. NAME.KEEP when it would pass max_bytes.
struct LogStream {
  const char* name = nullptr;
  int pipe_fd = -1;  // read end; -1 once at EOF
  int file_fd = -1;
  long long size = 0;

  bool Open() {
    // The task's output is the agent's to serve (herd logs), no one else's.
    file_fd = open(RunPath(name).c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (file_fd < 0) return false;
    struct stat st;
    size = fstat(file_fd, &st) == 0 ? st.st_size : 0;
    return true;
  }

  void Rotate(int keep) {
    close(file_fd);
    file_fd = -1;
    std::string base = RunPath(name);
    if (keep <= 0) {
      unlink(base.c_str());
    } else {
      unlink((base + "." + std::to_string(keep)).c_str());
      for (int k = keep - 1; k >= 1; --k) {
        rename((base + "." + std::to_string(k)).c_str(), (base + "." + std::to_string(k + 1)).c_str());
      }
      rename(base.c_str(), (base + ".1").c_str());
    }
    if (!Open()) Diag("reopen log after rotation", errno);
  }

  // Copies what the pipe holds now into the file. False at EOF.
  bool Pump(const Options& o) {
    char buf[64 * 1024];
    ssize_t n = read(pipe_fd, buf, sizeof(buf));
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) return true;
    if (n <= 0) {
      close(pipe_fd);
      pipe_fd = -1;
      return false;
    }
    // Fill the file up to the limit, preferably ending at a line break,
    // then rotate and go on with the rest.
    const char* p = buf;
    long long left = n;
    while (left > 0) {
      long long take = left;
      bool full = false;
      if (o.log_max_bytes > 0) {
        long long room = o.log_max_bytes - size;
        if (room <= 0) {
          Rotate(o.log_keep);
          if (file_fd < 0) return true;  // cannot write logs: drop the output
          continue;
        }
        if (take > room) {
          take = room;
          full = true;
          const void* nl = memrchr(p, '\n', static_cast<size_t>(take));
          if (nl != nullptr) take = static_cast<const char*>(nl) - p + 1;
        }
      }
      // A full disk must not stop the task: its output is then dropped.
      if (file_fd >= 0 && WriteAll(file_fd, p, static_cast<size_t>(take))) size += take;
      if (full) size = o.log_max_bytes;  // the rest starts a new file
      p += take;
      left -= take;
    }
    return true;
  }
};

// ---- The lease (at-most-once runs) -------------------------------------

bool ReadSmallFile(const std::string& path, std::string* out);

// The machine's lease from the master (shim_protocol.h, ROOT/lease): valid
// while its deadline, on CLOCK_MONOTONIC, is ahead. A file that cannot be
// read or parsed, or that an earlier boot wrote, is no lease.
class LeaseCheck {
 public:
  explicit LeaseCheck(std::string path) : path_(std::move(path)) {
    std::string boot;
    if (ReadSmallFile(shim::kBootIdPath, &boot)) {
      while (!boot.empty() && (boot.back() == '\n' || boot.back() == ' ')) boot.pop_back();
      boot_id_ = boot;
    }
  }
  // Reads the file; false (and why) once the lease is no longer valid.
  bool Valid(long long now_ms, std::string* why) const {
    std::string text;
    if (!ReadSmallFile(path_, &text)) {
      *why = "cannot read the lease file " + path_ + " (" + strerror(errno) + ")";
      return false;
    }
    shim::Lease lease;
    if (!shim::ParseLease(text.c_str(), &lease)) {
      *why = "the lease file " + path_ + " is malformed";
      return false;
    }
    if (!boot_id_.empty() && boot_id_ != lease.boot_id) {
      *why = "the lease file is from before the machine restarted";
      return false;
    }
    if (now_ms >= lease.deadline_ms) {
      *why = "no contact with the master for " + std::to_string(now_ms - lease.contact_ms) + " ms";
      return false;
    }
    return true;
  }

 private:
  std::string path_;
  std::string boot_id_;
};

// SIGKILL to the task's process group and, on cgroup v2, to its whole
// cgroup (cgroup.kill beside each cgroup.procs it joined; v1 has none, and
// the group kill plus the orphan sweep after the task's end do the rest).
void KillTaskHard(pid_t task, const Options& o) {
  kill(-task, SIGKILL);
  for (const std::string& procs : o.cgroups) {
    size_t slash = procs.rfind('/');
    if (slash == std::string::npos) continue;
    std::string kill_file = procs.substr(0, slash) + "/cgroup.kill";
    int fd = open(kill_file.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) continue;
    (void)!write(fd, "1", 1);
    close(fd);
  }
}

// ---- The task ----------------------------------------------------------

// Where the child failed before exec, reported through a close-on-exec pipe.
struct SetupError {
  int stage;
  int err;
};
constexpr const char* kStages[] = {"stdio", "cgroup", "namespaces", "hostname", "mount",
                                   "root",  "cwd",    "user",       "exec",     "privileges"};
enum Stage { kStdio, kCgroup, kNamespaces, kHostname, kMount, kRoot, kCwd, kUser, kExec, kHarden };

[[noreturn]] void ChildFail(int report_fd, Stage stage) {
  SetupError e{stage, errno};
  (void)!write(report_fd, &e, sizeof(e));
  _exit(127);
}

// `rel` (plain names, no "..") beneath the directory `base`, following no
// symlink in any component: an O_PATH descriptor, or -1 with errno set.
int OpenDirBeneath(const char* base, const char* rel) {
  // The sandbox itself sits in the run directory, which no task can write;
  // O_NOFOLLOW all the same.
  int dir = open(base, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dir < 0) return -1;
  if (rel[0] == '\0' || strcmp(rel, ".") == 0) return dir;
  struct open_how how;
  memset(&how, 0, sizeof how);
  how.flags = O_PATH | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW;
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
  long fd = syscall(SYS_openat2, dir, rel, &how, sizeof how);
  if (fd >= 0 || errno != ENOSYS) {
    int err = errno;
    close(dir);
    errno = err;
    return static_cast<int>(fd);
  }
  // Before Linux 5.6: a component at a time, none followed.
  std::string path(rel);
  size_t start = 0;
  while (start <= path.size()) {
    size_t slash = path.find('/', start);
    if (slash == std::string::npos) slash = path.size();
    std::string part = path.substr(start, slash - start);
    start = slash + 1;
    if (part.empty() || part == ".") continue;
    if (part == "..") {
      close(dir);
      errno = EXDEV;
      return -1;
    }
    int next = openat(dir, part.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    int err = errno;
    close(dir);
    if (next < 0) {
      errno = err;
      return -1;
    }
    dir = next;
  }
  return dir;
}

int PivotRoot(const char* new_root, const char* put_old) {
  return static_cast<int>(syscall(SYS_pivot_root, new_root, put_old));
}

// Runs in the forked child: becomes the task. The shim is single-threaded,
// so the child may use anything; it reports a failure before exec through
// `report_fd` and exits 127.
[[noreturn]] void ExecTask(const Options& o, char** argv, int in, int out, int err, int report_fd) {
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
  if (dup2(in, 0) < 0 || dup2(out, 1) < 0 || dup2(err, 2) < 0) ChildFail(report_fd, kStdio);
  // Into the task's cgroup(s) before anything else, so all it does is
  // accounted and limited there. "0" moves the writing process.
  for (const std::string& procs : o.cgroups) {
    int fd = open(procs.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0 || write(fd, "0", 1) != 1) ChildFail(report_fd, kCgroup);
    close(fd);
  }
  if (o.namespaces) {
    // The pid namespace was entered by the shim (unshare(CLONE_NEWPID)
    // applies to its children): this process is pid 1 in it.
    if (unshare(CLONE_NEWNS | CLONE_NEWUTS) != 0) ChildFail(report_fd, kNamespaces);
    // Nothing mounted here propagates back to the machine.
    if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) ChildFail(report_fd, kMount);
    if (!o.hostname.empty() && sethostname(o.hostname.data(), o.hostname.size()) != 0) {
      ChildFail(report_fd, kHostname);
    }
    if (!o.root.empty()) {
      const char* root = o.root.c_str();
      std::string proc = o.root + "/proc", dev = o.root + "/dev";
      if (mount(root, root, nullptr, MS_BIND | MS_REC, nullptr) != 0) ChildFail(report_fd, kRoot);
      // Directories of the machine the task sees inside its root (its
      // sandbox): mounted in its own mount namespace, so they vanish with it.
      for (const auto& [src, dst] : o.binds) {
        std::string target = o.root + "/" + dst;
        if (mount(src.c_str(), target.c_str(), nullptr, MS_BIND | MS_REC, nullptr) != 0) ChildFail(report_fd, kMount);
      }
      if (mount("proc", proc.c_str(), "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) != 0) {
        ChildFail(report_fd, kMount);
      }
      if (mount("/dev", dev.c_str(), nullptr, MS_BIND | MS_REC, nullptr) != 0) ChildFail(report_fd, kMount);
      if (chdir(root) != 0 || PivotRoot(".", ".") != 0 || umount2(".", MNT_DETACH) != 0 || chdir("/") != 0) {
        ChildFail(report_fd, kRoot);
      }
    } else if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) != 0) {
      // A /proc of the new pid namespace: the task sees only its own processes.
      ChildFail(report_fd, kMount);
    }
  }
  // Least privilege (task_hardening.h): the bounding set while still root,
  // the rest last.
  const agent::SeccompMode seccomp =
      o.unconfined ? agent::SeccompMode::kUnconfined : agent::SeccompMode::kRuntimeDefault;
  const bool root_task = o.uid == 0 || (o.uid < 0 && geteuid() == 0);
  // A sandbox-relative working directory is opened now, as root, beneath the
  // sandbox and following no symlink the task left there; it is entered once
  // the task's uid is taken (fchdir needs only the directory's own x bit).
  int cwd_fd = -1;
  if (!o.cwd_base.empty()) {
    cwd_fd = OpenDirBeneath(o.cwd_base.c_str(), o.cwd.c_str());
    if (cwd_fd < 0) ChildFail(report_fd, kCwd);
  }
  if (int e = agent::DropBoundingCapabilities(seccomp, root_task); e != 0) {
    errno = e;
    ChildFail(report_fd, kHarden);
  }
  if (o.gid >= 0 || o.uid >= 0) {
    if (setgroups(0, nullptr) != 0) ChildFail(report_fd, kUser);
    if (o.gid >= 0 && setgid(static_cast<gid_t>(o.gid)) != 0) ChildFail(report_fd, kUser);
    if (o.uid >= 0 && setuid(static_cast<uid_t>(o.uid)) != 0) ChildFail(report_fd, kUser);
  }
  if (cwd_fd >= 0) {
    if (fchdir(cwd_fd) != 0) ChildFail(report_fd, kCwd);
  } else if (!o.cwd.empty() && chdir(o.cwd.c_str()) != 0) {
    // An absolute workdir: entered only as the task's uid, with its rights.
    ChildFail(report_fd, kCwd);
  }
  if (int e = agent::HardenBeforeExec(seccomp); e != 0) {
    errno = e;
    ChildFail(report_fd, kHarden);
  }
  // Nothing but stdio crosses into the task.
  close_range(3, ~0U, CLOSE_RANGE_CLOEXEC);
  execvp(argv[0], argv);
  ChildFail(report_fd, kExec);
}

// Reaps children other than the task; true once the task has exited (it is
// left unreaped, so its pid and process group id stay reserved).
bool TaskExited(pid_t task) {
  while (true) {
    siginfo_t info;
    memset(&info, 0, sizeof(info));
    if (waitid(P_ALL, 0, &info, WEXITED | WNOHANG | WNOWAIT) < 0) {
      if (errno == EINTR) continue;
      return errno == ECHILD;  // cannot happen while the task is unreaped
    }
    if (info.si_pid == 0) return false;
    if (info.si_pid == task) return true;
    waitpid(info.si_pid, nullptr, 0);
  }
}


// ---- herd-shim --enter ---------------------------------------------------

// Exit codes of --enter when ARGV did not run (as env(1) and docker exec).
constexpr int kEnterFailed = shim::kEnterFailedExit;
constexpr int kEnterNotExecutable = shim::kEnterNotExecutableExit;
constexpr int kEnterNotFound = shim::kEnterNotFoundExit;

int EnterFail(const std::string& what, int err) {
  fprintf(stderr, "herd-shim --enter: %s: %s\n", what.c_str(), strerror(err));
  return kEnterFailed;
}

bool ReadWhole(const std::string& path, std::string* out) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  out->clear();
  char buf[4096];
  ssize_t n;
  while ((n = read(fd, buf, sizeof(buf))) > 0) out->append(buf, static_cast<size_t>(n));
  int err = errno;
  close(fd);
  errno = err;
  return n == 0;
}

bool ReadSmallFile(const std::string& path, std::string* out) { return ReadWhole(path, out); }

std::vector<std::string> Split(const std::string& text, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(sep, start);
    if (end == std::string::npos) end = text.size();
    out.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

// A mounted cgroup hierarchy, from /proc/self/mountinfo.
struct CgroupMount {
  std::string root;   // the hierarchy's directory mounted there ("/" usually)
  std::string point;  // where it is mounted
  bool v2 = false;
  std::vector<std::string> options;  // super options: controllers, name=...
};

std::vector<CgroupMount> CgroupMounts() {
  std::vector<CgroupMount> out;
  std::string text;
  if (!ReadWhole("/proc/self/mountinfo", &text)) return out;
  for (const std::string& line : Split(text, '\n')) {
    // ID PARENT MAJ:MIN ROOT POINT OPTS [OPTIONAL...] - FSTYPE SOURCE SUPEROPTS
    std::vector<std::string> f = Split(line, ' ');
    size_t dash = 0;
    while (dash < f.size() && f[dash] != "-") ++dash;
    if (f.size() < 5 || dash + 3 >= f.size()) continue;
    const std::string& fstype = f[dash + 1];
    if (fstype != "cgroup" && fstype != "cgroup2") continue;
    CgroupMount m;
    m.root = f[3];
    m.point = f[4];
    m.v2 = fstype == "cgroup2";
    m.options = Split(f[dash + 3], ',');
    out.push_back(std::move(m));
  }
  return out;
}

// "HIERARCHY:CONTROLLERS:PATH" lines of /proc/PID/cgroup, keyed by
// "HIERARCHY:CONTROLLERS".
std::vector<std::pair<std::string, std::string>> CgroupsOf(const std::string& pid) {
  std::vector<std::pair<std::string, std::string>> out;
  std::string text;
  if (!ReadWhole("/proc/" + pid + "/cgroup", &text)) return out;
  for (const std::string& line : Split(text, '\n')) {
    size_t second = line.find(':', line.find(':') + 1);
    if (line.empty() || second == std::string::npos) continue;
    out.emplace_back(line.substr(0, second), line.substr(second + 1));
  }
  return out;
}

// The cgroup.procs file of `path` in the hierarchy `key`, or "" if that
// hierarchy is not mounted here (or the path is outside the mounted part).
std::string CgroupProcs(const std::vector<CgroupMount>& mounts, const std::string& key, const std::string& path) {
  std::string controllers = key.substr(key.find(':') + 1);
  const bool v2 = controllers.empty();
  for (const CgroupMount& m : mounts) {
    if (m.v2 != v2) continue;
    if (!v2) {
      bool all = true;
      for (const std::string& c : Split(controllers, ',')) {
        bool found = false;
        for (const std::string& o : m.options) found |= o == c;
        all &= found;
      }
      if (!all) continue;
    }
    std::string rel = path;
    if (m.root != "/") {
      if (rel.compare(0, m.root.size(), m.root) != 0) continue;
      rel = rel.substr(m.root.size());
    }
    return m.point + rel + "/cgroup.procs";
  }
  return "";
}

// Joins every cgroup of the task that is not ours already.
int JoinCgroups(const std::string& pid) {
  std::vector<CgroupMount> mounts = CgroupMounts();
  std::vector<std::pair<std::string, std::string>> ours = CgroupsOf("self");
  std::vector<std::pair<std::string, std::string>> theirs = CgroupsOf(pid);
  if (theirs.empty()) return EnterFail("read /proc/" + pid + "/cgroup", errno ? errno : ENOENT);
  for (const auto& [key, path] : theirs) {
    bool same = false;
    for (const auto& [k, p] : ours) same |= k == key && p == path;
    if (same) continue;
    std::string procs = CgroupProcs(mounts, key, path);
    if (procs.empty()) continue;  // hierarchy not mounted here: nothing to join
    int fd = open(procs.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0 || write(fd, "0", 1) != 1) {
      int err = errno;
      if (fd >= 0) close(fd);
      return EnterFail("join cgroup " + procs, err);
    }
    close(fd);
  }
  return 0;
}

// Real uid and gid of a process, from its status file.
bool UserOf(const std::string& pid, long* uid, long* gid) {
  std::string text;
  if (!ReadWhole("/proc/" + pid + "/status", &text)) return false;
  *uid = *gid = -1;
  for (const std::string& line : Split(text, '\n')) {
    if (line.compare(0, 4, "Uid:") == 0) *uid = strtol(line.c_str() + 4, nullptr, 10);
    if (line.compare(0, 4, "Gid:") == 0) *gid = strtol(line.c_str() + 4, nullptr, 10);
  }
  return *uid >= 0 && *gid >= 0;
}

// Whether a process runs under a seccomp filter.
bool Filtered(const std::string& pid) {
  std::string text;
  if (!ReadWhole("/proc/" + pid + "/status", &text)) return true;  // when unsure, filtered
  for (const std::string& line : Split(text, '\n')) {
    if (line.compare(0, 8, "Seccomp:") == 0) return strtol(line.c_str() + 8, nullptr, 10) != 0;
  }
  return true;
}

pid_t g_enter_child = 0;
void ForwardSignal(int sig) {
  if (g_enter_child > 0) kill(g_enter_child, sig);
}

// herd-shim --enter TASK_PID [--start-time T] [--cwd DIR] -- ARGV...
int EnterMain(int argc, char** argv) {
  std::string pid;
  unsigned long long start_time = 0;
  std::string cwd;
  int i = 1;
  for (; i < argc && strcmp(argv[i], "--") != 0; ++i) {
    if (i + 1 >= argc) {
      fprintf(stderr, "herd-shim: %s needs a value\n", argv[i]);
      return 2;
    }
    const char* opt = argv[i];
    const char* val = argv[++i];
    long long n = 0;
    if (strcmp(opt, shim::kOptEnter) == 0 && ParseNumber(val, 1, &n)) {
      pid = val;
    } else if (strcmp(opt, shim::kOptStartTime) == 0 && ParseNumber(val, 0, &n)) {
      start_time = static_cast<unsigned long long>(n);
    } else if (strcmp(opt, shim::kOptCwd) == 0) {
      cwd = val;
    } else {
      fprintf(stderr, "herd-shim: bad option %s %s\n", opt, val);
      return 2;
    }
  }
  if (pid.empty() || i + 1 >= argc) {
    fprintf(stderr, "usage: herd-shim --enter TASK_PID [--start-time T] [--cwd DIR] -- ARGV...\n");
    return 2;
  }
  char** cmd = argv + i + 1;
  const pid_t task = static_cast<pid_t>(atol(pid.c_str()));

  // Into the task's cgroups first, so everything below is accounted there.
  if (int rc = JoinCgroups(pid); rc != 0) return rc;
  long uid, gid;
  if (!UserOf(pid, &uid, &gid)) return EnterFail("read /proc/" + pid + "/status", errno ? errno : EINVAL);
  // The task's own filter (its status says "Seccomp: 2") is given to the
  // command too; a task run unconfined passes that on.
  const agent::SeccompMode seccomp =
      Filtered(pid) ? agent::SeccompMode::kRuntimeDefault : agent::SeccompMode::kUnconfined;
  // Namespaces that differ from ours, plus the task's root and working
  // directory, all opened before entering any of them (/proc paths may mean
  // something else afterwards).
  const char* kinds[] = {"uts", "pid", "mnt"};
  const int flags[] = {CLONE_NEWUTS, CLONE_NEWPID, CLONE_NEWNS};
  int ns_fd[3] = {-1, -1, -1};
  for (int k = 0; k < 3; ++k) {
    std::string theirs = "/proc/" + pid + "/ns/" + kinds[k];
    std::string ours = std::string("/proc/self/ns/") + kinds[k];
    struct stat a, b;
    if (stat(theirs.c_str(), &a) != 0) return EnterFail("stat " + theirs, errno);
    if (stat(ours.c_str(), &b) != 0) return EnterFail("stat " + ours, errno);
    if (a.st_ino == b.st_ino && a.st_dev == b.st_dev) continue;
    ns_fd[k] = open(theirs.c_str(), O_RDONLY | O_CLOEXEC);
    if (ns_fd[k] < 0) return EnterFail("open " + theirs, errno);
  }
  int root_fd = open(("/proc/" + pid + "/root").c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (root_fd < 0) return EnterFail("open task root", errno);
  int cwd_fd = open(("/proc/" + pid + "/cwd").c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (cwd_fd < 0) return EnterFail("open task cwd", errno);
  // Everything above was opened for the very task asked for, not a later
  // process that reused its pid.
  if (start_time != 0 && StartTime(task) != start_time) return EnterFail("task " + pid, ESRCH);

  for (int k = 0; k < 3; ++k) {
    if (ns_fd[k] >= 0 && setns(ns_fd[k], flags[k]) != 0) return EnterFail(std::string("setns ") + kinds[k], errno);
    if (ns_fd[k] >= 0) close(ns_fd[k]);
  }
  if (fchdir(root_fd) != 0 || chroot(".") != 0) return EnterFail("enter task root", errno);
  // The task's own working directory; one asked for by name is entered only
  // as the task's uid (below), so a symlink the task planted cannot take a
  // root process anywhere.
  if (fchdir(cwd_fd) != 0) return EnterFail("chdir", errno);
  close(root_fd);
  close(cwd_fd);

  auto become_user_and_exec = [&]() -> int {
    // A command in the task is held as the task is (task_hardening.h).
    if (int e = agent::DropBoundingCapabilities(seccomp, uid == 0); e != 0) return EnterFail("drop capabilities", e);
    if (setgroups(0, nullptr) != 0 || setgid(static_cast<gid_t>(gid)) != 0 || setuid(static_cast<uid_t>(uid)) != 0) {
      return EnterFail("switch to uid " + std::to_string(uid), errno);
    }
    if (!cwd.empty() && chdir(cwd.c_str()) != 0) return EnterFail("chdir " + cwd, errno);
    if (int e = agent::HardenBeforeExec(seccomp); e != 0) return EnterFail("seccomp", e);
    execvp(cmd[0], cmd);
    int err = errno;
    fprintf(stderr, "herd-shim --enter: exec %s: %s\n", cmd[0], strerror(err));
    return err == ENOENT ? kEnterNotFound : kEnterNotExecutable;
  };
  // A new pid namespace only applies to children: fork, and pass the
  // child's end on as ours.
  if (ns_fd[1] < 0) return become_user_and_exec();
  pid_t child = fork();
  if (child < 0) return EnterFail("fork", errno);
  if (child == 0) {
    // Dies with us, so killing the shim (a timeout) ends the command too.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    _exit(become_user_and_exec());
  }
  g_enter_child = child;
  for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2}) signal(sig, ForwardSignal);
  int status = 0;
  while (waitpid(child, &status, 0) < 0) {
    if (errno != EINTR) return EnterFail("waitpid", errno);
  }
  if (WIFSIGNALED(status)) {
    signal(WTERMSIG(status), SIG_DFL);
    kill(getpid(), WTERMSIG(status));
    return 128 + WTERMSIG(status);
  }
  return WEXITSTATUS(status);
}

}  // namespace

// herd-shim --pause: holds an alloc's cgroup until told to stop.
int PauseMain() {
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  sigprocmask(SIG_BLOCK, &stop, nullptr);
  int sig = 0;
  while (sigwait(&stop, &sig) != 0) {
  }
  return 0;
}

int main(int argc, char** argv) {
  if (argc >= 2 && strcmp(argv[1], shim::kOptEnter) == 0) return EnterMain(argc, argv);
  if (argc == 2 && strcmp(argv[1], shim::kOptPause) == 0) return PauseMain();
  Options o;
  int first = argc >= 2 ? ParseOptions(argc, argv, &o) : 0;
  if (first == 0) return 2;
  g_run_dir = argv[1];
  char** task_argv = argv + first;
  const bool pump = o.log_max_bytes > 0;

  // Own session: the agent's terminal, session and death do not reach us.
  setsid();
  // The task's orphans become our children, so none outlives the run
  // unnoticed and none is left as a zombie.
  prctl(PR_SET_CHILD_SUBREAPER, 1);
  signal(SIGINT, SIG_IGN);
  signal(SIGHUP, SIG_IGN);
  signal(SIGTERM, SIG_IGN);
  signal(SIGPIPE, SIG_IGN);
  // Children's exits arrive through a signalfd, in one poll loop with the
  // task's output.
  sigset_t chld;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  sigprocmask(SIG_BLOCK, &chld, nullptr);
  int sig_fd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
  if (sig_fd < 0) return Fail("signalfd", errno);

  LogStream streams[2];
  streams[0].name = shim::kStdoutFile;
  streams[1].name = shim::kStderrFile;
  int task_out = -1, task_err = -1;
  for (int s = 0; s < 2; ++s) {
    if (!streams[s].Open()) return Fail(std::string("open ") + streams[s].name, errno);
    int& task_end = s == 0 ? task_out : task_err;
    if (pump) {
      int p[2];
      if (pipe2(p, O_CLOEXEC) != 0) return Fail("pipe", errno);
      fcntl(p[0], F_SETFL, O_NONBLOCK);
      streams[s].pipe_fd = p[0];
      task_end = p[1];
    } else {
      task_end = streams[s].file_fd;  // the task appends to the file itself
    }
  }
  std::unique_ptr<LeaseCheck> lease;
  if (!o.lease_file.empty()) {
    lease = std::make_unique<LeaseCheck>(o.lease_file);
    std::string why;
    // The agent starts an at-most-once run only under a valid lease, but
    // it may have run out since (a slow spawn): then the task must not start.
    if (!lease->Valid(herd::SteadyNowMs(), &why)) {
      fprintf(stderr, "herd-shim %s: lease expired: %s; not starting the task\n", g_run_dir.c_str(), why.c_str());
      return Finish(std::string("failed ") + shim::kNotStartedMessage + "\n" + shim::kLeaseExpiredLine + why);
    }
  }
  int in = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (in < 0) return Fail("open /dev/null", errno);
  int report[2];
  if (pipe2(report, O_CLOEXEC) != 0) return Fail("pipe", errno);
  // A new pid namespace applies to the children forked after this.
  if (o.namespaces && unshare(CLONE_NEWPID) != 0) {
    return Finish(std::string("failed ") + shim::kSetupFailedPrefix + "namespaces: " + strerror(errno));
  }

  pid_t pid = fork();
  if (pid < 0) return Fail("fork", errno);
  if (pid == 0) ExecTask(o, task_argv, in, task_out, task_err, report[1]);

  setpgid(pid, pid);  // also done by the child; whichever runs first wins
  close(report[1]);
  close(in);
  if (pump) {
    close(task_out);
    close(task_err);
  }
  SetupError setup{};
  ssize_t n;
  do {
    n = read(report[0], &setup, sizeof(setup));
  } while (n < 0 && errno == EINTR);
  close(report[0]);
  if (n == static_cast<ssize_t>(sizeof(setup))) {
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    const char* stage = setup.stage >= 0 && setup.stage <= kHarden ? kStages[setup.stage] : "?";
    if (setup.stage == kExec) {
      return Finish(std::string("failed ") + shim::kExecFailedPrefix + strerror(setup.err) + " (" + task_argv[0] +
                    ")");
    }
    return Finish(std::string("failed ") + shim::kSetupFailedPrefix + stage + ": " + strerror(setup.err));
  }

  // The task has exec'd (or is already a zombie, whose stat still reads).
  char line[128];
  snprintf(line, sizeof(line), "%d %llu %d %llu\n", static_cast<int>(pid), StartTime(pid),
           static_cast<int>(getpid()), StartTime(getpid()));
  WriteAtomic(shim::kTaskPidFile, line);

  // Carry output and wait for the task without reaping it, so its pid (and
  // thus its process group id) cannot be reused while we kill what it left
  // behind in its group. Orphaned descendants re-parented to us meanwhile
  // are reaped.
  // At-most-once: the lease is read every kLeaseCheckMs; once it has
  // expired the task is stopped as the agent would stop it (SIGTERM, then
  // SIGKILL after the grace period) and the exit record says why.
  std::string lease_why;  // set once the stop for an expired lease began
  long long next_check_ms = 0, kill_at_ms = 0;
  bool lease_killed = false;
  while (!TaskExited(pid)) {
    int timeout = -1;
    if (lease != nullptr) {
      const long long now = herd::SteadyNowMs();
      if (lease_why.empty()) {
        if (now >= next_check_ms) {
          std::string why;
          if (!lease->Valid(now, &why)) {
            lease_why = why;
            fprintf(stderr, "herd-shim %s: lease expired: %s; stopping the task (SIGTERM, SIGKILL after %lld ms)\n",
                    g_run_dir.c_str(), why.c_str(), o.lease_grace_ms);
            kill(-pid, SIGTERM);
            kill_at_ms = now + o.lease_grace_ms;
          }
          next_check_ms = now + shim::kLeaseCheckMs;
        }
      }
      if (!lease_why.empty() && !lease_killed && now >= kill_at_ms) {
        KillTaskHard(pid, o);
        lease_killed = true;
      }
      if (lease_why.empty()) {
        timeout = static_cast<int>(next_check_ms - now);
      } else if (!lease_killed) {
        timeout = static_cast<int>(std::max(0LL, kill_at_ms - now));
      }
      if (timeout == 0) continue;
    }
    struct pollfd fds[3];
    int nfds = 0;
    fds[nfds++] = {sig_fd, POLLIN, 0};
    for (LogStream& s : streams) {
      if (s.pipe_fd >= 0) fds[nfds++] = {s.pipe_fd, POLLIN, 0};
    }
    if (poll(fds, static_cast<nfds_t>(nfds), timeout) < 0 && errno != EINTR) return Fail("poll", errno);
    struct signalfd_siginfo si;
    while (read(sig_fd, &si, sizeof(si)) > 0) {
    }
    for (LogStream& s : streams) {
      if (s.pipe_fd >= 0) s.Pump(o);
    }
  }
  kill(-pid, SIGKILL);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return Fail("waitpid", errno);
  }
  KillOrphans();
  // Everything that could write to the pipes is gone: drain them (bounded,
  // should something outside the task hold a write end).
  const int64_t drain_until = herd::SteadyNowMs() + 2000;
  for (LogStream& s : streams) {
    while (s.pipe_fd >= 0 && herd::SteadyNowMs() < drain_until) {
      struct pollfd fd = {s.pipe_fd, POLLIN, 0};
      if (poll(&fd, 1, 100) > 0) s.Pump(o);
    }
    if (s.pipe_fd >= 0) close(s.pipe_fd);
    if (s.file_fd >= 0) close(s.file_fd);
  }
  const std::string why = lease_why.empty() ? "" : "\n" + std::string(shim::kLeaseExpiredLine) + lease_why;
  if (WIFSIGNALED(status)) return Finish("signaled " + std::to_string(WTERMSIG(status)) + why);
  return Finish("exited " + std::to_string(WEXITSTATUS(status)) + why);
}
