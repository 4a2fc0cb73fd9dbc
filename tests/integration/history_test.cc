// The history on a real cell (issue #15): a real master records task events
// and the usage its real agents report into its SQLite history; `herd
// query` reads it with SQL (read-only, secrets hidden, any user), and it
// survives the master being killed without recording anything twice.
#include <atomic>
#include <thread>
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "harness/harness.h"

namespace herd {
namespace {

using harness::Cell;
using harness::Eventually;
using harness::RunResult;
using namespace std::chrono_literals;

Cell::Options HistoryCell() {
  Cell::Options o;
  o.master_flags = {"--history-sample", "1s"};
  return o;
}

class HistoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(cell_.StartMaster().ok()) << cell_.LogTails();
    absl::Status st = cell_.StartAgents(2);
    ASSERT_TRUE(st.ok()) << st << "\n" << cell_.LogTails();
  }

  // The query's answer, parsed; fails the test if herd query fails.
  v1::QueryHistoryResponse Query(const std::string& sql) {
    auto r = cell_.HerdJson<v1::QueryHistoryResponse>({"query", sql});
    EXPECT_TRUE(r.ok()) << sql << ": " << r.status();
    return r.ok() ? *r : v1::QueryHistoryResponse();
  }
  // A one-value query's number (integer or real); -1 if there is none.
  double Number(const std::string& sql) {
    v1::QueryHistoryResponse r = Query(sql);
    if (r.rows_size() != 1 || r.rows(0).values_size() != 1) return -1;
    const v1::QueryValue& v = r.rows(0).values(0);
    if (v.has_integer()) return static_cast<double>(v.integer());
    if (v.has_real()) return v.real();
    return -1;
  }

  Cell cell_{HistoryCell()};
};

