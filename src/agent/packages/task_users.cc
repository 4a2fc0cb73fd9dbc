#include "agent/packages/task_users.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "base/errno_status.h"
#include "base/files.h"
#include "base/status.h"

namespace herd::agent {

// Holds the state file open and flock()ed: every agent of the host appends
// to the same file, each under the lock, after reading what the others
// assigned.
class TaskUidFile {
 public:
  static absl::StatusOr<TaskUidFile> Open(const std::string& path) {
    TaskUidFile f;
    f.path_ = path;
    f.fd_.Reset(open(path.c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600));
    if (!f.fd_.valid()) return ErrnoToStatus(errno, absl::StrCat("open ", path));
    while (flock(f.fd_.get(), LOCK_EX) != 0) {
      if (errno != EINTR) return ErrnoToStatus(errno, absl::StrCat("lock ", path));
    }
    return f;
  }
  // The whole lines of the file. A crash mid-append leaves at most a torn
  // last line (no newline): it was never acknowledged, so it is cut off.
  absl::StatusOr<std::string> ReadWholeLines() {
    std::string text;
    char buf[8192];
    off_t at = 0;
    for (;;) {
      ssize_t n = pread(fd_.get(), buf, sizeof(buf), at);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return ErrnoToStatus(errno, absl::StrCat("read ", path_));
      if (n == 0) break;
      text.append(buf, static_cast<size_t>(n));
      at += n;
    }
    const size_t whole = text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1;
    if (whole < text.size()) {
      text.erase(whole);
      if (ftruncate(fd_.get(), static_cast<off_t>(whole)) != 0) {
        return ErrnoToStatus(errno, absl::StrCat("truncate ", path_));
      }
    }
    return text;
  }
  absl::Status AppendDurably(const std::string& record) {
    if (write(fd_.get(), record.data(), record.size()) != static_cast<ssize_t>(record.size()) ||
        fsync(fd_.get()) != 0) {
      return ErrnoToStatus(errno, absl::StrCat("write ", path_));
    }
    return absl::OkStatus();
  }

 private:
  std::string path_;
  Fd fd_;  // closing it releases the lock
};

absl::StatusOr<std::unique_ptr<TaskUsers>> TaskUsers::Open(const Options& o) {
  if (o.first_uid < 1000 || o.count == 0 || uint64_t{o.first_uid} + o.count > (uint64_t{1} << 31)) {
    return absl::InvalidArgumentError(absl::StrCat("task uid range ", o.first_uid, "+", o.count,
                                                   " must lie within 1000..2^31"));
  }
  std::unique_ptr<TaskUsers> t(new TaskUsers(o));
  std::lock_guard l(t->mu_);
  absl::StatusOr<TaskUidFile> file = TaskUidFile::Open(o.state_file);
  if (!file.ok()) return file.status();
  HERD_RETURN_IF_ERROR(t->LoadLocked(*file));
  return t;
}

absl::Status TaskUsers::LoadLocked(TaskUidFile& file) {
  absl::StatusOr<std::string> text = file.ReadWholeLines();
  if (!text.ok()) return text.status();
  std::istringstream lines(*text);
  std::string line;
  int n = 0;
  while (std::getline(lines, line)) {
    ++n;
    std::istringstream f(line);
    std::string user, uid_text, extra;
    uint32_t uid = 0;
    if (!(f >> user >> uid_text) || (f >> extra) || !absl::SimpleAtoi(uid_text, &uid)) {
      return absl::DataLossError(absl::StrCat(options_.state_file, ":", n, ": not 'USER UID'"));
    }
    // Outside today's range (the range was changed): never handed out again.
    if (uid < options_.first_uid || uid - options_.first_uid >= options_.count) continue;
    uids_[user] = uid;
    owners_[uid] = user;
  }
  return absl::OkStatus();
}

absl::StatusOr<TaskAccount> TaskUsers::For(const std::string& user) {
  std::lock_guard l(mu_);
  if (auto it = uids_.find(user); it != uids_.end()) return TaskAccount{it->second, it->second};
  // Another agent of this host may have assigned USER, or taken uids, since
  // this one last looked: read the file again under its lock.
  absl::StatusOr<TaskUidFile> file = TaskUidFile::Open(options_.state_file);
  if (!file.ok()) return file.status();
  HERD_RETURN_IF_ERROR(LoadLocked(*file));
  if (auto it = uids_.find(user); it != uids_.end()) return TaskAccount{it->second, it->second};
  uint32_t uid = options_.first_uid;
  while (owners_.contains(uid) && uid - options_.first_uid < options_.count) ++uid;
  if (uid - options_.first_uid >= options_.count) {
    return absl::ResourceExhaustedError(absl::StrCat("every task uid of ", options_.first_uid, "+", options_.count,
                                                     " is assigned; widen the agent's --task-uids"));
  }
  // Durable before use: a uid must never go to a second user after a crash.
  HERD_RETURN_IF_ERROR(file->AppendDurably(absl::StrCat(user, " ", uid, "\n")));
  uids_[user] = uid;
  owners_[uid] = user;
  return TaskAccount{uid, uid};
}

}  // namespace herd::agent
