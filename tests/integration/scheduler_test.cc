// The scheduler in its own process (issue #3): `herd master --scheduler
// external` places nothing by itself; `herd scheduler` processes follow the
// master (ExportCheckpoint + Watch) and propose placements, which the master
// commits if still valid. And `herd why`. Real processes on loopback.
#include <gtest/gtest.h>

#include <map>
#include <regex>
#include <set>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "harness/harness.h"

namespace herd {
namespace {

using harness::Cell;
using harness::CountTasks;
using harness::Eventually;
using harness::RunResult;
using harness::Summarize;
using namespace std::chrono_literals;

std::string SleepSpec(const std::string& name, int tasks, const std::string& cpu = "100m",
                      const std::string& memory = "16Mi", const std::string& extra = "") {
  return absl::StrCat("name: ", name, "\nuser: alice\npriority: production\ntasks: ", tasks,
                      "\ncommand: [\"sleep\", \"3600\"]\nresources: {cpu: ", cpu, ", memory: ", memory, "}\n", extra);
}

Cell::Options External() {
  Cell::Options o;
  o.master_flags = {"--scheduler", "external"};
  return o;
}

class ExternalSchedulerTest : public ::testing::Test {
 protected:
  explicit ExternalSchedulerTest(Cell::Options o = External()) : cell_(std::move(o)) {}
  void SetUp() override {
    ASSERT_TRUE(cell_.StartMaster().ok()) << cell_.LogTails();
    absl::Status st = cell_.StartAgents(2);
    ASSERT_TRUE(st.ok()) << st << "\n" << cell_.LogTails();
  }

  void Submit(const std::string& name, const std::string& spec) {
    RunResult r = cell_.Herd({"submit", cell_.WriteSpec(name + ".yaml", spec)});
    ASSERT_EQ(r.exit_code, 0) << r.Describe();
  }

  bool AllActive(const std::string& job, int n, v1::ListTasksResponse* last) {
    auto t = cell_.Tasks(job);
    if (!t.ok()) return false;
    *last = *t;
    return harness::AllActive(*t, n);
  }

  // Waits until the scheduler's log says it has loaded its replica `times`
  // times in all.
  bool WaitLoaded(const std::string& name, int times = 1) {
    return Eventually(
        [&] {
          std::string log = harness::ReadFileOrEmpty(cell_.SchedulerLog(name));
          int n = 0;
          for (size_t p = 0; (p = log.find("replica loaded", p)) != std::string::npos; ++p) ++n;
          return n >= times;
        },
        15s);
  }

  // The numbers of the last "final stats:" line of a scheduler's log.
  std::map<std::string, int64_t> FinalStats(const std::string& name) {
    std::string log = harness::ReadFileOrEmpty(cell_.SchedulerLog(name));
    size_t at = log.rfind("final stats: ");
    std::map<std::string, int64_t> out;
    if (at == std::string::npos) return out;
    std::string line = log.substr(at + 13, log.find('\n', at) - at - 13);
    for (absl::string_view part : absl::StrSplit(line, ", ")) {
      std::pair<std::string, std::string> kv = absl::StrSplit(part, absl::MaxSplits(' ', 1));
      int64_t v = 0;
      if (absl::SimpleAtoi(kv.second, &v)) out[kv.first] = v;
    }
    return out;
  }

