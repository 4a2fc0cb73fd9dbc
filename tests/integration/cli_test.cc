// What the herd CLI prints and returns against a real master and agent:
// error messages people act on, exit codes scripts rely on, and --json
// output that parses back into the herd.v1 types (issue #2).
#include <gtest/gtest.h>

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "harness/harness.h"

namespace herd {
namespace {

using harness::Cell;
using harness::Eventually;
using harness::RunResult;
using namespace std::chrono_literals;

std::string SleepSpec(const std::string& name, int tasks, const std::string& cpu = "100m",
                      const std::string& memory = "16Mi") {
  return absl::StrCat("name: ", name, "\nuser: alice\npriority: production\ntasks: ", tasks,
                      "\ncommand: [\"sleep\", \"3600\"]\nresources: {cpu: ", cpu, ", memory: ", memory, "}\n");
}

int Lines(const std::string& s) {
  return static_cast<int>(std::count(s.begin(), s.end(), '\n')) + (!s.empty() && s.back() != '\n');
}

class CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(cell_.StartMaster().ok()) << cell_.LogTails();
    absl::Status st = cell_.StartAgents(1);
    ASSERT_TRUE(st.ok()) << st << "\n" << cell_.LogTails();
  }

  v1::ListJobsResponse AllJobs() {
    auto j = cell_.Jobs(/*include_dead=*/true);
    EXPECT_TRUE(j.ok()) << j.status();
    return j.ok() ? *j : v1::ListJobsResponse();
  }

  Cell cell_;
};

TEST_F(CliTest, BadSpecFilesNameFileLineAndFieldExitTwoAndChangeNothing) {
  RunResult ok = cell_.Herd({"submit", cell_.WriteSpec("keep.yaml", SleepSpec("keep", 1))});
  ASSERT_EQ(ok.exit_code, 0) << ok.Describe();
  v1::ListJobsResponse before = AllJobs();
  ASSERT_EQ(before.jobs_size(), 1);

  struct Case {
    std::string file;
    std::string yaml;
    std::string where;  // ":LINE:" expected right after the file name
    std::vector<std::string> mentions;
  };
  const std::vector<Case> cases = {
      {"unknown-field.yaml",
       "name: keep\nuser: alice\ntasks: 2\ncommand: [\"sleep\", \"1\"]\nresources: {cpu: 100m, memory: 16Mi}\n"
       "bogus: 3\n",
       ":6:", {"unknown field", "bogus"}},
      {"bad-unit.yaml",
       "name: keep\nuser: alice\ntasks: 2\ncommand: [\"sleep\", \"1\"]\nresources: {cpu: 100m, memory: 64Qi}\n",
       ":5:", {"resources.memory", "Qi"}},
      {"negative-count.yaml",
       "name: keep\nuser: alice\ntasks: -2\ncommand: [\"sleep\", \"1\"]\nresources: {cpu: 100m, memory: 16Mi}\n",
       ":3:", {"tasks", "-2"}},
  };
  for (const Case& c : cases) {
    std::string path = cell_.WriteSpec(c.file, c.yaml);
    RunResult r = cell_.Herd({"submit", path});
    EXPECT_EQ(r.exit_code, 2) << c.file << ": " << r.Describe();
    EXPECT_EQ(r.out, "") << c.file;
    EXPECT_TRUE(absl::StartsWith(r.err, "herd: ")) << r.err;
    EXPECT_TRUE(absl::StrContains(r.err, path + c.where)) << c.file << ": wanted " << path + c.where << " in\n"
                                                           << r.err;
    for (const std::string& m : c.mentions) EXPECT_TRUE(absl::StrContains(r.err, m)) << c.file << ": " << r.err;
    EXPECT_TRUE(absl::StrContains(r.err, "nothing was submitted")) << r.err;
  }
  // All three at once: every error is reported, still nothing submitted.
  RunResult all = cell_.Herd({"submit", cell_.dir().Sub("unknown-field.yaml"), cell_.dir().Sub("bad-unit.yaml"),
                              cell_.dir().Sub("negative-count.yaml")});
  EXPECT_EQ(all.exit_code, 2) << all.Describe();
  for (const Case& c : cases) EXPECT_TRUE(absl::StrContains(all.err, c.file + c.where)) << all.err;

  v1::ListJobsResponse after = AllJobs();
  ASSERT_EQ(after.jobs_size(), 1) << after.ShortDebugString();
  EXPECT_EQ(after.jobs(0).id(), "alice/keep");
  EXPECT_EQ(after.jobs(0).submit_revision(), before.jobs(0).submit_revision());
  EXPECT_EQ(after.jobs(0).spec().task_count(), 1);
  EXPECT_EQ(after.jobs(0).request_id(), before.jobs(0).request_id());
}

