#include "base/errno_status.h"

#include <errno.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

namespace herd {
namespace {

TEST(ErrnoToStatus, MessageSaysWhatAndWhy) {
  absl::Status st = ErrnoToStatus(ENOENT, "open /nope");
  EXPECT_EQ(st.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(st.message(), "open /nope: No such file or directory");
}

TEST(ErrnoToStatus, TransientErrorsAreUnavailableSoExtensionsRetry) {
  // Extension::Prepare: UNAVAILABLE means "not ready, ask again later".
  for (int err : {EAGAIN, EINTR, EBUSY, ETIMEDOUT, ECONNREFUSED, ECONNRESET, EHOSTUNREACH}) {
    EXPECT_EQ(ErrnoToCode(err), absl::StatusCode::kUnavailable) << err;
  }
}

TEST(ErrnoToStatus, ErrorsThatCannotPassAreNotTransient) {
  EXPECT_EQ(ErrnoToCode(EACCES), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(ErrnoToCode(EPERM), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(ErrnoToCode(EEXIST), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(ErrnoToCode(ENOSPC), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(ErrnoToCode(EINVAL), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ErrnoToCode(ENOTDIR), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(ErrnoToCode(EIO), absl::StatusCode::kInternal);
}

TEST(ErrnoToStatus, FromARealSystemCall) {
  struct stat st;
  ASSERT_NE(stat("/nonexistent/herd/path", &st), 0);
  EXPECT_EQ(ErrnoToStatus(errno, "stat").code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace herd
