// Conformance suite for LogStore: every backend runs the same tests. A test
// binary includes this header once and instantiates the suite for its
// backends (INSTANTIATE_TEST_SUITE_P(..., LogStoreConformance, ...)).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "store/log_store.h"
#include "store/test_util.h"

namespace herd::store {
namespace conformance {

using ::testing::HasSubstr;
using testing::Snapshot;
using testing::TaskObservedMutation;

struct Backend {
  std::string name;
  std::function<std::unique_ptr<LogStore>(const std::string& dir)> make;
};

inline std::vector<v1::Mutation> Range(int64_t first, int64_t last) {
  std::vector<v1::Mutation> out;
  for (int64_t r = first; r <= last; ++r) out.push_back(TaskObservedMutation(r));
  return out;
}

class LogStoreConformance : public ::testing::TestWithParam<Backend> {
 protected:
  void SetUp() override {
    store_ = GetParam().make(dir_.path());
    ASSERT_NE(store_, nullptr);
  }

  int64_t Last() {
    auto r = store_->LastRevision();
    EXPECT_TRUE(r.ok()) << r.status();
    return r.value_or(-1);
  }
  int64_t First() {
    auto r = store_->FirstRevision();
    EXPECT_TRUE(r.ok()) << r.status();
    return r.value_or(-1);
  }
  // Revisions ReadLog(from, to) visits; fails the test on error.
  std::vector<int64_t> Read(int64_t from, int64_t to) {
    std::vector<int64_t> revs;
    absl::Status st = store_->ReadLog(from, to, [&](const v1::Mutation& m) {
      revs.push_back(m.revision());
      return absl::OkStatus();
    });
    EXPECT_TRUE(st.ok()) << st;
    return revs;
  }
  absl::Status ReadStatus(int64_t from, int64_t to) {
    return store_->ReadLog(from, to, [](const v1::Mutation&) { return absl::OkStatus(); });
  }
  std::optional<int64_t> SnapshotAt(int64_t max_revision) {
    auto s = store_->ReadSnapshot(max_revision);
    EXPECT_TRUE(s.ok()) << s.status();
    if (!s.ok() || !s->has_value()) return std::nullopt;
    return (*s)->revision();
  }

