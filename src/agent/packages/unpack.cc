#include "agent/packages/unpack.h"

#include <fcntl.h>
#include <ftw.h>
#include <grp.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "base/errno_status.h"

namespace herd::agent {
namespace {

constexpr size_t kMaxTarMessage = 4096;

std::string FindTar() {
  for (const char* p : {"/usr/bin/tar", "/bin/tar"}) {
    if (access(p, X_OK) == 0) return p;
  }
  return "";
}

// What the walk below found that a package may not hold (first only).
thread_local std::string g_refused;
thread_local bool g_chown;

// After tar: root's, read only, no set-id bits, nothing but files,
// directories and symlinks. Only root and the unpack uid (whose tar has
// exited) could reach the tree, so paths cannot change under the walk; it
// never follows a symlink all the same (FTW_PHYS, lchown, and no chmod on
// one).
int Settle(const char* path, const struct stat* st, int type, struct FTW*) {
  if (type == FTW_NS || type == FTW_DNR) {
    g_refused = absl::StrCat(path, " cannot be read");
    return 1;
  }
  const mode_t kind = st->st_mode & S_IFMT;
  if (kind != S_IFREG && kind != S_IFDIR && kind != S_IFLNK) {
    g_refused =
        absl::StrCat(path, " is a device, FIFO or socket: a package holds only files, directories and symlinks");
    return 1;
  }
  if (g_chown && lchown(path, 0, 0) != 0) {
    g_refused = absl::StrCat("chown ", path, ": ", strerror(errno));
    return 1;
  }
  if (kind == S_IFLNK) return 0;
  // Everyone reads (and enters) it, nobody but root changes it, and
  // nothing in it runs with another's rights.
  const mode_t mode = st->st_mode & 07777;
  const mode_t want = kind == S_IFDIR ? (mode | 0555) & 0755 : ((mode | 0444) & 0555);
  if (want != mode && chmod(path, want) != 0) {
    g_refused = absl::StrCat("chmod ", path, ": ", strerror(errno));
    return 1;
  }
  return 0;
}

}  // namespace

absl::Status Untar(const std::string& archive, const std::string& dir, const std::optional<TaskAccount>& as) {
  const std::string tar = FindTar();
  if (tar.empty()) return absl::InternalError("tar(1) not found in /usr/bin or /bin");
  const bool drop = as.has_value() && geteuid() == 0;
  const int in = open(archive.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (in < 0) return ErrnoToStatus(errno, absl::StrCat("open ", archive));
  absl::Cleanup close_in = [in] { close(in); };
  const int cwd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (cwd < 0) return ErrnoToStatus(errno, absl::StrCat("open ", dir));
  absl::Cleanup close_cwd = [cwd] { close(cwd); };
  // tar reads the archive through /proc/self/fd/0 (so it can tell its
  // compression), which checks the file's own mode: readable by all, but
  // reached only through this descriptor (its directory is root's).
  if (drop && (fchmod(in, 0444) != 0 || fchown(cwd, as->uid, as->gid) != 0 || fchmod(cwd, 0700) != 0)) {
    return ErrnoToStatus(errno, absl::StrCat("hand ", dir, " to the unpack account"));
  }
  const int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
  if (null < 0) return ErrnoToStatus(errno, "open /dev/null");
  absl::Cleanup close_null = [null] { close(null); };
  int err[2];
  if (pipe2(err, O_CLOEXEC) != 0) return ErrnoToStatus(errno, "pipe");
  // Everything the child needs, made before fork (after it only
  // async-signal-safe calls).
  std::vector<std::string> args = {
      tar, "-x", "-f", "/proc/self/fd/0", "--no-same-owner", "--no-same-permissions", "--delay-directory-restore"};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  char path_env[] = "PATH=/usr/bin:/bin";
  char lc_env[] = "LC_ALL=C";
  char* envp[] = {path_env, lc_env, nullptr};
  const uid_t uid = drop ? as->uid : 0;
  const gid_t gid = drop ? as->gid : 0;
  const pid_t pid = fork();
  if (pid < 0) {
    const int e = errno;
    close(err[0]);
    close(err[1]);
    return ErrnoToStatus(e, "fork tar");
  }
  if (pid == 0) {
    if (dup2(in, 0) < 0 || dup2(null, 1) < 0 || dup2(err[1], 2) < 0 || fchdir(cwd) != 0) _exit(127);
    if (syscall(SYS_close_range, 3u, ~0u, 0u) != 0) {
      for (int fd = 3; fd < 1024; ++fd) close(fd);
    }
    if (drop && (setgroups(0, nullptr) != 0 || setresgid(gid, gid, gid) != 0 || setresuid(uid, uid, uid) != 0)) {
      _exit(126);
    }
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) _exit(126);
    execve(argv[0], argv.data(), envp);
    _exit(127);
  }
  close(err[1]);
  std::string message;
  char buf[512];
  for (;;) {
    const ssize_t n = read(err[0], buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    if (message.size() < kMaxTarMessage) message.append(buf, static_cast<size_t>(n));
  }
  close(err[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return ErrnoToStatus(errno, "waitpid tar");
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::string why(absl::StripAsciiWhitespace(message));
    if (size_t nl = why.find('\n'); nl != std::string::npos) why.resize(nl);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 126) why = "could not drop to the unpack account";
    return absl::FailedPreconditionError(
        absl::StrCat("not a readable tar archive (", why.empty() ? "tar failed" : why, ")"));
  }
  g_refused.clear();
  g_chown = geteuid() == 0;
  if (nftw(dir.c_str(), Settle, 16, FTW_PHYS) != 0 || !g_refused.empty()) {
    std::string why = g_refused.empty() ? absl::StrCat("cannot walk ", dir) : g_refused;
    if (absl::StartsWith(why, dir)) why = "." + why.substr(dir.size());
    return absl::FailedPreconditionError(why);
  }
  if (chmod(dir.c_str(), 0755) != 0) return ErrnoToStatus(errno, absl::StrCat("chmod ", dir));
  return absl::OkStatus();
}

}  // namespace herd::agent
