// SQLite-specific behaviour; the LogStore contract itself is tested by the
// conformance suite in log_store_test.cc.
#include "store/sqlite/sqlite_log_store.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "store/group_commit.h"
#include "store/test_util.h"

namespace herd::store {
namespace {

using ::testing::HasSubstr;
using testing::RealisticMutation;
using testing::Snapshot;
using testing::TaskObservedMutation;

std::vector<v1::Mutation> Mutations(int64_t first, int64_t last) {
  std::vector<v1::Mutation> out;
  for (int64_t r = first; r <= last; ++r) out.push_back(TaskObservedMutation(r));
  return out;
}

std::unique_ptr<SqliteLogStore> MustOpen(const std::string& path) {
  auto s = SqliteLogStore::Open(path);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? std::move(s).value() : nullptr;
}

// Runs SQL on the file behind the store's back.
void RawExec(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  char* err = nullptr;
  int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err);
  EXPECT_EQ(rc, SQLITE_OK) << (err ? err : "");
  sqlite3_free(err);
  sqlite3_close(db);
}

TEST(SqliteLogStoreTest, ReopenKeepsEverything) {
  testing::TempDir dir;
  const std::string path = dir.File("herd.db");
  {
    auto store = MustOpen(path);
    ASSERT_NE(store, nullptr);
    ASSERT_TRUE(store->Append(Mutations(1, 20)).ok());
    ASSERT_TRUE(store->WriteSnapshot(Snapshot(5)).ok());
    ASSERT_TRUE(store->WriteSnapshot(Snapshot(12)).ok());
    ASSERT_TRUE(store->Compact(6).ok());
  }
  auto store = MustOpen(path);
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->LastRevision().value(), 20);
  EXPECT_EQ(store->FirstRevision().value(), 5);
  auto snap = store->ReadSnapshot(100);
  ASSERT_TRUE(snap.ok() && snap->has_value());
  EXPECT_EQ((*snap)->revision(), 12);
  EXPECT_EQ((*snap)->machines(0).name(), "machine-12");
  int64_t next = 6;
  ASSERT_TRUE(store
                  ->ReadLog(6, 20,
                            [&](const v1::Mutation& m) {
                              EXPECT_EQ(m.SerializeAsString(),
                                        TaskObservedMutation(next).SerializeAsString());
                              ++next;
                              return absl::OkStatus();
                            })
                  .ok());
  EXPECT_EQ(next, 21);
  EXPECT_EQ(store->ReadLog(5, 20, [](const v1::Mutation&) { return absl::OkStatus(); }).code(),
            absl::StatusCode::kOutOfRange);
  ASSERT_TRUE(store->Append(Mutations(21, 21)).ok());
}

TEST(SqliteLogStoreTest, OneWriterPerFile) {
  testing::TempDir dir;
  auto first = MustOpen(dir.File("herd.db"));
  ASSERT_NE(first, nullptr);
  auto second = SqliteLogStore::Open(dir.File("herd.db"));
  EXPECT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(second.status().message(), HasSubstr("another process"));
  first.reset();
  EXPECT_TRUE(SqliteLogStore::Open(dir.File("herd.db")).ok());
}

