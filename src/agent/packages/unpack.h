// Unpacking a package's archive. The archive is hostile input (anyone who
// may submit a job names its URL), so tar(1) never runs as root when the
// agent does: it runs as a uid of its own (TaskUsers' ":unpack" account,
// which no Herd user can be), with no supplementary groups, no new
// privileges and no descriptor but the archive, in a directory only root
// can reach. Whatever tar made is then handed to root and checked, through
// descriptors only (a path swapped under the walk fails it, never points it
// outside the tree), and only what the account owns (a hard link to one of
// root's files is refused, never made readable): files,
// directories and symlinks only (a device node in a package would give
// every task that reads it the device), no set-uid or set-gid bits, read
// only for everyone.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "agent/packages/task_users.h"

namespace herd::agent {

// Unpacks `archive` (any compression tar recognizes) into `dir`, which must
// exist and be empty, as `as` (nullopt: with the agent's own rights), then
// makes the tree root's (when the agent is root) and read only.
// FAILED_PRECONDITION with tar's message if the archive is unreadable or
// holds something a package may not.
absl::Status Untar(const std::string& archive, const std::string& dir,
                   const std::optional<TaskAccount>& as = std::nullopt);

// The walk Untar makes after tar, on the open directory `dir`: everything
// must be owned by `owner` (when given); it becomes root's (when the agent
// is root), read only, without set-id bits. For tests.
absl::Status SettleTree(int dir, std::optional<uid_t> owner);

// The account Untar runs tar as, in the task uid range (TaskUsers::For):
// one per agent (":unpack:MACHINE"). No Herd user can have such a name
// (names hold no ':').
inline std::string UnpackAccount(const std::string& machine) { return std::string(":unpack:") + machine; }

}  // namespace herd::agent
