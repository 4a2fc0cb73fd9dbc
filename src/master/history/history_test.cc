// The history database and its recorder: rows from mutations and usage,
// read-only queries, rollup and retention, and a recorder that resumes
// where it stopped.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include "absl/strings/match.h"
#include "base/clock.h"
#include "master/core/committer.h"
#include "master/history/history_db.h"
#include "master/history/recorder.h"
#include "store/log_store.h"
#include "store/test_util.h"
#include "testing/builders.h"

namespace herd::master::history {
namespace {

using namespace herd::testing;  // NOLINT

constexpr int64_t kMinute = 60'000;

absl::StatusOr<std::unique_ptr<HistoryDb>> OpenIn(const store::testing::TempDir& dir, Options o = {}) {
  o.path = dir.File("history.db");
  return HistoryDb::Open(o);
}

// The single value of a one-row, one-column query.
v1::QueryValue Scalar(const HistoryDb& db, const std::string& sql) {
  absl::StatusOr<v1::QueryHistoryResponse> r = db.Query(sql, {});
  EXPECT_TRUE(r.ok()) << sql << ": " << r.status();
  if (!r.ok() || r->rows_size() != 1 || r->rows(0).values_size() != 1) {
    ADD_FAILURE() << sql << ": not one value";
    return {};
  }
  return r->rows(0).values(0);
}

UsageRow Usage(const std::string& job, int32_t index, int64_t time_ms, int64_t period_ms, double cpu, double mem) {
  UsageRow u;
  u.time_ms = time_ms;
  u.period_ms = period_ms;
  u.job = job;
  u.user = "alice";
  u.task_index = index;
  u.machine = "m1";
  u.cpu_millis = cpu;
  u.cpu_millis_max = static_cast<int64_t>(cpu);
  u.memory_bytes = mem;
  u.memory_bytes_max = static_cast<int64_t>(mem);
  u.samples = 1;
  return u;
}

TEST(HistoryDb, WritesRowsAndRemembersTheRecordedRevisionAcrossReopening) {
  store::testing::TempDir dir;
  {
    auto db = OpenIn(dir);
    ASSERT_TRUE(db.ok()) << db.status();
    EXPECT_EQ((*db)->recorded_revision(), 0);
    Batch b;
    TaskEventRow e;
    e.revision = 7;
    e.time_ms = 1000;
    e.job = "alice/web";
    e.user = "alice";
    e.event = "exited";
    e.exit_code = 137;
    e.oom_killed = true;
    b.task_events.push_back(e);
    b.revision = 7;
    ASSERT_TRUE((*db)->Write(b).ok());
    EXPECT_EQ((*db)->recorded_revision(), 7);
  }
  auto db = OpenIn(dir);
  ASSERT_TRUE(db.ok()) << db.status();
  EXPECT_EQ((*db)->recorded_revision(), 7);
  EXPECT_EQ(Scalar(**db, "SELECT job FROM task_events WHERE oom_killed").text(), "alice/web");
  absl::StatusOr<v1::QueryHistoryResponse> r = (*db)->Query("SELECT revision, exit_code, NULL AS n FROM task_events", {});
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->columns_size(), 3);
  EXPECT_EQ(r->columns(2), "n");
  EXPECT_EQ(r->rows(0).values(1).integer(), 137);
  EXPECT_TRUE(r->rows(0).values(2).is_null());
  EXPECT_EQ(r->recorded_revision(), 7);
}

TEST(HistoryDb, RefusesAnotherProgramsDatabaseAndBadSettings) {
  store::testing::TempDir dir;
  Options o;
  o.sample_interval_ms = 100;  // below a second
  EXPECT_EQ(OpenIn(dir, o).status().code(), absl::StatusCode::kInvalidArgument);
  // A SQLite file with another application id (the embedded store's).
  {
    sqlite3* raw = nullptr;
    ASSERT_EQ(sqlite3_open(dir.File("history.db").c_str(), &raw), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(raw, "PRAGMA application_id=1213416004", nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_close(raw);
  }
  absl::Status st = OpenIn(dir).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition) << st;
}

TEST(HistoryDb, QueriesOnlyRead) {
  store::testing::TempDir dir;
  auto db = OpenIn(dir);
  ASSERT_TRUE(db.ok()) << db.status();
  const char* refused[] = {
      "DELETE FROM task_events",
      "INSERT INTO jobs (revision) VALUES (1)",
      "DROP TABLE usage",
      "UPDATE meta SET value = 0",
      "CREATE TABLE x (a)",
      "ATTACH DATABASE '/tmp/other.db' AS other",
      "PRAGMA journal_mode=DELETE",
      "PRAGMA writable_schema=1",
      "SELECT load_extension('/tmp/x.so')",
  };
  for (const char* sql : refused) {
    absl::StatusOr<v1::QueryHistoryResponse> r = (*db)->Query(sql, {});
    EXPECT_FALSE(r.ok()) << sql;
    EXPECT_TRUE(r.status().code() == absl::StatusCode::kPermissionDenied ||
                r.status().code() == absl::StatusCode::kInvalidArgument)
        << sql << ": " << r.status();
  }
  EXPECT_EQ((*db)->Query("SELECT 1; DELETE FROM jobs", {}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*db)->Query("SELEC 1", {}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*db)->Query("", {}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*db)->Query(std::string(HistoryDb::kMaxSqlBytes + 1, ' '), {}).status().code(),
            absl::StatusCode::kInvalidArgument);
  // Too big a value, and a query that never ends.
  EXPECT_EQ((*db)->Query("SELECT length(zeroblob(1000000000))", {}).status().code(),
            absl::StatusCode::kInvalidArgument);
  QueryLimits quick;
  quick.timeout = absl::Milliseconds(50);
  absl::Status forever =
      (*db)->Query("WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) SELECT max(i) FROM n", quick)
          .status();
  EXPECT_EQ(forever.code(), absl::StatusCode::kDeadlineExceeded) << forever;
  // Trailing semicolons and comments are one statement; the tables are
  // still all there.
  EXPECT_EQ(Scalar(**db, "SELECT count(*) FROM sqlite_master WHERE type = 'table'; -- the tables\n").integer(), 6);
}

TEST(HistoryDb, NoRowOutgrowsTheAnswersBudgetAndTextIsUtf8) {
  store::testing::TempDir dir;
  auto db = OpenIn(dir);
  ASSERT_TRUE(db.ok());
  // 100 columns of 256 KiB each (25 MiB in one row): cut off before the
  // budget, never copied whole; no half row.
  std::string wide = "WITH x(b) AS (SELECT zeroblob(262144)) SELECT b";
  for (int i = 1; i < HistoryDb::kMaxColumns; ++i) wide += ", b";
  wide += " FROM x";
  auto r = (*db)->Query(wide, {});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->truncated());
  EXPECT_EQ(r->rows_size(), 0);
  // More columns than that are refused.
  std::string many = "SELECT 1";
  for (int i = 1; i <= HistoryDb::kMaxColumns; ++i) many += ", 1";
  absl::Status too_many = (*db)->Query(many, {}).status();
  EXPECT_EQ(too_many.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(too_many.message(), "too many columns")) << too_many;
  // Bytes that are not UTF-8 come back as hex, blobs too.
  r = (*db)->Query("SELECT CAST(x'ff00fe' AS TEXT), x'0102', 'h\xc3\xa9'", {});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->rows(0).values(0).hex(), "ff00fe");
  EXPECT_EQ(r->rows(0).values(1).hex(), "0102");
  EXPECT_EQ(r->rows(0).values(2).text(), "h\xc3\xa9");
  // Many small values count their heap too: 8 MiB of NULLs is far fewer
  // than 8 Mi of them.
  QueryLimits limits;
  limits.max_rows = 100'000;
  r = (*db)->Query("WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n LIMIT 100000) "
                   "SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL FROM n",
                   limits);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->truncated());
  EXPECT_LT(r->rows_size(), 100'000);
  EXPECT_GT(r->rows_size(), 1000);
}