TEST(SqliteLogStoreTest, ReadOnlyReaderFollowsARunningWriter) {
  testing::TempDir dir;
  const std::string path = dir.File("herd.db");
  auto writer = MustOpen(path);
  ASSERT_NE(writer, nullptr);
  ASSERT_TRUE(writer->Append(Mutations(1, 3)).ok());

  auto reader = SqliteLogStore::OpenReadOnly(path);
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_TRUE((*reader)->read_only());
  EXPECT_EQ((*reader)->LastRevision().value(), 3);
  ASSERT_TRUE(writer->Append(Mutations(4, 6)).ok());
  ASSERT_TRUE(writer->WriteSnapshot(Snapshot(6)).ok());
  EXPECT_EQ((*reader)->LastRevision().value(), 6);
  auto snap = (*reader)->ReadSnapshot(6);
  ASSERT_TRUE(snap.ok() && snap->has_value());
  int n = 0;
  ASSERT_TRUE((*reader)
                  ->ReadLog(1, 6,
                            [&](const v1::Mutation&) {
                              ++n;
                              return absl::OkStatus();
                            })
                  .ok());
  EXPECT_EQ(n, 6);

  EXPECT_EQ((*reader)->Append(Mutations(7, 7)).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ((*reader)->WriteSnapshot(Snapshot(6)).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ((*reader)->Compact(6).code(), absl::StatusCode::kFailedPrecondition);
  // The reader does not hold the writer's lock, and the writer keeps going.
  ASSERT_TRUE(writer->Append(Mutations(7, 7)).ok());
}

TEST(SqliteLogStoreTest, ReadOnlyAfterTheWriterClosed) {
  testing::TempDir dir;
  const std::string path = dir.File("herd.db");
  {
    auto writer = MustOpen(path);
    ASSERT_NE(writer, nullptr);
    ASSERT_TRUE(writer->Append(Mutations(1, 3)).ok());
  }
  auto reader = SqliteLogStore::OpenReadOnly(path);
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_EQ((*reader)->LastRevision().value(), 3);
  // And a writer may open while the reader is there.
  auto writer = MustOpen(path);
  ASSERT_NE(writer, nullptr);
  ASSERT_TRUE(writer->Append(Mutations(4, 4)).ok());
  EXPECT_EQ((*reader)->LastRevision().value(), 4);
}

TEST(SqliteLogStoreTest, OpenReadOnlyNeedsAStore) {
  testing::TempDir dir;
  EXPECT_EQ(SqliteLogStore::OpenReadOnly(dir.File("missing.db")).status().code(),
            absl::StatusCode::kNotFound);
}

TEST(SqliteLogStoreTest, RefusesAForeignDatabase) {
  testing::TempDir dir;
  const std::string path = dir.File("other.db");
  RawExec(path, "CREATE TABLE t(x)");
  EXPECT_EQ(SqliteLogStore::Open(path).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(SqliteLogStore::OpenReadOnly(path).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(SqliteLogStoreTest, RefusesANewerSchema) {
  testing::TempDir dir;
  const std::string path = dir.File("herd.db");
  ASSERT_NE(MustOpen(path), nullptr);
  RawExec(path, "UPDATE meta SET value = 99 WHERE key = 'schema_version'");
  auto s = SqliteLogStore::Open(path);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.status().message(), HasSubstr("schema version 99"));
}

TEST(SqliteLogStoreTest, CorruptLogRowIsDataLossNamingTheRevision) {
  testing::TempDir dir;
  const std::string path = dir.File("herd.db");
  {
    auto store = MustOpen(path);
    ASSERT_NE(store, nullptr);
    ASSERT_TRUE(store->Append(Mutations(1, 3)).ok());
  }
  RawExec(path, "UPDATE log SET data = x'ffffffffffff' WHERE revision = 2");
  auto store = MustOpen(path);
  ASSERT_NE(store, nullptr);
  std::vector<int64_t> seen;
  absl::Status st = store->ReadLog(1, 3, [&](const v1::Mutation& m) {
    seen.push_back(m.revision());
    return absl::OkStatus();
  });
  EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(st.message(), HasSubstr("revision 2"));
  EXPECT_TRUE(seen.empty());  // the chunk is rejected before fn sees it
}

TEST(SqliteLogStoreTest, MisplacedLogRowIsDataLoss) {
  testing::TempDir dir;
  const std::string path = dir.File("herd.db");
  {
    auto store = MustOpen(path);
    ASSERT_NE(store, nullptr);
    ASSERT_TRUE(store->Append(Mutations(1, 3)).ok());
  }
  RawExec(path, "DELETE FROM log WHERE revision = 2");
  auto store = MustOpen(path);
  ASSERT_NE(store, nullptr);
  absl::Status st = store->ReadLog(1, 3, [](const v1::Mutation&) { return absl::OkStatus(); });
  EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(st.message(), HasSubstr("revision 2 is missing"));
}

TEST(SqliteLogStoreTest, CorruptSnapshotIsDataLossNamingTheRevision) {
  testing::TempDir dir;
  const std::string path = dir.File("herd.db");
  {
    auto store = MustOpen(path);
    ASSERT_NE(store, nullptr);
    ASSERT_TRUE(store->Append(Mutations(1, 3)).ok());
    ASSERT_TRUE(store->WriteSnapshot(Snapshot(3)).ok());
  }
  RawExec(path, "UPDATE snapshots SET data = x'0a' WHERE revision = 3");
  auto store = MustOpen(path);
  ASSERT_NE(store, nullptr);
  auto snap = store->ReadSnapshot(3);
  EXPECT_EQ(snap.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(snap.status().message(), HasSubstr("revision 3"));
}

// --- Crash test -------------------------------------------------------------

// The child: appends forever through group commit from four threads and
// writes each acknowledged (durable) revision to `fd`. Never returns.
[[noreturn]] void CrashChild(const std::string& path, int fd) {
  auto store = SqliteLogStore::Open(path);
  if (!store.ok()) _exit(3);
  auto last = (*store)->LastRevision();
  if (!last.ok()) _exit(4);
  GroupCommitLog log(store->get());
  std::mutex state_mu;
  int64_t next = *last;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0;; ++i) {
        int64_t rev;
        {
          std::lock_guard l(state_mu);
          int n = (i + t) % 4 == 0 ? 3 : 1;
          std::vector<v1::Mutation> ms;
          for (int k = 0; k < n; ++k) ms.push_back(RealisticMutation(++next));
          rev = next;
          log.Enqueue(std::move(ms));
        }
        if (!log.WaitDurable(rev).ok()) _exit(5);
        // <= PIPE_BUF bytes: atomic with respect to the other threads.
        if (write(fd, &rev, sizeof(rev)) != sizeof(rev)) _exit(6);
      }
    });
  }
  for (auto& t : threads) t.join();
  _exit(7);
}

// Reads revisions from `fd` into `max_acked` until `deadline` (or EOF if
// deadline is nullopt).
void ReadAcks(int fd, int64_t& max_acked,
              std::optional<std::chrono::steady_clock::time_point> deadline) {
  std::vector<char> pending;
  char buf[4096];
  for (;;) {
    if (deadline) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                      *deadline - std::chrono::steady_clock::now())
                      .count();
      if (left <= 0) break;
      pollfd p{fd, POLLIN, 0};
      if (poll(&p, 1, static_cast<int>(left)) <= 0) continue;
    }
    ssize_t n = read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    pending.insert(pending.end(), buf, buf + n);
    size_t whole = pending.size() / sizeof(int64_t) * sizeof(int64_t);
    for (size_t off = 0; off < whole; off += sizeof(int64_t)) {
      int64_t rev;
      std::memcpy(&rev, pending.data() + off, sizeof(rev));
      max_acked = std::max(max_acked, rev);
    }
    pending.erase(pending.begin(), pending.begin() + static_cast<std::ptrdiff_t>(whole));
  }
}

