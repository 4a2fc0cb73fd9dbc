#include "agent/packages/unpack.h"

#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
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
#include "base/status.h"

namespace herd::agent {
namespace {

constexpr size_t kMaxTarMessage = 4096;

std::string FindTar() {
  for (const char* p : {"/usr/bin/tar", "/bin/tar"}) {
    if (access(p, X_OK) == 0) return p;
  }
  return "";
}

// Everyone reads (and enters) it, nobody but root changes it, and nothing
// in it runs with another's rights.
mode_t Wanted(mode_t kind, mode_t mode) { return kind == S_IFDIR ? (mode | 0555) & 0755 : ((mode | 0444) & 0555); }

// A file the unpack account did not make (a hard link to one of root's, or
// one swapped in): never made root's or anyone's to read.
absl::Status NotMadeByTar(const std::string& path) {
  return absl::FailedPreconditionError(absl::StrCat(path, " is not owned by the unpack account that made the tree"));
}

constexpr int kMaxDepth = 256;
constexpr int64_t kMaxEntries = 1'000'000;

// After tar: the tree under the open directory `dir` (shown as `where`)
// becomes root's (if `chown`), read only, without set-id bits; nothing but
// files, directories and symlinks. Every step goes through a descriptor
// (openat O_NOFOLLOW, fstat, fchown, fchmod; fchownat AT_SYMLINK_NOFOLLOW
// for a symlink), so a path changed under the walk can fail it but never
// point it outside the tree.
absl::Status SettleAt(int dir, const std::string& where, bool chown, std::optional<uid_t> owner, int depth,
                      int64_t* entries) {
  if (depth > kMaxDepth) return absl::FailedPreconditionError(absl::StrCat(where, ": nested too deep"));
  struct stat st;
  if (fstat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
    return absl::FailedPreconditionError(absl::StrCat(where, " is not a directory"));
  }
  if (owner && st.st_uid != *owner) return NotMadeByTar(where);
  if (chown && fchown(dir, 0, 0) != 0) return ErrnoToStatus(errno, absl::StrCat("chown ", where));
  if (fchmod(dir, Wanted(S_IFDIR, st.st_mode & 07777)) != 0) return ErrnoToStatus(errno, absl::StrCat("chmod ", where));
  const int list_fd = dup(dir);
  if (list_fd < 0) return ErrnoToStatus(errno, absl::StrCat("dup ", where));
  DIR* d = fdopendir(list_fd);
  if (d == nullptr) {
    close(list_fd);
    return ErrnoToStatus(errno, absl::StrCat("read ", where));
  }
  absl::Cleanup close_d = [d] { closedir(d); };
  while (struct dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    if (++*entries > kMaxEntries) {
      return absl::FailedPreconditionError(absl::StrCat("more than ", kMaxEntries, " entries"));
    }
    const std::string path = absl::StrCat(where, "/", name);
    struct stat es;
    if (fstatat(dir, name.c_str(), &es, AT_SYMLINK_NOFOLLOW) != 0)
      return ErrnoToStatus(errno, absl::StrCat("stat ", path));
    const mode_t kind = es.st_mode & S_IFMT;
    if (owner && es.st_uid != *owner) return NotMadeByTar(path);
    if (kind == S_IFLNK) {
      if (chown && fchownat(dir, name.c_str(), 0, 0, AT_SYMLINK_NOFOLLOW) != 0) {
        return ErrnoToStatus(errno, absl::StrCat("chown ", path));
      }
      continue;
    }
    if (kind != S_IFREG && kind != S_IFDIR) {
      return absl::FailedPreconditionError(
          absl::StrCat(path, " is a device, FIFO or socket: a package holds only files, directories and symlinks"));
    }
    const int flags = O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | (kind == S_IFDIR ? O_DIRECTORY : 0);
    const int fd = openat(dir, name.c_str(), flags);
    if (fd < 0) return ErrnoToStatus(errno, absl::StrCat("open ", path));
    absl::Cleanup close_fd = [fd] { close(fd); };
    if (kind == S_IFDIR) {
      HERD_RETURN_IF_ERROR(SettleAt(fd, path, chown, owner, depth + 1, entries));
      continue;
    }
    struct stat fs;
    if (fstat(fd, &fs) != 0 || !S_ISREG(fs.st_mode) || (owner && fs.st_uid != *owner)) {
      return absl::FailedPreconditionError(absl::StrCat(path, " changed while it was settled"));
    }
    // chown first: it clears set-id bits, chmod then sets what we want.
    if (chown && fchown(fd, 0, 0) != 0) return ErrnoToStatus(errno, absl::StrCat("chown ", path));
    if (fchmod(fd, Wanted(S_IFREG, fs.st_mode & 07777)) != 0) return ErrnoToStatus(errno, absl::StrCat("chmod ", path));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status SettleTree(int dir, std::optional<uid_t> owner) {
  int64_t entries = 0;
  absl::Status settled = SettleAt(dir, ".", geteuid() == 0, owner, 0, &entries);
  if (!settled.ok()) return absl::FailedPreconditionError(settled.message());
  return absl::OkStatus();
}

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
  return SettleTree(cwd, drop ? std::optional<uid_t>(uid) : std::nullopt);
}

}  // namespace herd::agent
