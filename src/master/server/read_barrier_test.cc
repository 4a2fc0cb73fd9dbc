// ReadBarrier: reads that arrive while a head-read is in flight share the
// next one, never the one in flight (it may have read the head before a
// change they must see was acknowledged). Threads are held at chosen points
// with latches, not sleeps.
#include "master/server/read_barrier.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"

namespace herd::master {
namespace {

// A head that the test advances, and head-reads it can hold in flight.
struct FakeLog {
  absl::Mutex mu;
  int64_t head ABSL_GUARDED_BY(mu) = 0;
  int64_t applied ABSL_GUARDED_BY(mu) = 0;
  bool hold ABSL_GUARDED_BY(mu) = false;  // head-reads wait while true
  int in_read ABSL_GUARDED_BY(mu) = 0;
  int reads ABSL_GUARDED_BY(mu) = 0;
  bool fail ABSL_GUARDED_BY(mu) = false;

  absl::StatusOr<int64_t> ReadHead() {
    absl::MutexLock l(&mu);
    ++reads;
    if (fail) return absl::UnavailableError("cut off");
    const int64_t seen = head;  // read when it began
    ++in_read;
    auto released = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu) { return !hold; };
    mu.Await(absl::Condition(&released));
    --in_read;
    return seen;
  }
  bool WaitApplied(int64_t revision) {
    absl::MutexLock l(&mu);
    return applied >= revision;
  }
};

TEST(ReadBarrier, AReadWaitsForTheHeadAsOfWhenItBegan) {
  FakeLog log;
  ReadBarrier b([&] { return log.ReadHead(); }, [&](int64_t r) { return log.WaitApplied(r); });
  {
    absl::MutexLock l(&log.mu);
    log.head = 5;
    log.applied = 5;
  }
  EXPECT_TRUE(b.Wait());
  {
    absl::MutexLock l(&log.mu);
    log.head = 7;  // acknowledged, not applied here yet
  }
  EXPECT_FALSE(b.Wait());
  EXPECT_EQ(b.rounds(), 2);
}

TEST(ReadBarrier, ReadsArrivingDuringAHeadReadShareTheNextOne) {
  FakeLog log;
  ReadBarrier b([&] { return log.ReadHead(); }, [&](int64_t r) { return log.WaitApplied(r); });
  {
    absl::MutexLock l(&log.mu);
    log.hold = true;
    log.head = 1;
    log.applied = 100;
  }
  // The first read starts a head-read, held in flight.
  std::thread first([&] { EXPECT_TRUE(b.Wait()); });
  {
    absl::MutexLock l(&log.mu);
    auto reading = [&]() ABSL_SHARED_LOCKS_REQUIRED(log.mu) { return log.in_read == 1; };
    log.mu.Await(absl::Condition(&reading));
    log.head = 2;  // a change acknowledged after that head-read began
  }
  // Eight more reads arrive while it is in flight: they must not use it.
  std::vector<std::thread> later;
  std::atomic<int> finished{0};
  for (int i = 0; i < 8; ++i) {
    later.emplace_back([&] {
      EXPECT_TRUE(b.Wait());
      ++finished;
    });
  }
  // Release the first head-read; the later reads share one more between them.
  {
    absl::MutexLock l(&log.mu);
    log.hold = false;
  }
  first.join();
  for (auto& t : later) t.join();
  EXPECT_EQ(finished.load(), 8);
  absl::MutexLock l(&log.mu);
  EXPECT_GE(log.reads, 2);   // the later reads did not ride on the first
  EXPECT_LE(log.reads, 9);   // and at most one each (usually 2 in all)
}

TEST(ReadBarrier, CutOffFromTheHeadReadsGoOnWithoutAskingForAWhile) {
  FakeLog log;
  ReadBarrier b([&] { return log.ReadHead(); }, [&](int64_t r) { return log.WaitApplied(r); }, absl::Hours(1));
  {
    absl::MutexLock l(&log.mu);
    log.fail = true;
  }
  EXPECT_FALSE(b.Wait());
  EXPECT_FALSE(b.Wait());
  EXPECT_FALSE(b.Wait());
  absl::MutexLock l(&log.mu);
  EXPECT_EQ(log.reads, 1);
}

}  // namespace
}  // namespace herd::master