TEST_F(CliTest, OverQuotaNamesTheResourceTheAmountAskedAndWhatIsLeft) {
  RunResult q = cell_.Herd({"quota", "set", "alice", "production", "cpu=1,memory=1Gi"});
  ASSERT_EQ(q.exit_code, 0) << q.Describe();
  EXPECT_TRUE(absl::StartsWith(q.out, "quota of alice in band production: ")) << q.out;

  // 3 x 500m = 1.5 cpu against 1.
  RunResult cpu = cell_.Herd({"submit", cell_.WriteSpec("big.yaml", SleepSpec("big", 3, "500m", "64Mi"))});
  EXPECT_EQ(cpu.exit_code, 1) << cpu.Describe();
  EXPECT_EQ(cpu.out, "");
  EXPECT_EQ(Lines(cpu.err), 1) << cpu.err;
  for (const char* want : {"herd: over quota", "alice", "cpu", "asks 1.5", "1 left of 1", "production"}) {
    EXPECT_TRUE(absl::StrContains(cpu.err, want)) << "wanted '" << want << "' in: " << cpu.err;
  }
  // Fits in cpu, not in memory; 600m of cpu is then taken.
  RunResult ok = cell_.Herd({"submit", cell_.WriteSpec("small.yaml", SleepSpec("small", 1, "600m", "256Mi"))});
  ASSERT_EQ(ok.exit_code, 0) << ok.Describe();
  RunResult mem = cell_.Herd({"submit", cell_.WriteSpec("fat.yaml", SleepSpec("fat", 1, "100m", "2Gi"))});
  EXPECT_EQ(mem.exit_code, 1) << mem.Describe();
  for (const char* want : {"over quota", "memory", "asks 2Gi", "768Mi left of 1Gi"}) {
    EXPECT_TRUE(absl::StrContains(mem.err, want)) << "wanted '" << want << "' in: " << mem.err;
  }
  RunResult cpu2 = cell_.Herd({"submit", cell_.WriteSpec("big2.yaml", SleepSpec("big2", 1, "500m", "16Mi"))});
  EXPECT_EQ(cpu2.exit_code, 1) << cpu2.Describe();
  EXPECT_TRUE(absl::StrContains(cpu2.err, "asks 500m cpu")) << cpu2.err;
  EXPECT_TRUE(absl::StrContains(cpu2.err, "400m left of 1")) << cpu2.err;

  // Refused jobs do not exist.
  v1::ListJobsResponse jobs = AllJobs();
  ASSERT_EQ(jobs.jobs_size(), 1) << jobs.ShortDebugString();
  EXPECT_EQ(jobs.jobs(0).id(), "alice/small");
  RunResult st = cell_.Herd({"status", "big"});
  EXPECT_EQ(st.exit_code, 1);
  // The quota is per user: bob is not limited.
  RunResult bob = cell_.HerdAs("bob", {"submit", cell_.WriteSpec("bob.yaml",
                                                                 absl::StrCat("name: big\nuser: bob\npriority: "
                                                                              "production\ntasks: 3\ncommand: "
                                                                              "[\"sleep\", \"3600\"]\nresources: "
                                                                              "{cpu: 500m, memory: 64Mi}\n"))});
  EXPECT_EQ(bob.exit_code, 0) << bob.Describe();
}

