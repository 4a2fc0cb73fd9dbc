// Files: one way to write a file atomically, make a directory, and -- for
// the root agent -- reach into a directory another uid can change (a task's
// sandbox) without ever following a path that uid controls.
//
// The agent runs as root and tasks run as their own uids. Anything a task can
// write (its sandbox, the working directory in it, the packages/ links) may
// hold a symlink or be renamed between the agent's check and its use, so the
// agent never passes such a path to a path-based call (chown, mkdir, unlink,
// symlink, open). It opens the directory it owns (the run directory, which no
// task can write), then walks down with OpenBeneath, which refuses symlinks
// in every component and ".." (openat2 with RESOLVE_BENEATH |
// RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS; O_NOFOLLOW one component at a
// time on kernels before 5.6), and acts on what it holds with the *at() and
// f*() calls. A task that races the agent can make the operation fail; it
// cannot make it land outside the sandbox. docs/agent.md lists the call sites.
#pragma once

#include <sys/types.h>

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace herd {

// An owned file descriptor, closed on destruction.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& other) noexcept : fd_(other.Release()) {}
  Fd& operator=(Fd&& other) noexcept;
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { Reset(); }

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int Release();
  void Reset(int fd = -1);

 private:
  int fd_ = -1;
};

// Creates one directory level with `mode` (umask applies); an existing
// directory is success.
absl::Status MakeDir(const std::string& path, mode_t mode = 0755);

struct WriteFileOptions {
  mode_t mode = 0600;  // exactly this mode, whatever the umask
  // fsync the file before the rename and the directory after it, so the
  // write survives a power loss once this returns. Off for files rewritten
  // on every change whose loss a restart repairs (the agent's run state).
  bool durable = true;
};

// Writes `path` whole: a reader (or a crash) sees the old contents or the new
// ones, never a part. Writes PATH.tmp.PID beside it, then renames it over.
absl::Status WriteFileAtomic(const std::string& path, absl::string_view contents,
                             const WriteFileOptions& options = {});

// ---- Inside a directory another uid can change ---------------------------

// Opens `rel` (a relative path of plain names; "." parts are skipped, ".."
// and absolute paths are refused) beneath the open directory `dirfd`,
// following no symlink in any component (ELOOP) and never leaving `dirfd`.
// `flags` are open(2) flags; O_CLOEXEC and O_NOFOLLOW are always added. An
// empty `rel` reopens `dirfd` itself.
absl::StatusOr<Fd> OpenBeneath(int dirfd, absl::string_view rel, int flags, mode_t mode = 0);

// Opens (and creates, with `mode`, where missing) each directory of `rel`
// beneath `dirfd` as OpenBeneath does; returns the last one open. A
// component that exists but is not a directory (a task's symlink, say) is an
// error naming it.
absl::StatusOr<Fd> MakeDirsBeneath(int dirfd, absl::string_view rel, mode_t mode);

// Opens a directory the caller owns (no component of it writable by another
// uid), refusing a symlink as its last component.
absl::StatusOr<Fd> OpenDirectory(const std::string& path);

// Replaces whatever `name` is in `dirfd` (file, symlink, empty directory)
// with a symlink to `target`. `name` is one plain name. unlinkat and
// symlinkat never follow `name` itself.
absl::Status ReplaceWithSymlinkAt(int dirfd, absl::string_view name, const std::string& target);

// Removes `name` in `dirfd` and, for a directory, everything beneath it,
// without following any symlink (each level is opened with OpenBeneath and
// emptied through its descriptor). A race by another uid can leave something
// behind; it cannot make this remove anything outside `dirfd`.
absl::Status RemoveTreeAt(int dirfd, absl::string_view name);

// The disk space (allocated blocks) of `name` in `dirfd` and everything
// beneath it, each hard-linked file counted once, following no symlink.
// Stops counting at `max_entries` entries (what it counted so far is a
// lower bound, which is enough to find a task over its limit).
absl::StatusOr<int64_t> DiskUsageAt(int dirfd, absl::string_view name, int64_t max_entries = 1'000'000);

}  // namespace herd