TEST_F(HistoryTest, EventsAndUsageAreRecordedAndQueriedReadOnly) {
  // A CPU hog with a secret in its environment.
  const std::string hog = cell_.WriteSpec(
      "hog.yaml",
      "name: hog\nuser: alice\npriority: batch\ntasks: 2\n"
      "command: [\"/bin/sh\", \"-c\", \"while :; do :; done\"]\n"
      "env: {API_TOKEN: hunter2-secret}\nresources: {cpu: 300m, memory: 32Mi}\ngrace_period: 1s\n");
  RunResult r = cell_.Herd({"submit", hog});
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  cell_.WaitRunning("hog", 2);

  // Its events: submitted, each task scheduled and seen running.
  EXPECT_TRUE(Eventually([&] {
    return Number("SELECT count(DISTINCT task_index) FROM task_events WHERE job = 'alice/hog' AND event = 'observed' "
                  "AND phase = 'ACTIVE'") == 2;
  }, 60s)) << cell_.LogTails();
  EXPECT_EQ(Number("SELECT count(*) FROM jobs WHERE job = 'alice/hog' AND event = 'submitted' AND version = 1"), 1);
  EXPECT_EQ(Number("SELECT count(*) FROM task_events WHERE job = 'alice/hog' AND event = 'scheduled' "
                   "AND machine IN ('m1', 'm2')"),
            2);
  EXPECT_EQ(Number("SELECT count(*) FROM machine_events WHERE event = 'registered'"), 2);

  // Its usage: rows per task with the CPU the agents measured, which for a
  // busy loop is well above nothing.
  EXPECT_TRUE(Eventually([&] {
    return Number("SELECT count(DISTINCT task_index) FROM usage WHERE job = 'alice/hog' AND cpu_millis > 50") == 2;
  }, 90s)) << Query("SELECT task_index, cpu_millis, samples FROM usage").DebugString();
  EXPECT_GT(Number("SELECT count(*) FROM machine_usage WHERE machine = 'm1'"), 0);
  // The docs' questions answer: CPU-seconds per user, the longest waits.
  EXPECT_GT(Number("SELECT sum(cpu_millis * period_ms) / 1e6 FROM usage WHERE user = 'alice'"), 0);
  v1::QueryHistoryResponse waits = Query(
      "SELECT j.job, (min(e.time_ms) - j.time_ms) / 1000.0 AS waited_s FROM jobs j JOIN task_events e "
      "ON e.job = j.job AND e.event = 'scheduled' AND e.time_ms >= j.time_ms WHERE j.event = 'submitted' "
      "GROUP BY j.job, j.time_ms ORDER BY waited_s DESC LIMIT 10");
  ASSERT_EQ(waits.rows_size(), 1) << waits.DebugString();
  EXPECT_EQ(waits.rows(0).values(0).text(), "alice/hog");
  EXPECT_GE(waits.rows(0).values(1).real(), 0);

  // The table for people.
  r = cell_.Herd({"query", "SELECT job, event, version FROM jobs"});
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_TRUE(absl::StrContains(r.out, "alice/hog")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "(1 row;")) << r.out;

  // Another user may query, and sees no secret.
  r = cell_.HerdAs("bob", {"query", "SELECT count(*) FROM jobs WHERE spec LIKE '%hunter2%'"});
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_TRUE(absl::StrContains(r.out, "\n0\n")) << r.out;
  EXPECT_EQ(Number("SELECT count(*) FROM jobs WHERE spec LIKE '%API_TOKEN%(hidden)%'"), 1);

  // Only reading: writes, schema changes and a second statement are refused
  // with the reason, and nothing is lost.
  for (const char* sql : {"DELETE FROM jobs", "DROP TABLE usage", "SELECT 1; DELETE FROM jobs",
                          "ATTACH DATABASE '/tmp/x.db' AS x"}) {
    r = cell_.Herd({"query", sql});
    EXPECT_NE(r.exit_code, 0) << sql << ": " << r.Describe();
    EXPECT_TRUE(absl::StrContains(r.err, "query")) << sql << ": " << r.err;
  }
  r = cell_.Herd({"query", "SELECT nosuchcolumn FROM jobs"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(absl::StrContains(r.err, "nosuchcolumn")) << r.err;
  EXPECT_EQ(Number("SELECT count(*) FROM jobs WHERE job = 'alice/hog'"), 1);
}

// Whether this machine can limit a task's memory (cgroup v1 or v2 with the
// memory controller): only then does a task that outgrows its limit get
// OOM-killed rather than just using more.
bool MemoryCgroups() {
  return std::filesystem::exists("/sys/fs/cgroup/memory/memory.limit_in_bytes") ||
         absl::StrContains(harness::ReadFileOrEmpty("/sys/fs/cgroup/cgroup.controllers"), "memory");
}

TEST_F(HistoryTest, TheTasksThatOomedAreInTheHistory) {
  if (!MemoryCgroups()) GTEST_SKIP() << "no memory cgroups here: nothing would be OOM-killed";
  // `tail` keeps a line until its end; /dev/zero has none, so it grows
  // past its 16Mi limit.
  const std::string spec = cell_.WriteSpec(
      "oom.yaml",
      "name: oom\nuser: alice\npriority: batch\ntasks: 1\n"
      "command: [\"/bin/sh\", \"-c\", \"head -c 500000000 /dev/zero | tail\"]\n"
      "resources: {cpu: 200m, memory: 16Mi}\ngrace_period: 1s\n");
  ASSERT_EQ(cell_.Herd({"submit", spec}).exit_code, 0);
  EXPECT_TRUE(Eventually([&] {
    return Number("SELECT count(*) FROM task_events WHERE job = 'alice/oom' AND oom_killed") >= 1;
  }, 120s)) << Query("SELECT event, phase, exit_code, exit_signal, oom_killed, reason FROM task_events "
                     "WHERE job = 'alice/oom'").DebugString();
  // The docs' query for the week's OOMs names it and its machine.
  v1::QueryHistoryResponse week = Query(
      "SELECT job, task_index, machine, count(*) AS ooms FROM task_events WHERE oom_killed AND "
      "time_ms > (strftime('%s', 'now') - 7 * 86400) * 1000 GROUP BY job, task_index, machine");
  ASSERT_EQ(week.rows_size(), 1) << week.DebugString();
  EXPECT_EQ(week.rows(0).values(0).text(), "alice/oom");
  EXPECT_TRUE(absl::StartsWith(week.rows(0).values(2).text(), "m")) << week.DebugString();
}

TEST_F(HistoryTest, AKilledMasterRecordsWhatItMissedOnceAndKeepsTheRest) {
  const std::string spec = cell_.WriteSpec(
      "short.yaml",
      "name: short\nuser: alice\npriority: batch\ntasks: 2\ncommand: [\"/bin/sh\", \"-c\", \"sleep 3600\"]\n"
      "resources: {cpu: 100m, memory: 16Mi}\ngrace_period: 1s\n");
  ASSERT_EQ(cell_.Herd({"submit", spec}).exit_code, 0);
  cell_.WaitRunning("short", 2);
  ASSERT_TRUE(Eventually([&] {
    return Number("SELECT count(*) FROM task_events WHERE job = 'alice/short' AND phase = 'ACTIVE'") == 2;
  }, 60s));
  const double events_before = Number("SELECT count(*) FROM task_events WHERE job = 'alice/short'");

  cell_.StopMaster(SIGKILL);
  ASSERT_TRUE(cell_.StartMaster().ok()) << cell_.LogTails();
  RunResult r = cell_.Herd({"kill", "short"});
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  ASSERT_TRUE(Eventually([&] {
    return Number("SELECT count(*) FROM jobs WHERE job = 'alice/short' AND event = 'killed'") == 1;
  }, 60s)) << cell_.LogTails();
  // Nothing recorded before the kill was written twice.
  EXPECT_EQ(Number("SELECT count(*) FROM jobs WHERE job = 'alice/short' AND event = 'submitted'"), 1);
  EXPECT_EQ(Number("SELECT count(*) FROM task_events WHERE job = 'alice/short' AND event = 'scheduled'"), 2);
  EXPECT_GE(Number("SELECT count(*) FROM task_events WHERE job = 'alice/short'"), events_before);
  EXPECT_EQ(Number("SELECT count(*) FROM (SELECT revision, task_index, event FROM task_events "
                   "GROUP BY revision, job, task_index, event HAVING count(*) > 1)"),
            0);
}

// One user cannot hold every history slot: with two of alice's statements
// running (each stopped by the 10 s limit), a third of hers is refused, and
// bob's runs.
TEST_F(HistoryTest, OneUserHoldsAtMostTwoQuerySlots) {
  const std::string slow = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c";
  std::vector<RunResult> slow_results(2);
  std::vector<std::thread> slow_queries;
  std::atomic<int> slow_done{0};
  for (int i = 0; i < 2; ++i) {
    slow_queries.emplace_back([&, i] {
      slow_results[i] = cell_.HerdAs("alice", {"query", slow});
      ++slow_done;
    });
  }
  // Asked again and again while alice's two statements run (each ends at the
  // 10 s limit): not for a fixed time, which a loaded machine may spend
  // merely starting them.
  RunResult third;
  bool refused = false;
  while (!refused && slow_done.load() < 2) {
    third = cell_.HerdAs("alice", {"query", "SELECT 1"});
    refused = third.exit_code != 0;
  }
  RunResult bob = cell_.HerdAs("bob", {"query", "SELECT 1"});
  for (std::thread& t : slow_queries) t.join();
  ASSERT_TRUE(refused) << "a third query of alice's ran while two were running";
  EXPECT_TRUE(absl::StrContains(third.err, "alice has 2 queries running already")) << third.err;
  EXPECT_EQ(bob.exit_code, 0) << bob.err;
  for (const RunResult& r : slow_results) {
    EXPECT_NE(r.exit_code, 0) << "the endless statement should have been stopped";
  }
}

TEST_F(HistoryTest, AMasterWithoutHistorySaysSo) {
  cell_.StopMaster(SIGKILL);
  Cell::Options o = HistoryCell();
  o.master_flags = {"--history", "none"};
  Cell bare(o);
  ASSERT_TRUE(bare.StartMaster().ok()) << bare.LogTails();
  RunResult r = bare.Herd({"query", "SELECT 1"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(absl::StrContains(r.err, "keeps no history")) << r.err;
}

}  // namespace
}  // namespace herd