  testing::TempDir dir_;
  std::unique_ptr<LogStore> store_;
};

inline std::vector<int64_t> Seq(int64_t first, int64_t last) {
  std::vector<int64_t> out;
  for (int64_t r = first; r <= last; ++r) out.push_back(r);
  return out;
}

TEST_P(LogStoreConformance, EmptyStore) {
  EXPECT_EQ(Last(), 0);
  EXPECT_EQ(First(), 0);
  EXPECT_EQ(SnapshotAt(100), std::nullopt);
  EXPECT_TRUE(Read(0, 100).empty());
  EXPECT_TRUE(store_->Compact(100).ok());
  EXPECT_EQ(First(), 0);
}

TEST_P(LogStoreConformance, AppendsConsecutiveBatchesAndReadsThemBack) {
  ASSERT_TRUE(store_->Append(Range(1, 3)).ok());
  ASSERT_TRUE(store_->Append(Range(4, 4)).ok());
  ASSERT_TRUE(store_->Append(Range(5, 9)).ok());
  EXPECT_EQ(Last(), 9);
  EXPECT_EQ(First(), 0);
  std::vector<v1::Mutation> got;
  ASSERT_TRUE(store_
                  ->ReadLog(1, 9,
                            [&](const v1::Mutation& m) {
                              got.push_back(m);
                              return absl::OkStatus();
                            })
                  .ok());
  ASSERT_EQ(got.size(), 9u);
  for (int64_t r = 1; r <= 9; ++r) {
    EXPECT_EQ(got[r - 1].SerializeAsString(), TaskObservedMutation(r).SerializeAsString());
  }
}

TEST_P(LogStoreConformance, EmptyAppendIsANoOp) {
  EXPECT_TRUE(store_->Append({}).ok());
  EXPECT_EQ(Last(), 0);
}

TEST_P(LogStoreConformance, FirstAppendMustBeRevisionOne) {
  EXPECT_EQ(store_->Append(Range(2, 3)).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(store_->Append(Range(0, 1)).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(Last(), 0);
}

TEST_P(LogStoreConformance, OutOfOrderAppendWritesNothing) {
  ASSERT_TRUE(store_->Append(Range(1, 2)).ok());
  // A gap before the batch.
  absl::Status st = store_->Append(Range(4, 5));
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(st.message(), HasSubstr("expected 3"));
  // A gap inside the batch: its valid head must not be written either.
  std::vector<v1::Mutation> holey = Range(3, 4);
  holey.push_back(TaskObservedMutation(6));
  EXPECT_EQ(store_->Append(holey).code(), absl::StatusCode::kFailedPrecondition);
  // A replay of an existing revision.
  EXPECT_EQ(store_->Append(Range(2, 3)).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(Last(), 2);
  EXPECT_EQ(Read(1, 100), Seq(1, 2));
  ASSERT_TRUE(store_->Append(Range(3, 4)).ok());
  EXPECT_EQ(Read(1, 100), Seq(1, 4));
}

TEST_P(LogStoreConformance, ReadLogRanges) {
  ASSERT_TRUE(store_->Append(Range(1, 10)).ok());
  EXPECT_EQ(Read(1, 10), Seq(1, 10));
  EXPECT_EQ(Read(-5, 3), Seq(1, 3));
  EXPECT_EQ(Read(0, 0), std::vector<int64_t>{});
  EXPECT_EQ(Read(4, 6), Seq(4, 6));
  EXPECT_EQ(Read(7, 7), Seq(7, 7));
  EXPECT_EQ(Read(8, 1000), Seq(8, 10));
  EXPECT_EQ(Read(6, 5), std::vector<int64_t>{});
  EXPECT_EQ(Read(11, 20), std::vector<int64_t>{});
}

TEST_P(LogStoreConformance, ReadLogStopsAtTheCallbacksError) {
  ASSERT_TRUE(store_->Append(Range(1, 10)).ok());
  int calls = 0;
  absl::Status st = store_->ReadLog(1, 10, [&](const v1::Mutation& m) {
    ++calls;
    if (m.revision() == 4) return absl::CancelledError("enough");
    return absl::OkStatus();
  });
  EXPECT_EQ(st, absl::CancelledError("enough"));
  EXPECT_EQ(calls, 4);
}

TEST_P(LogStoreConformance, ReadLogCallbackMayUseTheStore) {
  ASSERT_TRUE(store_->Append(Range(1, 3)).ok());
  absl::Status st = store_->ReadLog(1, 3, [&](const v1::Mutation& m) -> absl::Status {
    auto last = store_->LastRevision();
    if (!last.ok()) return last.status();
    if (m.revision() == 3) return store_->Append(Range(4, 4));
    return absl::OkStatus();
  });
  EXPECT_TRUE(st.ok()) << st;
  EXPECT_EQ(Last(), 4);
}

TEST_P(LogStoreConformance, LargeBatchReadsBackAcrossChunks) {
  ASSERT_TRUE(store_->Append(Range(1, 5000)).ok());
  EXPECT_EQ(Read(1, 5000), Seq(1, 5000));
  EXPECT_EQ(Read(1000, 3000), Seq(1000, 3000));
}

TEST_P(LogStoreConformance, SnapshotsAtOrBeforeARevision) {
  ASSERT_TRUE(store_->Append(Range(1, 10)).ok());
  EXPECT_EQ(store_->WriteSnapshot(Snapshot(11)).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(store_->WriteSnapshot(Snapshot(-1)).code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(store_->WriteSnapshot(Snapshot(3)).ok());
  ASSERT_TRUE(store_->WriteSnapshot(Snapshot(7)).ok());
  ASSERT_TRUE(store_->WriteSnapshot(Snapshot(10)).ok());
  EXPECT_EQ(SnapshotAt(2), std::nullopt);
  EXPECT_EQ(SnapshotAt(3), 3);
  EXPECT_EQ(SnapshotAt(6), 3);
  EXPECT_EQ(SnapshotAt(7), 7);
  EXPECT_EQ(SnapshotAt(1000), 10);
  // Snapshots alone do not compact anything.
  EXPECT_EQ(First(), 0);
  EXPECT_EQ(Last(), 10);
  // Rewriting a revision replaces it.
  ASSERT_TRUE(store_->WriteSnapshot(Snapshot(7, "replaced")).ok());
  auto s = store_->ReadSnapshot(8);
  ASSERT_TRUE(s.ok() && s->has_value());
  EXPECT_EQ((*s)->cell(), "replaced");
  EXPECT_EQ((*s)->machines(0).name(), "machine-7");
}

TEST_P(LogStoreConformance, SnapshotAtRevisionZero) {
  ASSERT_TRUE(store_->WriteSnapshot(Snapshot(0)).ok());
  EXPECT_EQ(SnapshotAt(0), 0);
  EXPECT_EQ(Last(), 0);
  ASSERT_TRUE(store_->Compact(5).ok());
  EXPECT_EQ(First(), 0);
  ASSERT_TRUE(store_->Append(Range(1, 2)).ok());
  EXPECT_EQ(Read(0, 10), Seq(1, 2));
}

TEST_P(LogStoreConformance, CompactDropsOlderSnapshotsAndTheLogBehindThem) {
  ASSERT_TRUE(store_->Append(Range(1, 10)).ok());
  ASSERT_TRUE(store_->WriteSnapshot(Snapshot(3)).ok());
  ASSERT_TRUE(store_->WriteSnapshot(Snapshot(6)).ok());
  ASSERT_TRUE(store_->WriteSnapshot(Snapshot(9)).ok());

  // Nothing at or before 2: a no-op.
  ASSERT_TRUE(store_->Compact(2).ok());
  EXPECT_EQ(First(), 0);
  EXPECT_EQ(Read(1, 10), Seq(1, 10));

  // The newest snapshot at or before 5 is 3: keep it, drop log 1..3.
  ASSERT_TRUE(store_->Compact(5).ok());
  EXPECT_EQ(First(), 3);
  EXPECT_EQ(Last(), 10);
  EXPECT_EQ(SnapshotAt(3), 3);
  EXPECT_EQ(Read(4, 10), Seq(4, 10));
  EXPECT_EQ(ReadStatus(1, 10).code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(ReadStatus(3, 10).code(), absl::StatusCode::kOutOfRange);
  EXPECT_TRUE(ReadStatus(1, 0).ok());  // empty range: nothing missing

  ASSERT_TRUE(store_->Compact(8).ok());
  EXPECT_EQ(First(), 6);
  EXPECT_EQ(SnapshotAt(5), std::nullopt);
  EXPECT_EQ(SnapshotAt(8), 6);
  EXPECT_EQ(Read(7, 10), Seq(7, 10));

  // Compacting behind the current point changes nothing.
  ASSERT_TRUE(store_->Compact(4).ok());
  EXPECT_EQ(First(), 6);

  // A snapshot older than the compaction point would be a lie.
  EXPECT_EQ(store_->WriteSnapshot(Snapshot(5)).code(), absl::StatusCode::kFailedPrecondition);

  ASSERT_TRUE(store_->Compact(100).ok());
  EXPECT_EQ(First(), 9);
  EXPECT_EQ(Last(), 10);
  EXPECT_EQ(Read(10, 10), Seq(10, 10));
}

TEST_P(LogStoreConformance, CompactingTheWholeLogKeepsTheRevision) {
  ASSERT_TRUE(store_->Append(Range(1, 5)).ok());
  ASSERT_TRUE(store_->WriteSnapshot(Snapshot(5)).ok());
  ASSERT_TRUE(store_->Compact(5).ok());
  EXPECT_EQ(Last(), 5);
  EXPECT_EQ(First(), 5);
  EXPECT_TRUE(Read(6, 100).empty());
  EXPECT_EQ(store_->Append(Range(5, 5)).code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(store_->Append(Range(6, 7)).ok());
  EXPECT_EQ(Last(), 7);
  EXPECT_EQ(Read(6, 100), Seq(6, 7));
}

inline std::string BackendName(const ::testing::TestParamInfo<Backend>& info) { return info.param.name; }

}  // namespace conformance
}  // namespace herd::store