TEST(HistoryDb, TruncatesAtMaxRows) {
  store::testing::TempDir dir;
  auto db = OpenIn(dir);
  ASSERT_TRUE(db.ok());
  QueryLimits limits;
  limits.max_rows = 10;
  auto r = (*db)->Query("WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n LIMIT 25) SELECT i FROM n",
                        limits);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->rows_size(), 10);
  EXPECT_TRUE(r->truncated());
  limits.max_rows = 25;
  r = (*db)->Query("WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n LIMIT 25) SELECT i FROM n", limits);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->rows_size(), 25);
  EXPECT_FALSE(r->truncated());
}

TEST(HistoryDb, RollsOldUsageUpKeepingCpuSecondsAndDropsWhatIsPastRetention) {
  store::testing::TempDir dir;
  Options o;
  o.sample_interval_ms = kMinute;
  o.rollup_ms = 15 * kMinute;
  o.raw_keep_ms = 60 * kMinute;
  o.retention_ms = 24 * 60 * kMinute;
  auto db = OpenIn(dir, o);
  ASSERT_TRUE(db.ok()) << db.status();
  const int64_t day = 24 * 60 * kMinute;
  const int64_t start = 100 * day;  // a multiple of the rollup period
  Batch b;
  // Task 0: 30 one-minute rows of 1,000..1,029 millicores; task 1 ran for 5
  // of them only.
  for (int i = 0; i < 30; ++i) {
    b.usage.push_back(Usage("alice/web", 0, start + i * kMinute, kMinute, 1000 + i, 1 << 20));
    if (i < 5) b.usage.push_back(Usage("alice/web", 1, start + i * kMinute, kMinute, 600, 2 << 20));
  }
  b.usage.push_back(Usage("alice/old", 0, start - 2 * day, kMinute, 5, 5));  // past retention
  UsageRow m = Usage("", 0, start, kMinute, 3000, 4 << 20);
  m.machine = "m1";
  b.machine_usage.push_back(m);
  JobRow old;
  old.time_ms = start - 2 * day;
  old.job = "alice/old";
  old.event = "submitted";
  b.jobs.push_back(old);
  ASSERT_TRUE((*db)->Write(b).ok());
  const std::string cpu_seconds = "SELECT sum(cpu_millis * period_ms) / 1e6 FROM usage WHERE job = 'alice/web'";
  const double before = Scalar(**db, cpu_seconds).real();
  EXPECT_NEAR(before, 60.0 * (30 * 1000 + 29 * 30 / 2) / 1000 + 5 * 60 * 0.6, 1e-6);

  // An hour later nothing is old enough to roll up yet.
  ASSERT_TRUE((*db)->Maintain(start + 60 * kMinute).ok());
  EXPECT_EQ(Scalar(**db, "SELECT count(*) FROM usage WHERE job = 'alice/web'").integer(), 35);
  EXPECT_EQ(Scalar(**db, "SELECT count(*) FROM usage WHERE job = 'alice/old'").integer(), 0);
  EXPECT_EQ(Scalar(**db, "SELECT count(*) FROM jobs").integer(), 0);

  // Two hours later: every row is older than an hour, so 15-minute rows.
  ASSERT_TRUE((*db)->Maintain(start + 120 * kMinute).ok());
  EXPECT_EQ(Scalar(**db, "SELECT count(*) FROM usage WHERE job = 'alice/web' AND task_index = 0").integer(), 2);
  EXPECT_EQ(Scalar(**db, "SELECT count(*) FROM usage WHERE job = 'alice/web' AND task_index = 1").integer(), 1);
  EXPECT_EQ(Scalar(**db, "SELECT min(period_ms) FROM usage").integer(), 15 * kMinute);
  EXPECT_NEAR(Scalar(**db, cpu_seconds).real(), before, 1e-6);
  EXPECT_EQ(Scalar(**db, "SELECT max(cpu_millis_max) FROM usage").integer(), 1029);
  EXPECT_EQ(Scalar(**db, "SELECT sum(samples) FROM usage").integer(), 35);
  EXPECT_EQ(Scalar(**db, "SELECT period_ms FROM machine_usage").integer(), 15 * kMinute);
  // Maintaining again changes nothing.
  ASSERT_TRUE((*db)->Maintain(start + 121 * kMinute).ok());
  EXPECT_EQ(Scalar(**db, "SELECT count(*) FROM usage").integer(), 3);
  EXPECT_NEAR(Scalar(**db, cpu_seconds).real(), before, 1e-6);
}

class RecorderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto db = OpenIn(dir_);
    ASSERT_TRUE(db.ok()) << db.status();
    db_ = std::move(*db);
    committer_ = std::make_unique<Committer>(cell::CellState(), &store_, &clock_, Committer::Options{});
  }
  // Stamped now (the builders' fixed times would be past retention).
  int64_t Commit(std::vector<v1::Mutation> muts) {
    for (v1::Mutation& m : muts) m.set_time_ms(clock_.NowMs());
    auto rev = committer_->Commit("alice", [&](const cell::CellState&) { return muts; });
    EXPECT_TRUE(rev.ok()) << rev.status();
    return rev.ok() ? *rev : 0;
  }
  int64_t Count(const std::string& sql) { return Scalar(*db_, sql).integer(); }

  store::testing::TempDir dir_;
  ManualClock clock_;
  store::MemoryLogStore store_;
  std::unique_ptr<HistoryDb> db_;
  std::unique_ptr<Committer> committer_;
};

TEST_F(RecorderTest, RecordsJobsTaskEventsAndUsage) {
  Recorder rec(db_.get(), &clock_);
  rec.Start(committer_.get(), &store_);
  Commit({Register(MachineBuilder("m1").Cpu(4000).Memory(8ll << 30).Address("m1:1").Build())});
  Commit({Submit(JobBuilder("web").Tasks(2).Cpu(500).Memory(1 << 20).Env("TOKEN", "s3cret").Build())});
  Commit({Schedule("alice/web", 0, "m1")});
  Commit({Schedule("alice/web", 1, "m1")});
  const int64_t inc0 = committer_->Read([](const cell::CellState& s) {
    return s.FindJob("alice/web")->tasks[0].incarnation();
  });
  Commit({Observed(Ref("alice/web", 0, inc0), v1::Task::ACTIVE, 42)});
  v1::Mutation oom = Exited(Ref("alice/web", 0, inc0), 137, 9);
  oom.mutable_task_exited()->set_oom_killed(true);
  oom.mutable_task_exited()->set_reason("killed: out of memory");
  const int64_t last = Commit({oom});
  ASSERT_TRUE(rec.WaitRecorded(last, absl::Seconds(30)));

  EXPECT_EQ(Count("SELECT count(*) FROM jobs WHERE job = 'alice/web' AND event = 'submitted' AND version = 1"), 1);
  // Secrets stay out of the history.
  EXPECT_EQ(Count("SELECT count(*) FROM jobs WHERE spec LIKE '%s3cret%'"), 0);
  EXPECT_EQ(Count("SELECT count(*) FROM jobs WHERE spec LIKE '%TOKEN%(hidden)%'"), 1);
  EXPECT_EQ(Count("SELECT count(*) FROM task_events WHERE event = 'scheduled' AND machine = 'm1'"), 2);
  EXPECT_EQ(Scalar(*db_, "SELECT phase FROM task_events WHERE event = 'observed'").text(), "ACTIVE");
  EXPECT_EQ(Scalar(*db_, "SELECT machine FROM task_events WHERE oom_killed AND task_index = 0").text(), "m1");
  EXPECT_EQ(Count("SELECT incarnation FROM task_events WHERE event = 'exited'"), inc0);
  EXPECT_EQ(Scalar(*db_, "SELECT event FROM machine_events").text(), "registered");

  // Usage: two replies in one period average into one row per task.
  for (int64_t cpu : {100, 300}) {
    v1::PollResponse reply;
    reply.mutable_machine_usage()->set_cpu_millis(cpu * 2);
    reply.mutable_machine_usage()->set_sampled_ms(clock_.NowMs());
    for (int32_t i : {0, 1}) {
      v1::RunStatus* r = reply.add_runs();
      *r->mutable_ref() = Ref("alice/web", i, 1);
      r->mutable_usage()->set_cpu_millis(cpu + i);
      r->mutable_usage()->set_memory_working_set_bytes(1000 * cpu);
      r->mutable_usage()->set_sampled_ms(clock_.NowMs());
    }
    rec.OnReply("m1", reply);
    clock_.AdvanceMs(10'000);
  }
  rec.FlushUsage();
  EXPECT_EQ(Count("SELECT count(*) FROM usage"), 2);
  EXPECT_DOUBLE_EQ(Scalar(*db_, "SELECT cpu_millis FROM usage WHERE task_index = 1").real(), 201);
  EXPECT_EQ(Count("SELECT cpu_millis_max FROM usage WHERE task_index = 0"), 300);
  EXPECT_EQ(Count("SELECT period_ms FROM usage WHERE task_index = 0"), 20'000);
  EXPECT_EQ(Scalar(*db_, "SELECT machine FROM usage WHERE task_index = 0").text(), "m1");
  EXPECT_DOUBLE_EQ(Scalar(*db_, "SELECT memory_bytes FROM usage WHERE task_index = 0").real(), 200'000);
  EXPECT_DOUBLE_EQ(Scalar(*db_, "SELECT cpu_millis FROM machine_usage").real(), 400);
  rec.Stop();
}

TEST_F(RecorderTest, AnUpdateIsANewVersionAndARestartedRecorderRecordsOnlyWhatItMissed) {
  const v1::JobSpec v1 = JobBuilder("web").Tasks(2).Cpu(500).Memory(1 << 20).Build();
  int64_t submitted;
  {
    Recorder rec(db_.get(), &clock_);
    rec.Start(committer_.get(), &store_);
    Commit({Register(MachineBuilder("m1").Cpu(4000).Memory(8ll << 30).Address("m1:1").Build())});
    submitted = Commit({Submit(v1)});
    ASSERT_TRUE(rec.WaitRecorded(submitted, absl::Seconds(30)));
  }
  // Changed while nobody recorded.
  v1::JobSpec v2 = v1;
  v2.mutable_task()->add_command("/bin/true");
  Commit({Update(v2, {}, {}, {}, 1)});
  const int64_t killed = Commit({Kill("alice/web", "done")});
  Recorder rec(db_.get(), &clock_);
  rec.Start(committer_.get(), &store_);
  ASSERT_TRUE(rec.WaitRecorded(killed, absl::Seconds(30)));
  EXPECT_EQ(Count("SELECT count(*) FROM jobs WHERE event = 'submitted'"), 1);
  EXPECT_EQ(Count("SELECT version FROM jobs WHERE event = 'updated'"), 2);
  EXPECT_EQ(Count("SELECT version FROM jobs WHERE event = 'killed'"), 2);
  EXPECT_EQ(Count("SELECT count(*) FROM machine_events"), 1);
  EXPECT_EQ(db_->recorded_revision(), killed);
}

TEST_F(RecorderTest, RecordsReleasesAndScheduledRuns) {
  Recorder rec(db_.get(), &clock_);
  rec.Start(committer_.get(), &store_);
  Commit({Submit(JobBuilder("a").Build())});
  Commit({Submit(JobBuilder("b").After({"alice/a"}).Build())});
  Commit({Kill("alice/a", "stop")});
  v1::Mutation failed;
  failed.mutable_job_released()->set_job("alice/b");
  failed.mutable_job_released()->set_failed("alice/a");
  failed.mutable_job_released()->set_reason("it was killed (stop)");
  Commit({failed});
  Commit({Submit(JobBuilder("s").Tasks(3).Schedule("* * * * *", v1::REPLACE).Build())});
  const int64_t due1 = (clock_.NowMs() / 60'000 + 1) * 60'000;
  Commit({Triggered("alice/s", due1)});
  Commit({Triggered("alice/s", due1 + 60'000, "", {"alice/s-" + std::to_string(due1 / 1000)})});
  const int64_t last = Commit({Triggered("alice/s", due1 + 120'000, "over quota")});
  ASSERT_TRUE(rec.WaitRecorded(last, absl::Seconds(30)));
  EXPECT_EQ(Scalar(*db_, "SELECT reason FROM jobs WHERE job = 'alice/b' AND event = 'dependency failed'").text(),
            "alice/a: it was killed (stop)");
  const std::string run1 = "alice/s-" + std::to_string(due1 / 1000);
  EXPECT_EQ(Scalar(*db_, "SELECT reason FROM jobs WHERE job = '" + run1 + "' AND event = 'submitted'").text(),
            "a run of alice/s");
  // The run's spec is the scheduled job's, without the schedule.
  EXPECT_EQ(Count("SELECT count(*) FROM jobs WHERE job = '" + run1 + "' AND spec LIKE '%\"task_count\":3%' AND spec NOT "
                  "LIKE '%schedule%'"),
            1);
  EXPECT_EQ(Count("SELECT count(*) FROM jobs WHERE job = '" + run1 + "' AND event = 'killed' AND reason LIKE "
                  "'replaced by alice/s-%'"),
            1);
  EXPECT_EQ(Scalar(*db_, "SELECT reason FROM jobs WHERE job = 'alice/s' AND event = 'run skipped'").text(),
            "over quota");
  rec.Stop();
}

}  // namespace
}  // namespace herd::master::history
