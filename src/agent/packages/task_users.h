// The unprivileged accounts tasks run as. A task whose spec names no machine
// account (isolation.user) runs as a uid of its own job owner's: the first
// time this machine runs a task of Herd user U, U gets the next free uid of
// a configured range (default 200000-299999, above any ordinary account),
// with a group of the same number, and keeps it: the assignment is kept in
// a file of the host (--task-uid-file, default /var/lib/herd/task-uids)
// that every agent of the host shares, each appending under an flock after
// reading what the others assigned, so restarts, re-adopted runs and
// several agents on one host agree. Two users never share a uid on a host; a task reads only what its
// owner's uid may read. (Borg runs tasks as the job's user; the uids here
// need no /etc/passwd entry, as systemd's DynamicUser.)
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "absl/status/statusor.h"

namespace herd::agent {

// Where agents of a host keep the map unless told (--task-uid-file).
inline constexpr char kHostTaskUidFile[] = "/var/lib/herd/task-uids";

class TaskUidFile;  // the state file, locked (task_users.cc)

struct TaskAccount {
  uint32_t uid = 0;
  uint32_t gid = 0;
};

class TaskUsers {
 public:
  struct Options {
    std::string state_file;  // "USER UID" lines, appended as users arrive
    uint32_t first_uid = 200000;
    uint32_t count = 100000;
  };
  // Reads the assignments so far; INVALID_ARGUMENT for a range that reaches
  // below 1000 or past 2^31, DATA_LOSS for a file that does not parse.
  static absl::StatusOr<std::unique_ptr<TaskUsers>> Open(const Options& options);

  // USER's account, assigning one (durably) if USER has none yet;
  // RESOURCE_EXHAUSTED when the range is used up.
  absl::StatusOr<TaskAccount> For(const std::string& user);

 private:
  explicit TaskUsers(Options o) : options_(std::move(o)) {}
  // Merges the file's assignments (the caller holds its lock).
  absl::Status LoadLocked(TaskUidFile& file);
  Options options_;
  std::mutex mu_;
  std::map<std::string, uint32_t> uids_;
  std::map<uint32_t, std::string> owners_;
};

}  // namespace herd::agent
