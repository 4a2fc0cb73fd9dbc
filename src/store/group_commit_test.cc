#include "store/group_commit.h"

#include <atomic>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"
#include "store/log_store.h"
#include "store/sqlite/sqlite_log_store.h"
#include "store/test_util.h"
#include "testing/eventually.h"

namespace herd::store {
namespace {

using testing::RealisticMutation;
using testing::TaskObservedMutation;

// Wraps a store: records batch sizes, can fail or hold the next Append.
class ControlledStore final : public LogStore {
 public:
  explicit ControlledStore(LogStore* inner) : inner_(inner) {}

  absl::Status Append(absl::Span<const v1::Mutation> mutations) override {
    if (gate_ != nullptr) gate_->WaitForNotification();
    {
      std::lock_guard l(mu_);
      batches_.push_back(mutations.size());
    }
    if (fail_.load()) return absl::UnavailableError("disk on fire");
    return inner_->Append(mutations);
  }
  absl::StatusOr<int64_t> LastRevision() override { return inner_->LastRevision(); }
  absl::StatusOr<int64_t> FirstRevision() override { return inner_->FirstRevision(); }
  absl::Status WriteSnapshot(const v1::CellSnapshot& s) override {
    return inner_->WriteSnapshot(s);
  }
  absl::StatusOr<std::optional<v1::CellSnapshot>> ReadSnapshot(int64_t r) override {
    return inner_->ReadSnapshot(r);
  }
  absl::Status ReadLog(int64_t from, int64_t to,
                       const std::function<absl::Status(const v1::Mutation&)>& fn) override {
    return inner_->ReadLog(from, to, fn);
  }
  absl::Status Compact(int64_t r) override { return inner_->Compact(r); }

  void set_fail(bool f) { fail_ = f; }
  void set_gate(absl::Notification* gate) { gate_ = gate; }
  std::vector<size_t> batches() {
    std::lock_guard l(mu_);
    return batches_;
  }

