#include "base/files.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <string.h>
#include <unistd.h>

#include <atomic>
#include <set>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/errno_status.h"
#include "base/status.h"

#ifndef SYS_openat2
#define SYS_openat2 437
#endif

namespace herd {

Fd& Fd::operator=(Fd&& other) noexcept {
  if (this != &other) Reset(other.Release());
  return *this;
}

int Fd::Release() {
  int fd = fd_;
  fd_ = -1;
  return fd;
}

void Fd::Reset(int fd) {
  if (fd_ >= 0) close(fd_);
  fd_ = fd;
}

absl::Status MakeDir(const std::string& path, mode_t mode) {
  if (mkdir(path.c_str(), mode) != 0 && errno != EEXIST) return ErrnoToStatus(errno, absl::StrCat("mkdir ", path));
  return absl::OkStatus();
}

namespace {

absl::Status WriteAll(int fd, absl::string_view contents, const std::string& what) {
  const char* p = contents.data();
  size_t left = contents.size();
  while (left > 0) {
    ssize_t n = write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoToStatus(errno, absl::StrCat("write ", what));
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

std::string ParentOf(const std::string& path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

// The plain names of `rel`, or an error for an absolute path or "..".
absl::StatusOr<std::vector<std::string>> PlainParts(absl::string_view rel) {
  if (!rel.empty() && rel[0] == '/') return absl::InvalidArgumentError(absl::StrCat("\"", rel, "\" is not relative"));
  std::vector<std::string> parts;
  for (absl::string_view part : absl::StrSplit(rel, '/', absl::SkipEmpty())) {
    if (part == ".") continue;
    if (part == "..") return absl::InvalidArgumentError(absl::StrCat("\"", rel, "\" leaves its directory (..)"));
    parts.emplace_back(part);
  }
  return parts;
}

absl::Status OpenError(int err, absl::string_view rel) {
  if (err == ELOOP || err == EXDEV) {
    return absl::FailedPreconditionError(
        absl::StrCat(rel, ": a symlink (or a path that leaves its directory) where the agent expects a plain name"));
  }
  if (err == ENOTDIR) return absl::FailedPreconditionError(absl::StrCat(rel, ": not a directory"));
  return ErrnoToStatus(err, absl::StrCat("open ", rel));
}

std::atomic<bool> g_no_openat2{false};

}  // namespace

absl::Status WriteFileAtomic(const std::string& path, absl::string_view contents, const WriteFileOptions& options) {
  const std::string tmp = absl::StrCat(path, ".tmp.", getpid());
  Fd fd(open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, options.mode));
  if (!fd.valid()) return ErrnoToStatus(errno, absl::StrCat("create ", tmp));
  auto fail = [&](absl::Status st) {
    fd.Reset();
    unlink(tmp.c_str());
    return st;
  };
  if (fchmod(fd.get(), options.mode) != 0) return fail(ErrnoToStatus(errno, absl::StrCat("chmod ", tmp)));
  if (absl::Status st = WriteAll(fd.get(), contents, tmp); !st.ok()) return fail(st);
  if (options.durable && fsync(fd.get()) != 0) return fail(ErrnoToStatus(errno, absl::StrCat("fsync ", tmp)));
  if (close(fd.Release()) != 0) return fail(ErrnoToStatus(errno, absl::StrCat("close ", tmp)));
  if (rename(tmp.c_str(), path.c_str()) != 0) return fail(ErrnoToStatus(errno, absl::StrCat("rename ", tmp)));
  if (options.durable) {
    // The rename itself is durable only once the directory is.
    Fd dir(open(ParentOf(path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (dir.valid() && fsync(dir.get()) != 0) return ErrnoToStatus(errno, absl::StrCat("fsync ", ParentOf(path)));
  }
  return absl::OkStatus();
}

absl::StatusOr<Fd> OpenBeneath(int dirfd, absl::string_view rel, int flags, mode_t mode) {
  absl::StatusOr<std::vector<std::string>> parts = PlainParts(rel);
  if (!parts.ok()) return parts.status();
  flags |= O_CLOEXEC | O_NOFOLLOW;
  if (parts->empty()) {
    int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return ErrnoToStatus(errno, "reopen directory");
    return Fd(fd);
  }
  const bool creates = (flags & O_CREAT) != 0 || (flags & O_TMPFILE) == O_TMPFILE;
  if (!g_no_openat2.load(std::memory_order_relaxed)) {
    const std::string clean = absl::StrJoin(*parts, "/");
    struct open_how how = {};
    how.flags = static_cast<uint64_t>(flags);
    how.mode = creates ? mode : 0;
    how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
    for (int attempt = 0;; ++attempt) {
      long fd = syscall(SYS_openat2, dirfd, clean.c_str(), &how, sizeof(how));
      if (fd >= 0) return Fd(static_cast<int>(fd));
      // EAGAIN: a rename somewhere raced the lookup (RESOLVE_BENEATH is
      // conservative); a few retries, then the caller hears of it.
      if (errno == EAGAIN && attempt < 8) continue;
      if (errno != ENOSYS) return OpenError(errno, rel);
      g_no_openat2.store(true, std::memory_order_relaxed);
      break;
    }
  }
  // Before Linux 5.6: one component at a time, none of them followed.
  Fd held;
  int at = dirfd;
  for (size_t i = 0; i + 1 < parts->size(); ++i) {
    int fd = openat(at, (*parts)[i].c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return OpenError(errno, rel);
    held.Reset(fd);
    at = fd;
  }
  int fd = openat(at, parts->back().c_str(), flags, creates ? mode : 0);
  if (fd < 0) return OpenError(errno, rel);
  return Fd(fd);
}

absl::StatusOr<Fd> MakeDirsBeneath(int dirfd, absl::string_view rel, mode_t mode) {
  absl::StatusOr<std::vector<std::string>> parts = PlainParts(rel);
  if (!parts.ok()) return parts.status();
  absl::StatusOr<Fd> cur = OpenBeneath(dirfd, "", O_RDONLY | O_DIRECTORY);
  if (!cur.ok()) return cur.status();
  std::string walked;
  for (const std::string& part : *parts) {
    absl::StrAppend(&walked, walked.empty() ? "" : "/", part);
    // mkdirat never follows `part`: a symlink there is EEXIST, then refused
    // by the open below.
    if (mkdirat(cur->get(), part.c_str(), mode) != 0 && errno != EEXIST) {
      return ErrnoToStatus(errno, absl::StrCat("mkdir ", walked));
    }
    absl::StatusOr<Fd> next = OpenBeneath(cur->get(), part, O_RDONLY | O_DIRECTORY);
    if (!next.ok()) {
      if (absl::IsFailedPrecondition(next.status())) {
        return absl::FailedPreconditionError(
            absl::StrCat(walked, " exists and is not a directory (a symlink or a file): refused"));
      }
      return next.status();
    }
    cur = std::move(next);
  }
  return cur;
}

absl::StatusOr<Fd> OpenDirectory(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return OpenError(errno, path);
  return Fd(fd);
}

namespace {

absl::Status CheckPlainName(absl::string_view name) {
  if (name.empty() || name == "." || name == ".." || name.find('/') != absl::string_view::npos) {
    return absl::InvalidArgumentError(absl::StrCat("\"", name, "\" is not a plain file name"));
  }
  return absl::OkStatus();
}

absl::Status RemoveTreeAtDepth(int dirfd, const std::string& name, int depth) {
  if (unlinkat(dirfd, name.c_str(), 0) == 0 || errno == ENOENT) return absl::OkStatus();
  if (errno != EISDIR) return ErrnoToStatus(errno, absl::StrCat("unlink ", name));
  if (depth > 256) return absl::FailedPreconditionError(absl::StrCat(name, ": directories nested too deep to remove"));
  absl::StatusOr<Fd> sub = OpenBeneath(dirfd, name, O_RDONLY | O_DIRECTORY);
  if (!sub.ok()) {
    // Replaced by a symlink since the unlink: remove that (never follow it).
    if (unlinkat(dirfd, name.c_str(), 0) == 0 || errno == ENOENT) return absl::OkStatus();
    return sub.status();
  }
  std::vector<std::string> names;
  {
    DIR* d = fdopendir(dup(sub->get()));
    if (d == nullptr) return ErrnoToStatus(errno, absl::StrCat("opendir ", name));
    while (struct dirent* e = readdir(d)) {
      if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) names.emplace_back(e->d_name);
    }
    closedir(d);
  }
  for (const std::string& n : names) {
    if (absl::Status st = RemoveTreeAtDepth(sub->get(), n, depth + 1); !st.ok()) return st;
  }
  if (unlinkat(dirfd, name.c_str(), AT_REMOVEDIR) != 0 && errno != ENOENT) {
    return ErrnoToStatus(errno, absl::StrCat("rmdir ", name));
  }
  return absl::OkStatus();
}

struct UsageWalk {
  int64_t bytes = 0;
  int64_t entries = 0;
  int64_t max_entries = 0;
  std::set<std::pair<dev_t, ino_t>> linked;  // files with several links, counted once
};

absl::Status AddUsage(int dirfd, const std::string& name, int depth, UsageWalk* walk) {
  if (walk->entries >= walk->max_entries) return absl::OkStatus();
  ++walk->entries;
  struct stat st;
  if (fstatat(dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    return errno == ENOENT ? absl::OkStatus() : ErrnoToStatus(errno, absl::StrCat("stat ", name));
  }
  if (!S_ISDIR(st.st_mode) && st.st_nlink > 1 && !walk->linked.insert({st.st_dev, st.st_ino}).second) {
    return absl::OkStatus();
  }
  walk->bytes += static_cast<int64_t>(st.st_blocks) * 512;
  if (!S_ISDIR(st.st_mode) || depth > 256) return absl::OkStatus();
  absl::StatusOr<Fd> sub = OpenBeneath(dirfd, name, O_RDONLY | O_DIRECTORY);
  if (!sub.ok()) return absl::OkStatus();  // replaced meanwhile: not ours to follow
  DIR* d = fdopendir(dup(sub->get()));
  if (d == nullptr) return ErrnoToStatus(errno, absl::StrCat("opendir ", name));
  std::vector<std::string> names;
  while (struct dirent* e = readdir(d)) {
    if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) names.emplace_back(e->d_name);
  }
  closedir(d);
  for (const std::string& n : names) HERD_RETURN_IF_ERROR(AddUsage(sub->get(), n, depth + 1, walk));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<int64_t> DiskUsageAt(int dirfd, absl::string_view name, int64_t max_entries) {
  if (absl::Status st = CheckPlainName(name); !st.ok()) return st;
  UsageWalk walk;
  walk.max_entries = max_entries;
  HERD_RETURN_IF_ERROR(AddUsage(dirfd, std::string(name), 0, &walk));
  return walk.bytes;
}

absl::Status RemoveTreeAt(int dirfd, absl::string_view name) {
  if (absl::Status st = CheckPlainName(name); !st.ok()) return st;
  return RemoveTreeAtDepth(dirfd, std::string(name), 0);
}

absl::Status ReplaceWithSymlinkAt(int dirfd, absl::string_view name, const std::string& target) {
  if (absl::Status st = CheckPlainName(name); !st.ok()) return st;
  const std::string n(name);
  if (absl::Status st = RemoveTreeAt(dirfd, n); !st.ok()) return st;
  if (symlinkat(target.c_str(), dirfd, n.c_str()) != 0) return ErrnoToStatus(errno, absl::StrCat("symlink ", n));
  return absl::OkStatus();
}

}  // namespace herd