TEST_F(CliTest, UnknownJobSaysSoAndExitsOne) {
  RunResult r = cell_.Herd({"status", "nope"});
  EXPECT_EQ(r.exit_code, 1) << r.Describe();
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, "herd: no job named nope\n");
  for (const std::vector<std::string>& args : {std::vector<std::string>{"tasks", "nope"},
                                               std::vector<std::string>{"kill", "nope"},
                                               std::vector<std::string>{"logs", "nope/0"}}) {
    RunResult o = cell_.Herd(args);
    EXPECT_EQ(o.exit_code, 1) << Cell::Join(args) << ": " << o.Describe();
    EXPECT_TRUE(absl::StrContains(o.err, "nope")) << Cell::Join(args) << ": " << o.err;
    EXPECT_EQ(Lines(o.err), 1) << o.err;
  }
}

TEST(CliNoMasterTest, UnreachableMasterIsOneLineAndExitOne) {
  harness::TestDir dir;
  std::string spec = dir.Write("ok.yaml", SleepSpec("ok", 1));
  for (const std::vector<std::string>& verb : {std::vector<std::string>{"jobs"}, std::vector<std::string>{"status", "x"},
                                               std::vector<std::string>{"submit", spec},
                                               std::vector<std::string>{"machines", "--json"}}) {
    std::vector<std::string> argv = {harness::HerdBinary(), "--master", "127.0.0.1:1"};
    argv.insert(argv.end(), verb.begin(), verb.end());
    auto start = std::chrono::steady_clock::now();
    RunResult r = harness::Run(argv, 30s);
    auto took = std::chrono::steady_clock::now() - start;
    std::string what = Cell::Join(verb);
    EXPECT_EQ(r.exit_code, 1) << what << ": " << r.Describe();
    EXPECT_EQ(r.out, "") << what;
    EXPECT_TRUE(absl::StartsWith(r.err, "herd: cannot reach the master at 127.0.0.1:1")) << what << ": " << r.err;
    EXPECT_EQ(Lines(r.err), 1) << what << ": gRPC noise on stderr?\n" << r.err;
    EXPECT_LT(took, 10s) << what;
  }
}