  Cell cell_;
};

TEST_F(ExternalSchedulerTest, PlacesJobsNothingIsPlacedWhileItIsDownAndItCatchesUpWhenRestarted) {
  ASSERT_TRUE(cell_.StartScheduler("s1").ok());
  ASSERT_TRUE(WaitLoaded("s1")) << cell_.LogTails();
  ASSERT_NO_FATAL_FAILURE(Submit("web", SleepSpec("web", 3)));
  v1::ListTasksResponse last;
  ASSERT_TRUE(Eventually([&] { return AllActive("web", 3, &last); }, 15s)) << Summarize(last) << cell_.LogTails();
  for (const auto& t : last.tasks()) {
    EXPECT_EQ(t.incarnation(), 1);
    EXPECT_TRUE(t.machine() == "m1" || t.machine() == "m2") << t.machine();
    EXPECT_GT(t.pid(), 0);
  }

  // kill -9 the scheduler: the master places nothing by itself. No sleep
  // proves that: instead every placement records who made it, and below each
  // task of "late" must have been placed once, by the restarted s1.
  cell_.StopScheduler("s1", SIGKILL);
  ASSERT_NO_FATAL_FAILURE(Submit("late", SleepSpec("late", 2)));
  auto t = cell_.Tasks("late");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(CountTasks(*t, v1::Task::PENDING), 2) << Summarize(*t);
  RunResult why = cell_.Herd({"why", "late"});
  EXPECT_EQ(why.exit_code, 0) << why.Describe();
  EXPECT_TRUE(absl::StrContains(why.out, "no scheduler pass has looked at it yet")) << why.out;

  // Restarted, it loads the cell afresh and places what is pending.
  ASSERT_TRUE(cell_.StartScheduler("s1").ok());
  ASSERT_TRUE(Eventually([&] { return AllActive("late", 2, &last); }, 15s)) << Summarize(last) << cell_.LogTails();
  ASSERT_TRUE(WaitLoaded("s1", 2));
  for (const auto& task : last.tasks()) {
    EXPECT_EQ(task.incarnation(), 1) << Summarize(last);
    int schedules = 0;
    for (const auto& e : task.history()) {
      if (e.transition() != v1::Event::SCHEDULE) continue;
      ++schedules;
      EXPECT_TRUE(absl::EndsWith(e.reason(), " by s1")) << "placed by someone other than the restarted s1: "
                                                        << e.reason();
    }
    EXPECT_EQ(schedules, 1) << Summarize(last);
  }
  // The first job was not touched.
  ASSERT_TRUE(AllActive("web", 3, &last));
  for (const auto& task : last.tasks()) EXPECT_EQ(task.incarnation(), 1);
  // It follows the master's changes from then on.
  ASSERT_NO_FATAL_FAILURE(Submit("later", SleepSpec("later", 1)));
  EXPECT_TRUE(Eventually([&] { return AllActive("later", 1, &last); }, 15s)) << Summarize(last) << cell_.LogTails();
}

TEST_F(ExternalSchedulerTest, ReconnectsWhenTheMasterRestarts) {
  ASSERT_TRUE(cell_.StartScheduler("s1").ok());
  ASSERT_TRUE(WaitLoaded("s1"));
  cell_.StopMaster(SIGKILL);
  // The scheduler notices that its master is gone before a new one starts.
  ASSERT_TRUE(Eventually(
      [&] {
        std::string log = harness::ReadFileOrEmpty(cell_.SchedulerLog("s1"));
        return absl::StrContains(log, "cannot continue") || absl::StrContains(log, "retrying in");
      },
      30s))
      << cell_.LogTails();
  ASSERT_TRUE(cell_.StartMaster().ok()) << cell_.LogTails();
  ASSERT_NO_FATAL_FAILURE(Submit("web", SleepSpec("web", 2)));
  v1::ListTasksResponse last;
  EXPECT_TRUE(Eventually([&] { return AllActive("web", 2, &last); }, 20s)) << Summarize(last) << cell_.LogTails();
  EXPECT_TRUE(WaitLoaded("s1", 2)) << "s1 did not load the new master's cell";
  EXPECT_TRUE(cell_.scheduler("s1")->Running());
}

TEST_F(ExternalSchedulerTest, TwoRacingSchedulersPlaceEveryTaskExactlyOnceAndNeverOverCommit) {
  ASSERT_TRUE(cell_.StartScheduler("s1").ok());
  ASSERT_TRUE(cell_.StartScheduler("s2").ok());
  ASSERT_TRUE(WaitLoaded("s1") && WaitLoaded("s2")) << cell_.LogTails();
  // 2 machines of cpu=2: room for 40 tasks of 100m; ask for 36, in several
  // jobs submitted together so both schedulers see them at once.
  std::string spec;
  const int kJobs = 6, kTasks = 6;
  for (int j = 0; j < kJobs; ++j) {
    if (j > 0) spec += "---\n";
    spec += SleepSpec(absl::StrCat("j", j), kTasks);
  }
  ASSERT_NO_FATAL_FAILURE(Submit("all", spec));
  for (int j = 0; j < kJobs; ++j) {
    v1::ListTasksResponse last;
    ASSERT_TRUE(Eventually([&] { return AllActive(absl::StrCat("j", j), kTasks, &last); }, 30s))
        << "j" << j << ": " << Summarize(last) << cell_.LogTails();
    for (const auto& t : last.tasks()) {
      // Placed exactly once: one placement = one incarnation, one SCHEDULE.
      EXPECT_EQ(t.incarnation(), 1) << t.ShortDebugString();
      int schedules = 0;
      for (const auto& e : t.history()) schedules += e.transition() == v1::Event::SCHEDULE;
      EXPECT_EQ(schedules, 1) << t.ShortDebugString();
    }
  }
  auto machines = cell_.Machines();
  ASSERT_TRUE(machines.ok()) << machines.status();
  int placed = 0;
  for (const auto& m : machines->machines()) {
    placed += m.task_count();
    EXPECT_LE(m.allocated().cpu_millis(), m.capacity().cpu_millis()) << m.ShortDebugString();
    EXPECT_LE(m.allocated().memory_bytes(), m.capacity().memory_bytes()) << m.ShortDebugString();
    EXPECT_EQ(m.allocated().cpu_millis(), m.task_count() * 100) << m.ShortDebugString();
  }
  EXPECT_EQ(placed, kJobs * kTasks);

  // Both proposed; what one got first the other had refused as stale. The
  // counts come from each scheduler's final stats line.
  cell_.StopScheduler("s1", SIGTERM);
  cell_.StopScheduler("s2", SIGTERM);
  auto s1 = FinalStats("s1"), s2 = FinalStats("s2");
  ASSERT_TRUE(s1.contains("accepted") && s2.contains("accepted")) << cell_.LogTails();
  EXPECT_EQ(s1["accepted"] + s2["accepted"], kJobs * kTasks);
  EXPECT_EQ(s1["proposed"], s1["accepted"] + s1["rejected"]);
  EXPECT_EQ(s2["proposed"], s2["accepted"] + s2["rejected"]);
  std::printf("racing schedulers: s1 proposed %lld (%lld rejected), s2 proposed %lld (%lld rejected)\n",
              static_cast<long long>(s1["proposed"]), static_cast<long long>(s1["rejected"]),
              static_cast<long long>(s2["proposed"]), static_cast<long long>(s2["rejected"]));
}

TEST_F(ExternalSchedulerTest, WhyShowsTheHistogramAndASuggestion) {
  ASSERT_TRUE(cell_.StartScheduler("s1").ok());
  ASSERT_TRUE(WaitLoaded("s1"));
  // The agents have 2Gi each: 3Gi fits nowhere; 1Gi would fit on both.
  ASSERT_NO_FATAL_FAILURE(Submit("big", SleepSpec("big", 2, "100m", "3Gi")));
  RunResult r;
  ASSERT_TRUE(Eventually(
      [&] {
        r = cell_.Herd({"why", "big"});
        return r.exit_code == 0 && absl::StrContains(r.out, "machines fit");
      },
      15s))
      << r.Describe() << cell_.LogTails();
  EXPECT_TRUE(absl::StrContains(r.out, "job alice/big: 2 pending tasks")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "tasks 0-1:")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "0/2 machines fit: 2 insufficient memory")) << r.out;
  EXPECT_TRUE(std::regex_search(r.out, std::regex("memory <= [0-9.]+[MG]i \\(asks 3Gi\\) fits on 2 machines"))) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "(scheduler s1, pass at revision")) << r.out;

  auto json = cell_.HerdJson<v1::WhyResponse>({"why", "big"});
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_EQ(json->job(), "alice/big");
  EXPECT_EQ(json->pending_tasks(), 2);
  ASSERT_EQ(json->pending_size(), 1);
  EXPECT_EQ(json->pending(0).reasons().at("insufficient memory"), 2);
  EXPECT_EQ(json->pending(0).scheduler(), "s1");

  // herd status shows the same.
  RunResult st = cell_.Herd({"status", "big"});
  EXPECT_TRUE(absl::StrContains(st.out, "2 tasks: 0/2 machines fit: 2 insufficient memory")) << st.out;

  RunResult missing = cell_.Herd({"why", "nope"});
  EXPECT_EQ(missing.exit_code, 1) << missing.Describe();
  EXPECT_EQ(missing.err, "herd: no job named nope\n");
}

