#include "agent/supervisor/restart_policy.h"

#include <gtest/gtest.h>

namespace herd::agent {
namespace {

ExitStatus Exited(int code) {
  ExitStatus e;
  e.kind = ExitStatus::Kind::kExited;
  e.exit_code = code;
  return e;
}

ExitStatus Signaled(int sig) {
  ExitStatus e;
  e.kind = ExitStatus::Kind::kSignaled;
  e.signal = sig;
  return e;
}

v1::RestartPolicy Policy(v1::RestartPolicy::Mode mode, int max_restarts = 0, int64_t initial = 100,
                         int64_t max = 1000) {
  v1::RestartPolicy p;
  p.set_mode(mode);
  p.set_max_restarts(max_restarts);
  p.set_backoff_initial_ms(initial);
  p.set_backoff_max_ms(max);
  return p;
}

TEST(RestartPolicy, Modes) {
  EXPECT_TRUE(DecideRestart(Policy(v1::RestartPolicy::ALWAYS), Exited(0), 0, 0, 0).restart);
  EXPECT_TRUE(DecideRestart(Policy(v1::RestartPolicy::ALWAYS), Exited(1), 0, 0, 0).restart);
  EXPECT_FALSE(DecideRestart(Policy(v1::RestartPolicy::ON_FAILURE), Exited(0), 0, 0, 0).restart);
  EXPECT_TRUE(DecideRestart(Policy(v1::RestartPolicy::ON_FAILURE), Exited(2), 0, 0, 0).restart);
  EXPECT_TRUE(DecideRestart(Policy(v1::RestartPolicy::ON_FAILURE), Signaled(9), 0, 0, 0).restart);
  // Unspecified means ON_FAILURE.
  EXPECT_FALSE(DecideRestart(Policy(v1::RestartPolicy::MODE_UNSPECIFIED), Exited(0), 0, 0, 0).restart);
  EXPECT_TRUE(DecideRestart(Policy(v1::RestartPolicy::MODE_UNSPECIFIED), Exited(2), 0, 0, 0).restart);
  RestartDecision d = DecideRestart(Policy(v1::RestartPolicy::NEVER), Exited(2), 0, 0, 0);
  EXPECT_FALSE(d.restart);
  EXPECT_EQ(d.message, "exited with code 2; not restarted (restart policy NEVER)");
  EXPECT_EQ(DecideRestart(Policy(v1::RestartPolicy::NEVER), Exited(0), 0, 0, 0).message, "exited with code 0");
}

TEST(RestartPolicy, BackoffDoublesUpToMaxAndResetsAfterLongRun) {
  v1::RestartPolicy p = Policy(v1::RestartPolicy::ALWAYS, 0, 100, 350);
  RestartDecision d = DecideRestart(p, Exited(1), 0, 0, 5);
  EXPECT_EQ(d.delay_ms, 100);
  EXPECT_EQ(d.message, "exited with code 1; restart 1 in 100ms");
  EXPECT_EQ(DecideRestart(p, Exited(1), 1, 100, 5).delay_ms, 200);
  EXPECT_EQ(DecideRestart(p, Exited(1), 2, 200, 5).delay_ms, 350);
  EXPECT_EQ(DecideRestart(p, Exited(1), 3, 350, 5).delay_ms, 350);
  EXPECT_EQ(DecideRestart(p, Exited(1), 4, 350, kBackoffResetAfterMs).delay_ms, 100);
  // Unset values get defaults.
  EXPECT_EQ(DecideRestart(Policy(v1::RestartPolicy::ALWAYS, 0, 0, 0), Exited(1), 0, 0, 0).delay_ms,
            kDefaultBackoffInitialMs);
}

TEST(RestartPolicy, MaxRestarts) {
  v1::RestartPolicy p = Policy(v1::RestartPolicy::ON_FAILURE, 2);
  EXPECT_TRUE(DecideRestart(p, Exited(3), 1, 100, 0).restart);
  RestartDecision d = DecideRestart(p, Exited(3), 2, 200, 0);
  EXPECT_FALSE(d.restart);
  EXPECT_EQ(d.message, "exited with code 3; gave up after 2 restarts");
}

TEST(RestartPolicy, PermanentFailureIsNotRestarted) {
  ExitStatus e;
  e.kind = ExitStatus::Kind::kFailed;
  e.message = "exec failed: No such file or directory (x)";
  e.permanent = true;
  RestartDecision d = DecideRestart(Policy(v1::RestartPolicy::ALWAYS), e, 0, 0, 0);
  EXPECT_FALSE(d.restart);
  EXPECT_EQ(d.message, "exec failed: No such file or directory (x); not restarted (retrying cannot help)");
  e.permanent = false;
  EXPECT_TRUE(DecideRestart(Policy(v1::RestartPolicy::ON_FAILURE), e, 0, 0, 0).restart);
}

}  // namespace
}  // namespace herd::agent
