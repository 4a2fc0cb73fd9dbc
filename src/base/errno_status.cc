#include "base/errno_status.h"

#include <errno.h>

#include <cstring>

#include "absl/strings/str_cat.h"

namespace herd {

absl::StatusCode ErrnoToCode(int err) {
  switch (err) {
    case EAGAIN:
#if EWOULDBLOCK != EAGAIN
    case EWOULDBLOCK:
#endif
    case EINTR:
    case EBUSY:
    case ETIMEDOUT:
    case ECONNREFUSED:
    case ECONNRESET:
    case ECONNABORTED:
    case EPIPE:
    case EHOSTUNREACH:
    case ENETUNREACH:
    case ENETDOWN:
    case ENETRESET:
      return absl::StatusCode::kUnavailable;
    case ENOENT:
    case ESRCH:
    case ENXIO:
      return absl::StatusCode::kNotFound;
    case EEXIST:
      return absl::StatusCode::kAlreadyExists;
    case EACCES:
    case EPERM:
    case EROFS:
      return absl::StatusCode::kPermissionDenied;
    case ENOSPC:
    case EDQUOT:
    case ENOMEM:
    case EMFILE:
    case ENFILE:
    case E2BIG:
      return absl::StatusCode::kResourceExhausted;
    case EINVAL:
    case ENAMETOOLONG:
    case ERANGE:
      return absl::StatusCode::kInvalidArgument;
    case ENOTDIR:
    case EISDIR:
    case ENOTEMPTY:
    case ENOEXEC:
    case ELOOP:
      return absl::StatusCode::kFailedPrecondition;
    default:
      return absl::StatusCode::kInternal;
  }
}

absl::Status ErrnoToStatus(int err, absl::string_view what) {
  return absl::Status(ErrnoToCode(err), absl::StrCat(what, ": ", std::strerror(err)));
}

}  // namespace herd