// The master's own (internal) scheduler reports into the same store.
class InternalSchedulerTest : public ExternalSchedulerTest {
 protected:
  InternalSchedulerTest() : ExternalSchedulerTest(Cell::Options{}) {}
};

TEST_F(InternalSchedulerTest, WhyExplainsAJobThatCannotFitAndAJobThatRuns) {
  ASSERT_NO_FATAL_FAILURE(Submit("small", SleepSpec("small", 1)));
  ASSERT_NO_FATAL_FAILURE(Submit("picky", SleepSpec("picky", 1, "100m", "16Mi",
                                                    "constraints: [\"rack == r9\"]\n")));
  RunResult r;
  ASSERT_TRUE(Eventually(
      [&] {
        r = cell_.Herd({"why", "picky"});
        return r.exit_code == 0 && absl::StrContains(r.out, "machines fit");
      },
      15s))
      << r.Describe() << cell_.LogTails();
  EXPECT_TRUE(absl::StrContains(r.out, "0/2 machines fit: 2 constraint rack == r9")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "without constraint rack == r9: 2 more machines fit")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "(scheduler scheduler,")) << r.out;
  v1::ListTasksResponse last;
  ASSERT_TRUE(Eventually([&] { return AllActive("small", 1, &last); }, 15s)) << Summarize(last);
  r = cell_.Herd({"why", "small"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.out, "job alice/small: 0 pending tasks\nthe job has no pending tasks\n");
}

}  // namespace
}  // namespace herd