TEST(SqliteCrashTest, AcknowledgedAppendsSurviveSigkill) {
  testing::TempDir dir;
  const std::string path = dir.File("herd.db");
  std::mt19937 rng(::testing::UnitTest::GetInstance()->random_seed());
  std::uniform_int_distribution<int> delay_ms(1, 250);
  int64_t acked_before = 0;
  for (int round = 0; round < 20; ++round) {
    int fds[2];
    ASSERT_EQ(pipe(fds), 0);
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      close(fds[0]);
      CrashChild(path, fds[1]);
    }
    close(fds[1]);
    const int delay = delay_ms(rng);
    int64_t max_acked = acked_before;
    ReadAcks(fds[0], max_acked,
             std::chrono::steady_clock::now() + std::chrono::milliseconds(delay));
    ASSERT_EQ(kill(pid, SIGKILL), 0);
    int wstatus = 0;
    ASSERT_EQ(waitpid(pid, &wstatus, 0), pid);
    // The child died of our signal, not of an error exit of its own.
    ASSERT_TRUE(WIFSIGNALED(wstatus)) << "child exited with " << WEXITSTATUS(wstatus);
    ReadAcks(fds[0], max_acked, std::nullopt);  // what it wrote before dying
    close(fds[0]);

    auto store = SqliteLogStore::Open(path);
    ASSERT_TRUE(store.ok()) << store.status();
    int64_t last = (*store)->LastRevision().value();
    EXPECT_GE(last, max_acked) << "round " << round << ", killed after " << delay << " ms";
    int64_t next = 1;
    absl::Status st = (*store)->ReadLog(1, last, [&](const v1::Mutation& m) {
      if (m.revision() != next) return absl::InternalError("gap");
      if (!google::protobuf::util::MessageDifferencer::Equals(m, RealisticMutation(next))) {
        return absl::InternalError(absl::StrCat("wrong content at ", next));
      }
      ++next;
      return absl::OkStatus();
    });
    ASSERT_TRUE(st.ok()) << st << " round " << round;
    EXPECT_EQ(next, last + 1);
    ::testing::Test::RecordProperty(absl::StrCat("round", round),
                                    absl::StrCat(delay, "ms acked=", max_acked, " last=", last));
    acked_before = last;
  }
  EXPECT_GT(acked_before, 0);
}

}  // namespace
}  // namespace herd::store