 private:
  LogStore* inner_;
  std::atomic<bool> fail_{false};
  absl::Notification* gate_ = nullptr;
  std::mutex mu_;
  std::vector<size_t> batches_;
};

std::vector<v1::Mutation> Range(int64_t first, int64_t last) {
  std::vector<v1::Mutation> out;
  for (int64_t r = first; r <= last; ++r) out.push_back(TaskObservedMutation(r));
  return out;
}

// Checks that `store` holds exactly revisions 1..last, in order.
void ExpectLogIsOneTo(LogStore& store, int64_t last) {
  int64_t next = 1;
  ASSERT_TRUE(store
                  .ReadLog(1, last + 100,
                           [&](const v1::Mutation& m) {
                             EXPECT_EQ(m.revision(), next);
                             ++next;
                             return absl::OkStatus();
                           })
                  .ok());
  EXPECT_EQ(next, last + 1);
}

TEST(GroupCommitLogTest, MakesQueuedMutationsDurable) {
  MemoryLogStore store;
  GroupCommitLog log(&store);
  EXPECT_EQ(log.DurableRevision(), 0);
  EXPECT_TRUE(log.WaitDurable(0).ok());
  log.Enqueue(Range(1, 3));
  log.Enqueue({});
  log.Enqueue(Range(4, 4));
  EXPECT_TRUE(log.WaitDurable(4).ok());
  EXPECT_TRUE(log.WaitDurable(2).ok());
  EXPECT_EQ(log.DurableRevision(), 4);
  EXPECT_TRUE(log.status().ok());
  ExpectLogIsOneTo(store, 4);
}

TEST(GroupCommitLogTest, StartsAtTheStoresLastRevision) {
  MemoryLogStore store;
  ASSERT_TRUE(store.Append(Range(1, 5)).ok());
  GroupCommitLog log(&store);
  EXPECT_EQ(log.DurableRevision(), 5);
  EXPECT_TRUE(log.WaitDurable(5).ok());
  log.Enqueue(Range(6, 7));
  EXPECT_TRUE(log.WaitDurable(7).ok());
  ExpectLogIsOneTo(store, 7);
}

TEST(GroupCommitLogTest, DestructorFlushesTheQueue) {
  MemoryLogStore store;
  {
    GroupCommitLog log(&store);
    for (int64_t r = 1; r <= 1000; ++r) log.Enqueue(Range(r, r));
  }
  EXPECT_EQ(store.LastRevision().value(), 1000);
}

TEST(GroupCommitLogTest, BatchesWhatQueuedDuringAWriteUpToMaxBatch) {
  MemoryLogStore memory;
  ControlledStore store(&memory);
  absl::Notification gate;
  store.set_gate(&gate);
  GroupCommitLog log(&store, {.max_batch = 4});
  log.Enqueue(Range(1, 1));  // the writer takes it and blocks in Append
  for (int64_t r = 2; r <= 11; ++r) log.Enqueue(Range(r, r));
  gate.Notify();
  ASSERT_TRUE(log.WaitDurable(11).ok());
  std::vector<size_t> batches = store.batches();
  size_t total = 0;
  for (size_t b : batches) {
    EXPECT_LE(b, 4u);
    total += b;
  }
  EXPECT_EQ(total, 11u);
  // 1 was alone or with a few; the other ten went in batches of up to four.
  EXPECT_LE(batches.size(), 5u);
  ExpectLogIsOneTo(memory, 11);
}

TEST(GroupCommitLogTest, CallsOnDurableWithIncreasingRevisions) {
  MemoryLogStore store;
  GroupCommitLog log(&store);
  std::mutex mu;
  std::vector<int64_t> seen;
  log.SetOnDurable([&](int64_t r) {
    std::lock_guard l(mu);
    seen.push_back(r);
  });
  for (int64_t r = 1; r <= 200; ++r) log.Enqueue(Range(r, r));
  ASSERT_TRUE(log.WaitDurable(200).ok());
  // The callback runs after the revision is published; wait for the last one.
  EXPECT_TRUE(herd::testing::Eventually([&] {
    std::lock_guard l(mu);
    return !seen.empty() && seen.back() == 200;
  }));
  std::lock_guard l(mu);
  ASSERT_FALSE(seen.empty());
  EXPECT_EQ(seen.back(), 200);
  for (size_t i = 1; i < seen.size(); ++i) EXPECT_LT(seen[i - 1], seen[i]);
}

TEST(GroupCommitLogTest, AFailingStoreFailsEveryLaterWait) {
  MemoryLogStore memory;
  ControlledStore store(&memory);
  GroupCommitLog log(&store);
  log.Enqueue(Range(1, 2));
  ASSERT_TRUE(log.WaitDurable(2).ok());

  store.set_fail(true);
  log.Enqueue(Range(3, 3));
  absl::Status st = log.WaitDurable(3);
  EXPECT_EQ(st.code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(st.message().find("disk on fire"), absl::string_view::npos) << st;
  EXPECT_EQ(log.status(), st);

  // Sticky, even once the store would work again.
  store.set_fail(false);
  log.Enqueue(Range(4, 4));
  EXPECT_EQ(log.WaitDurable(4), st);
  EXPECT_EQ(log.WaitDurable(3), st);
  // What was durable stays durable.
  EXPECT_TRUE(log.WaitDurable(2).ok());
  EXPECT_EQ(log.DurableRevision(), 2);
  EXPECT_EQ(memory.LastRevision().value(), 2);
}

TEST(GroupCommitLogTest, AFailureWakesThreadsAlreadyWaiting) {
  MemoryLogStore memory;
  ControlledStore store(&memory);
  absl::Notification gate;
  store.set_gate(&gate);
  store.set_fail(true);
  GroupCommitLog log(&store);
  std::vector<std::thread> waiters;
  std::atomic<int> failed{0};
  for (int i = 1; i <= 4; ++i) {
    log.Enqueue(Range(i, i));
    waiters.emplace_back([&, i] {
      if (log.WaitDurable(i).code() == absl::StatusCode::kUnavailable) ++failed;
    });
  }
  gate.Notify();
  for (auto& t : waiters) t.join();
  EXPECT_EQ(failed.load(), 4);
}

TEST(GroupCommitLogTest, AGapInTheQueueIsAStickyError) {
  MemoryLogStore store;
  GroupCommitLog log(&store);
  std::vector<v1::Mutation> wrong = Range(2, 2);
#ifdef NDEBUG
  log.Enqueue(std::move(wrong));
  EXPECT_EQ(log.WaitDurable(2).code(), absl::StatusCode::kFailedPrecondition);
#else
  EXPECT_DEATH(log.Enqueue(std::move(wrong)), "revision");
#endif
}

// Many threads, each applying under a "state lock" and waiting outside it,
// as the master does.
void RunConcurrentWriters(LogStore* store, int threads, int per_thread) {
  GroupCommitLog log(store);
  std::mutex state_mu;
  int64_t next = 0;
  std::atomic<int> errors{0};
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      for (int i = 0; i < per_thread; ++i) {
        int64_t last;
        {
          std::lock_guard l(state_mu);
          // Some callers queue several mutations at once.
          int n = (i + t) % 5 == 0 ? 3 : 1;
          std::vector<v1::Mutation> ms;
          for (int k = 0; k < n; ++k) ms.push_back(RealisticMutation(++next));
          last = next;
          log.Enqueue(std::move(ms));
        }
        if (!log.WaitDurable(last).ok()) ++errors;
        if (log.DurableRevision() < last) ++errors;
      }
    });
  }
  for (auto& w : workers) w.join();
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(log.DurableRevision(), next);
  ExpectLogIsOneTo(*store, next);
}

TEST(GroupCommitLogTest, EightConcurrentWritersMemory) {
  MemoryLogStore store;
  RunConcurrentWriters(&store, 8, 2000);
}

TEST(GroupCommitLogTest, EightConcurrentWritersSqlite) {
  testing::TempDir dir;
  auto store = SqliteLogStore::Open(dir.File("herd.db"));
  ASSERT_TRUE(store.ok()) << store.status();
  RunConcurrentWriters(store->get(), 8, 150);
}

}  // namespace
}  // namespace herd::store
