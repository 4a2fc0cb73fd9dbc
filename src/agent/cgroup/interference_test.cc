// The interference controller's escalation, on made-up samples and times,
// and the run-queue delay read from a fake /proc.
#include "agent/cgroup/interference.h"

#include <gtest/gtest.h>

#include "agent/cgroup/fake_files.h"

namespace herd::agent {
namespace {

using Level = InterferenceController::Level;

InterferenceSample Calm(int64_t now) {
  InterferenceSample s;
  s.now_ms = now;
  s.delay_run = "ls-1";
  s.runq_delay_share = 0.01;
  return s;
}

InterferenceSample Delayed(int64_t now, double share = 0.4) {
  InterferenceSample s = Calm(now);
  s.runq_delay_share = share;
  return s;
}

TEST(InterferenceController, CalmSamplesChangeNothing) {
  InterferenceController c;
  for (int64_t t = 0; t <= 60'000; t += 250) {
    InterferenceController::Decision d = c.Observe(Calm(t));
    EXPECT_EQ(d.level, Level::kNone);
    EXPECT_EQ(d.box_factor, 1.0);
    EXPECT_FALSE(d.evict_one);
  }
}

TEST(InterferenceController, ThrottlesWithinTheDetectionWindowThenEvictsThenMarks) {
  InterferenceOptions o;  // detect 1 s, escalate 5 s, 3 evictions before marking
  InterferenceController c(o);
  EXPECT_EQ(c.Observe(Delayed(0)).level, Level::kNone);  // one bad sample is not enough
  EXPECT_EQ(c.Observe(Delayed(750)).level, Level::kNone);
  InterferenceController::Decision d = c.Observe(Delayed(1'000));
  EXPECT_EQ(d.level, Level::kThrottle);
  EXPECT_TRUE(d.changed);
  EXPECT_EQ(d.box_factor, 0.5);
  EXPECT_FALSE(d.evict_one);
  EXPECT_EQ(d.reason, "run ls-1 waited for a CPU 40% of the time");
  // Still bad: no eviction before escalate_ms has passed at this level.
  EXPECT_FALSE(c.Observe(Delayed(5'750)).evict_one);
  d = c.Observe(Delayed(6'000));
  EXPECT_EQ(d.level, Level::kEvict);
  EXPECT_TRUE(d.evict_one);
  EXPECT_EQ(d.box_factor, 0.25);  // and squeezed harder
  EXPECT_FALSE(c.Observe(Delayed(6'250)).evict_one);  // one at a time
  EXPECT_TRUE(c.Observe(Delayed(11'000)).evict_one);
  d = c.Observe(Delayed(16'000));
  EXPECT_TRUE(d.evict_one);
  EXPECT_EQ(d.level, Level::kMark);
  EXPECT_EQ(c.evictions(), 3);
}

TEST(InterferenceController, InterruptedBadnessDoesNotEscalate) {
  InterferenceController c;
  for (int64_t t = 0; t < 20'000; t += 1'000) {
    EXPECT_EQ(c.Observe(Delayed(t)).level, Level::kNone) << t;
    EXPECT_EQ(c.Observe(Calm(t + 500)).level, Level::kNone) << t;  // bad for 500 ms at most
  }
}

TEST(InterferenceController, StepsDownOneLevelPerCalmPeriod) {
  InterferenceOptions o;
  o.calm_ms = 10'000;
  InterferenceController c(o);
  int64_t t = 0;
  for (; c.level() != Level::kEvict; t += 250) c.Observe(Delayed(t));
  // Calm, but not long enough.
  EXPECT_EQ(c.Observe(Calm(t)).level, Level::kEvict);
  EXPECT_EQ(c.Observe(Calm(t + 9'750)).level, Level::kEvict);
  InterferenceController::Decision d = c.Observe(Calm(t + 10'000));
  EXPECT_EQ(d.level, Level::kThrottle);
  EXPECT_EQ(d.box_factor, 0.5);
  EXPECT_EQ(c.Observe(Calm(t + 20'000)).level, Level::kNone);
  EXPECT_EQ(c.Observe(Calm(t + 20'250)).box_factor, 1.0);
  EXPECT_EQ(c.reason(), "");
}

TEST(InterferenceController, EverySignalCounts) {
  InterferenceSample s = Calm(0);
  s.throttled_run = "ls-2";
  s.throttled_share = 0.5;
  InterferenceController c;
  c.Observe(s);
  s.now_ms = 1'000;
  EXPECT_EQ(c.Observe(s).reason, "run ls-2 throttled in 50% of its CPU periods");

  InterferenceSample p = Calm(0);
  p.pressure_share = 0.3;
  InterferenceController c2;
  c2.Observe(p);
  p.now_ms = 1'000;
  EXPECT_EQ(c2.Observe(p).reason, "latency-sensitive runs stalled on CPU 30% of the time");

  InterferenceSample h = Calm(0);
  h.slow_run = "ls-3";
  h.slow_ms = 250;
  InterferenceController c3;
  c3.Observe(h);
  h.now_ms = 1'000;
  InterferenceController::Decision d = c3.Observe(h);
  EXPECT_EQ(d.level, Level::kThrottle);
  EXPECT_EQ(d.reason, "run ls-3's health check took 250 ms, more than its bound");

  // Below every threshold; pressure unknown on v1.
  InterferenceSample q = Calm(0);
  q.throttled_run = "ls-2";
  q.throttled_share = 0.2;
  q.pressure_share = -1;
  InterferenceController c4;
  for (int64_t t = 0; t <= 10'000; t += 250) {
    q.now_ms = t;
    EXPECT_EQ(c4.Observe(q).level, Level::kNone);
  }
}

TEST(InterferenceController, IdleBatchIsSqueezedButNeverEvicted) {
  InterferenceController c;
  for (int64_t t = 0; t <= 30'000; t += 250) {
    InterferenceSample s = Delayed(t);
    s.batch_busy = false;  // the delay comes from elsewhere
    InterferenceController::Decision d = c.Observe(s);
    EXPECT_FALSE(d.evict_one) << t;
    if (t >= 1'000) EXPECT_EQ(d.level, Level::kThrottle) << t;
  }
  // Batch busy again: the next escalation window evicts.
  InterferenceController::Decision d = c.Observe(Delayed(30'250));
  EXPECT_TRUE(d.evict_one);
  EXPECT_EQ(d.level, Level::kEvict);
}

TEST(InterferenceController, DisabledNeverActs) {
  InterferenceOptions o;
  o.enabled = false;
  InterferenceController c(o);
  for (int64_t t = 0; t <= 30'000; t += 250) EXPECT_EQ(c.Observe(Delayed(t)).level, Level::kNone);
}

using RunQueueDelay = testing::FakeFiles;

TEST_F(RunQueueDelay, SumsEveryThreadOfEveryProcess) {
  Put("proc/10/task/10/schedstat", "5000 700 3\n");
  Put("proc/10/task/11/schedstat", "1000 300 1\n");
  Put("proc/20/task/20/schedstat", "9000 50 8\n");
  Put("proc/30/task/30/schedstat", "garbage\n");
  EXPECT_EQ(RunQueueDelayNs({10, 20, 30, 40}, 256, root_ + "/proc"), 1050);
  // At most max_threads threads are read.
  EXPECT_LT(RunQueueDelayNs({10, 20}, 1, root_ + "/proc"), 1050);
}

TEST(RunQueueDelayReal, OurOwnThreadHasAReading) {
  EXPECT_GE(RunQueueDelayNs({getpid()}), 0);
}

}  // namespace
}  // namespace herd::agent
