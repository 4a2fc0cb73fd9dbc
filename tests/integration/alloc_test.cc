// Allocs on a real cell (issue #14 item 3, Borg §2.4): examples/logsaver.yaml
// as a user submits it. Task i of the web server and of the log shipper run
// in alloc i: on its machine, in its cgroup (checked in /proc), sharing its
// directory (the shipper counts the server's lines); the alloc keeps its
// machine and run while a task in it is killed and restarts; drained off its
// machine, the alloc moves and its tasks follow it; an alloc set with jobs
// in it is not killed. Real master, agents, cgroups and task processes.
#include <gtest/gtest.h>

#include <chrono>
#include <signal.h>

#include <fstream>
#include <set>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/ids.h"
#include "harness/harness.h"

namespace herd {
namespace {

using harness::Cell;
using harness::Eventually;
using harness::RunResult;
using namespace std::chrono_literals;

class AllocTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(cell_.StartMaster().ok()) << cell_.LogTails();
    absl::Status st = cell_.StartAgents(2);
    ASSERT_TRUE(st.ok()) << st << "\n" << cell_.LogTails();
  }
  v1::GetJobResponse Status(const std::string& job) {
    absl::StatusOr<v1::GetJobResponse> s = cell_.HerdJson<v1::GetJobResponse>({"status", job});
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? *s : v1::GetJobResponse();
  }
  v1::Task Task(const std::string& job, int i) {
    v1::GetJobResponse s = Status(job);
    for (const v1::Task& t : s.tasks()) {
      if (t.index() == i) return t;
    }
    return v1::Task();
  }
  static bool Active(const v1::Task& t) { return t.state() == v1::Task::RUNNING && t.phase() == v1::Task::ACTIVE; }
  // Task i of web and logsaver run, active, on the machine of alloc i.
  bool Together(int i) {
    v1::Task a = Task("web-slots", i), w = Task("web", i), l = Task("logsaver", i);
    return a.state() == v1::Task::RUNNING && Active(w) && Active(l) && w.machine() == a.machine() &&
           l.machine() == a.machine();
  }
  static std::string CgroupOf(int64_t pid) {
    std::ifstream in(absl::StrCat("/proc/", pid, "/cgroup"));
    std::string line, all;
    while (std::getline(in, line)) absl::StrAppend(&all, line, "\n");
    return all;
  }

  Cell cell_;
};

TEST_F(AllocTest, LogsaverPatternSharesAnAllocThatKeepsItsMachineAndMovesWithItsTasks) {
  RunResult r = cell_.Herd({"submit", std::string(HERD_EXAMPLES) + "/logsaver.yaml"});
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(Eventually([&] { return Together(i); }, 90s))
        << Status("web-slots").ShortDebugString() << "\n" << Status("web").ShortDebugString() << "\n"
        << cell_.LogTails();
  }
  // herd status of the alloc set names the jobs in it.
  v1::GetJobResponse set = Status("web-slots");
  EXPECT_EQ(std::set<std::string>(set.job().alloc_members().begin(), set.job().alloc_members().end()),
            (std::set<std::string>{"alice/logsaver", "alice/web"}));

  // Each task's processes are inside its alloc's cgroup.
  for (int i = 0; i < 2; ++i) {
    v1::Task a = Task("web-slots", i);
    const std::string alloc_run = RunId(a.job(), i, a.incarnation());
    for (const char* job : {"web", "logsaver"}) {
      v1::Task t = Task(job, i);
      ASSERT_GT(t.pid(), 0) << job;
      std::string cg = CgroupOf(t.pid());
      EXPECT_TRUE(absl::StrContains(cg, absl::StrCat("/", alloc_run, "/"))) << job << "/" << i << ": " << cg;
    }
  }
  // They share the alloc's directory: the shipper sees the server's lines.
  ASSERT_TRUE(Eventually(
      [&] {
        RunResult logs = cell_.Herd({"logs", "logsaver/0"});
        return logs.exit_code == 0 && absl::StrContains(logs.out, "shipped") && !absl::StrContains(logs.out, "shipped 0 ");
      },
      30s))
      << cell_.Herd({"logs", "logsaver/0"}).Describe();

  // A task in the alloc dies and restarts: the alloc keeps its machine and run.
  const v1::Task alloc0 = Task("web-slots", 0);
  const v1::Task web0 = Task("web", 0);
  ASSERT_EQ(kill(static_cast<pid_t>(web0.pid()), SIGKILL), 0);
  ASSERT_TRUE(Eventually([&] { v1::Task t = Task("web", 0); return Active(t) && t.restarts() >= 1; }, 60s))
      << Task("web", 0).ShortDebugString();
  v1::Task after = Task("web-slots", 0);
  EXPECT_EQ(after.machine(), alloc0.machine());
  EXPECT_EQ(after.incarnation(), alloc0.incarnation());
  EXPECT_EQ(Task("web", 0).incarnation(), web0.incarnation()) << "restarted in place, not moved";

  // The alloc set cannot be killed while jobs run in it.
  r = cell_.Herd({"kill", "web-slots"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(absl::StrContains(r.err + r.out, "has live jobs running in it")) << r.Describe();

  // Drained off its machine, alloc 0 moves; its tasks go with it.
  r = cell_.Herd({"drain", alloc0.machine()});
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  ASSERT_TRUE(Eventually([&] { return Together(0) && Task("web-slots", 0).machine() != alloc0.machine(); }, 90s))
      << Status("web-slots").ShortDebugString() << "\n" << Status("web").ShortDebugString() << "\n"
      << cell_.LogTails();
  v1::Task moved = Task("web", 0);
  EXPECT_EQ(moved.last_event().transition(), v1::Event::SCHEDULE);
  bool followed = false;
  for (const v1::Event& e : moved.history()) {
    followed |= absl::StrContains(e.reason(), "its alloc alice/web-slots/0 left " + alloc0.machine());
  }
  EXPECT_TRUE(followed) << moved.ShortDebugString();

  // Jobs first, then the alloc set.
  for (const char* job : {"web", "logsaver", "web-slots"}) {
    r = cell_.Herd({"kill", job});
    EXPECT_EQ(r.exit_code, 0) << r.Describe();
  }
}

}  // namespace
}  // namespace herd
