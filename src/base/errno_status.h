// The one mapping from a system call's errno to an absl::Status, so that
// every caller can act on the code the same way. The codes keep the meanings
// the agent's extensions give them (agent/supervisor/extension.h, Prepare):
//
//   UNAVAILABLE          transient; the same call may well succeed later
//                        (EAGAIN, EINTR, EBUSY, ETIMEDOUT, the network's
//                        refusals, resets and unreachable hosts)
//   NOT_FOUND            ENOENT, ESRCH, ENXIO
//   ALREADY_EXISTS       EEXIST
//   PERMISSION_DENIED    EACCES, EPERM, EROFS
//   RESOURCE_EXHAUSTED   ENOSPC, EDQUOT, ENOMEM, EMFILE, ENFILE, E2BIG
//   INVALID_ARGUMENT     EINVAL, ENAMETOOLONG, ERANGE: asking again the same
//                        way cannot work
//   FAILED_PRECONDITION  ENOTDIR, EISDIR, ENOTEMPTY, ENOEXEC, ELOOP: the
//                        file system is not in the shape the call needs
//   INTERNAL             anything else (EIO, EBADF, EFAULT, ...)
//
// The message is "<what>: <strerror>", e.g. "mkdir /x/y: No such file or
// directory".
#pragma once

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace herd {

absl::StatusCode ErrnoToCode(int err);
absl::Status ErrnoToStatus(int err, absl::string_view what);

}  // namespace herd