TEST_F(CliTest, JsonOutputParsesBackIntoTheApiTypes) {
  auto sub = cell_.HerdJson<v1::SubmitResponse>({"submit", cell_.WriteSpec("web.yaml", SleepSpec("web", 2))});
  ASSERT_TRUE(sub.ok()) << sub.status();
  ASSERT_EQ(sub->results_size(), 1);
  EXPECT_EQ(sub->results(0).job(), "alice/web");
  EXPECT_TRUE(sub->results(0).created());
  EXPECT_EQ(sub->results(0).tasks(), 2);
  EXPECT_GT(sub->revision(), 0);

  v1::ListTasksResponse tasks;
  ASSERT_TRUE(Eventually(
      [&] {
        auto t = cell_.Tasks("web");
        if (t.ok()) tasks = *t;
        return t.ok() && harness::CountTasks(*t, v1::Task::RUNNING, v1::Task::ACTIVE) == 2;
      },
      10s))
      << harness::Summarize(tasks);
  for (const auto& t : tasks.tasks()) {
    EXPECT_EQ(t.job(), "alice/web");
    EXPECT_EQ(t.machine(), "m1");
    EXPECT_EQ(t.resources().cpu_millis(), 100);
    EXPECT_EQ(t.resources().memory_bytes(), 16 << 20);
    EXPECT_TRUE(harness::ProcessAlive(static_cast<pid_t>(t.pid()))) << t.pid();
  }

  auto jobs = cell_.Jobs();
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  ASSERT_EQ(jobs->jobs_size(), 1);
  EXPECT_EQ(jobs->jobs(0).id(), "alice/web");
  EXPECT_EQ(jobs->jobs(0).running(), 2);
  EXPECT_EQ(jobs->jobs(0).spec().priority(), 200);
  EXPECT_GE(jobs->revision(), sub->revision());

  auto machines = cell_.Machines();
  ASSERT_TRUE(machines.ok()) << machines.status();
  ASSERT_EQ(machines->machines_size(), 1);
  const v1::Machine& m = machines->machines(0);
  EXPECT_EQ(m.name(), "m1");
  EXPECT_EQ(m.state(), v1::Machine::UP);
  EXPECT_EQ(m.capacity().cpu_millis(), 2000);
  EXPECT_EQ(m.capacity().memory_bytes(), int64_t{2} << 30);
  EXPECT_EQ(m.attributes().at("rack"), "r1");
  EXPECT_EQ(m.task_count(), 2);

  auto status = cell_.HerdJson<v1::GetJobResponse>({"status", "web"});
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ(status->job().id(), "alice/web");
  EXPECT_EQ(status->tasks_size(), 2);

  auto cell = cell_.HerdJson<v1::CellInfo>({"cell"});
  ASSERT_TRUE(cell.ok()) << cell.status();
  EXPECT_EQ(cell->machines_up(), 1);
  EXPECT_EQ(cell->tasks_running(), 2);

  auto quota = cell_.HerdJson<v1::ListQuotasResponse>({"quota"});
  ASSERT_TRUE(quota.ok()) << quota.status();

  auto kill = cell_.HerdJson<v1::KillResponse>({"kill", "web"});
  ASSERT_TRUE(kill.ok()) << kill.status();
  EXPECT_EQ(kill->job().id(), "alice/web");
  EXPECT_EQ(kill->job().dead(), 2);

  // The JSON is the proto's canonical form: int64 as strings, enums by name.
  RunResult raw = cell_.Herd({"tasks", "web", "--json"});
  ASSERT_EQ(raw.exit_code, 0) << raw.Describe();
  EXPECT_TRUE(absl::StrContains(raw.out, "\"state\": \"DEAD\"")) << raw.out;
  EXPECT_TRUE(absl::StrContains(raw.out, "\"incarnation\": \"1\"")) << raw.out;
}

TEST_F(CliTest, SubmittingTheSameFileTwiceChangesNothing) {
  std::string spec = cell_.WriteSpec("twice.yaml", SleepSpec("twice", 2));
  RunResult first = cell_.Herd({"submit", spec});
  ASSERT_EQ(first.exit_code, 0) << first.Describe();
  EXPECT_TRUE(absl::StartsWith(first.out, "submitted alice/twice: 2 tasks (revision ")) << first.out;

  // Let it settle (tasks placed and started), then resubmit.
  v1::GetJobResponse before;
  ASSERT_TRUE(Eventually(
      [&] {
        auto j = cell_.HerdJson<v1::GetJobResponse>({"status", "twice"});
        if (!j.ok()) return false;
        before = *j;
        int active = 0;
        for (const auto& t : j->tasks()) active += t.phase() == v1::Task::ACTIVE && t.pid() > 0;
        return active == 2;
      },
      10s))
      << before.ShortDebugString();

  RunResult second = cell_.Herd({"submit", spec});
  EXPECT_EQ(second.exit_code, 0) << second.Describe();
  EXPECT_EQ(second.out, "alice/twice unchanged: an identical job is already there\n");
  auto again = cell_.HerdJson<v1::SubmitResponse>({"submit", spec});
  ASSERT_TRUE(again.ok()) << again.status();
  ASSERT_EQ(again->results_size(), 1);
  EXPECT_FALSE(again->results(0).created());

  auto after = cell_.HerdJson<v1::GetJobResponse>({"status", "twice"});
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(after->job().submit_revision(), before.job().submit_revision());
  EXPECT_EQ(after->job().state_revision(), before.job().state_revision());
  EXPECT_EQ(after->job().request_id(), before.job().request_id());
  ASSERT_EQ(after->tasks_size(), 2);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(after->tasks(i).incarnation(), before.tasks(i).incarnation());
    EXPECT_EQ(after->tasks(i).pid(), before.tasks(i).pid());
    EXPECT_EQ(after->tasks(i).state_revision(), before.tasks(i).state_revision());
  }
}

}  // namespace
}  // namespace herd
