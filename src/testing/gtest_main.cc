// The main() of every Herd test executable (herd_test() in
// cmake/HerdHelpers.cmake), in place of gtest_main.
//
// A run in which nothing failed but some tests were skipped exits with
// kSkippedExitCode, which CTest reports as "Skipped" (SKIP_RETURN_CODE), not
// as passed: a test that did not make its assertions must be visible, and
// scripts/test.sh fails on a skip it does not expect. A failure still exits
// 1, so a skip never hides one. A filter that selects no test at all (a
// stale --gtest_filter in CMake) is a failure too.
#include <cstdio>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace {
constexpr int kSkippedExitCode = 77;
}  // namespace

int main(int argc, char** argv) {
  testing::InitGoogleMock(&argc, argv);
  const int rc = RUN_ALL_TESTS();
  if (rc != 0) return rc;
  const testing::UnitTest& unit = *testing::UnitTest::GetInstance();
  if (unit.test_to_run_count() == 0) {
    std::fprintf(stderr, "no test matched the filter: nothing was checked\n");
    return 1;
  }
  if (unit.skipped_test_count() > 0) {
    std::fprintf(stderr, "%d of %d tests skipped: reported to CTest as skipped (exit %d)\n",
                 unit.skipped_test_count(), unit.test_to_run_count(), kSkippedExitCode);
    return kSkippedExitCode;
  }
  return 0;
}
