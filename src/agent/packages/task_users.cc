#include "agent/packages/task_users.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "base/errno_status.h"

namespace herd::agent {

absl::StatusOr<std::unique_ptr<TaskUsers>> TaskUsers::Open(const Options& o) {
  if (o.first_uid < 1000 || o.count == 0 || uint64_t{o.first_uid} + o.count > (uint64_t{1} << 31)) {
    return absl::InvalidArgumentError(absl::StrCat("task uid range ", o.first_uid, "+", o.count,
                                                   " must lie within 1000..2^31"));
  }
  std::unique_ptr<TaskUsers> t(new TaskUsers(o));
  std::ifstream in(o.state_file);
  std::stringstream whole;
  whole << in.rdbuf();
  std::string text = whole.str();
  // A crash mid-append leaves at most a torn last line (no newline): it
  // was never acknowledged, so it is forgotten.
  const size_t whole_lines = text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1;
  if (whole_lines < text.size()) {
    text.erase(whole_lines);
    if (truncate(o.state_file.c_str(), static_cast<off_t>(whole_lines)) != 0) {
      return ErrnoToStatus(errno, absl::StrCat("truncate ", o.state_file));
    }
  }
  std::istringstream lines(text);
  std::string line;
  int n = 0;
  while (std::getline(lines, line)) {
    ++n;
    std::istringstream f(line);
    std::string user, uid_text, extra;
    uint32_t uid = 0;
    if (!(f >> user >> uid_text) || (f >> extra) || !absl::SimpleAtoi(uid_text, &uid)) {
      return absl::DataLossError(absl::StrCat(o.state_file, ":", n, ": not 'USER UID'"));
    }
    // Outside today's range (the range was changed): never handed out again.
    if (uid < o.first_uid || uid - o.first_uid >= o.count) continue;
    t->uids_[user] = uid;
    t->owners_[uid] = user;
  }
  return t;
}

absl::StatusOr<TaskAccount> TaskUsers::For(const std::string& user) {
  std::lock_guard l(mu_);
  if (auto it = uids_.find(user); it != uids_.end()) return TaskAccount{it->second, it->second};
  uint32_t uid = options_.first_uid;
  while (owners_.contains(uid) && uid - options_.first_uid < options_.count) ++uid;
  if (uid - options_.first_uid >= options_.count) {
    return absl::ResourceExhaustedError(absl::StrCat("every task uid of ", options_.first_uid, "+", options_.count,
                                                     " is assigned; widen the agent's --task-uids"));
  }
  // Durable before use: a uid must never go to a second user after a crash.
  const std::string record = absl::StrCat(user, " ", uid, "\n");
  int fd = open(options_.state_file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (fd < 0) return ErrnoToStatus(errno, absl::StrCat("open ", options_.state_file));
  bool ok = write(fd, record.data(), record.size()) == static_cast<ssize_t>(record.size()) && fsync(fd) == 0;
  int err = errno;
  close(fd);
  if (!ok) return ErrnoToStatus(err, absl::StrCat("write ", options_.state_file));
  uids_[user] = uid;
  owners_[uid] = user;
  return TaskAccount{uid, uid};
}

}  // namespace herd::agent
