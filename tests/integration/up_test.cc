// `herd up` and `herd down` after a crash (issue #9): a local cell whose
// every process is SIGKILLed while tasks run comes back on the same data
// directory and re-adopts the tasks (same pids, not restarted), the lock of
// the dead cell does not block it and no task holds it, and `herd down`
// leaves no process of the cell behind, also when no cell is running any
// more. Real processes on loopback.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "harness/harness.h"

namespace herd {
namespace {

namespace fs = std::filesystem;
using harness::Eventually;
using harness::ProcInfo;
using harness::RunResult;
using namespace std::chrono_literals;

class UpTest : public ::testing::Test {
 protected:
  void TearDown() override {
    // Whatever a failed test left: the cell's daemons and tasks.
    harness::Run({harness::HerdBinary(), "down", "--data", data_}, 180s);
    harness::KillProcessesUnder(data_);
  }

  RunResult Up() {
    return harness::Run({harness::HerdBinary(), "up", "--detach", "--data", data_, "--listen", "127.0.0.1:0",
                         "--agents", "2", "--poll-interval", "200ms"},
                        120s);
  }
  RunResult Down() { return harness::Run({harness::HerdBinary(), "down", "--data", data_}, 180s); }

  // The address the cell's master serves on (it picked a free port); with
  // --ha the list of its masters (ha.ports).
  std::string Master() const {
    if (ha_) {
      std::vector<std::string> list;
      for (absl::string_view line : absl::StrSplit(harness::ReadFileOrEmpty(data_ + "/ha.ports"), '\n')) {
        if (absl::ConsumePrefix(&line, "master ")) list.push_back(absl::StrCat("127.0.0.1:", line));
      }
      return absl::StrJoin(list, ",");
    }
    return std::string(absl::StripAsciiWhitespace(harness::ReadFileOrEmpty(data_ + "/master/master.addr")));
  }
  bool ha_ = false;
  RunResult Herd(const std::vector<std::string>& args) const {
    // herd up wrote an admin credential for us beside its state.
    std::vector<std::string> argv = {harness::HerdBinary(), "--master", Master(), "--credentials",
                                     data_ + "/credentials.pem"};
    argv.insert(argv.end(), args.begin(), args.end());
    return harness::Run(argv, 60s);
  }

  // The pids of `herd up` itself (the lock's holder) and of its master and
  // agents (up.children).
  std::map<std::string, pid_t> CellDaemons() const {
    std::map<std::string, pid_t> out;
    pid_t up = 0;
    if (absl::SimpleAtoi(absl::StripAsciiWhitespace(harness::ReadFileOrEmpty(data_ + "/up.lock")), &up)) {
      out["up"] = up;
    }
    for (absl::string_view line : absl::StrSplit(harness::ReadFileOrEmpty(data_ + "/up.children"), '\n')) {
      std::vector<std::string> f = absl::StrSplit(line, ' ', absl::SkipEmpty());
      pid_t pid = 0;
      if (f.size() == 3 && absl::SimpleAtoi(f[1], &pid)) out[f[0]] = pid;
    }
    return out;
  }

  // The job's tasks once all are RUNNING and active.
  v1::ListTasksResponse WaitActive(const std::string& job, int n) {
    v1::ListTasksResponse last;
    bool ok = Eventually(
        [&] {
          RunResult r = Herd({"tasks", job, "--json"});
          if (r.exit_code != 0) return false;
          absl::StatusOr<v1::ListTasksResponse> t = harness::ParseJsonAs<v1::ListTasksResponse>(r.out);
          if (!t.ok()) return false;
          last = *t;
          return t->tasks_size() == n && harness::CountTasks(*t, v1::Task::RUNNING, v1::Task::ACTIVE) == n;
        },
        60s, 100ms);
    EXPECT_TRUE(ok) << harness::Summarize(last) << Logs();
    return last;
  }

  std::string Logs() const {
    std::string out;
    for (const char* f : {"up.log", "logs/master.log", "logs/m0.log", "logs/m1.log", "logs/master0.log",
                          "logs/master1.log", "logs/master2.log"}) {
      absl::StrAppend(&out, "\n---- ", f, " ----\n", harness::ReadFileOrEmpty(data_ + "/" + f));
    }
    return out;
  }

  // True if `pid` has a file descriptor open on `path`.
  static bool HoldsFile(pid_t pid, const std::string& path) {
    std::error_code ec;
    for (const auto& fd : fs::directory_iterator(absl::StrCat("/proc/", pid, "/fd"), ec)) {
      std::error_code ec2;
      if (fs::read_symlink(fd.path(), ec2).string() == path) return true;
    }
    return false;
  }

  // Submits `tasks` sleeps, waits until all are active (asking every
  // `poll`), then checks that herd down stops them all and starts none again.
  void DownOfABusyCell(int tasks, harness::Ms poll);

  harness::TestDir dir_;
  const std::string data_ = dir_.Sub("cell");
};

const char* const kJob =
    "name: sleepers\nuser: alice\npriority: production\ntasks: 3\n"
    "command: [\"sleep\", \"3600\"]\nresources: {cpu: 50m, memory: 16Mi}\n";

TEST_F(UpTest, AKilledCellComesBackOnItsDataAndReadoptsItsTasksAndDownLeavesNothing) {
  RunResult up = Up();
  ASSERT_EQ(up.exit_code, 0) << up.Describe() << Logs();
  ASSERT_FALSE(Master().empty());
  RunResult sub = Herd({"submit", dir_.Write("job.yaml", kJob)});
  ASSERT_EQ(sub.exit_code, 0) << sub.Describe();
  v1::ListTasksResponse before = WaitActive("sleepers", 3);
  ASSERT_FALSE(HasFailure());
  // The cell answers DNS for its tasks on a loopback port it printed.
  auto info = harness::ParseJsonAs<v1::CellInfo>(Herd({"cell", "--json"}).out);
  ASSERT_TRUE(info.ok()) << info.status();
  ASSERT_TRUE(absl::StartsWith(info->dns(), "127.0.0.1:")) << info->ShortDebugString();
  EXPECT_TRUE(absl::StrContains(up.out, absl::StrCat("dns     ", info->dns()))) << up.out;
  RunResult dig = harness::Run(
      {"/usr/bin/dig", "@127.0.0.1", "-p", info->dns().substr(10), "+short", "0.sleepers.alice.local.herd"});
  EXPECT_EQ(dig.out, "127.0.0.1\n") << dig.Describe();
  std::vector<ProcInfo> tasks;
  for (const v1::Task& t : before.tasks()) {
    std::optional<ProcInfo> p = harness::ReadProc(static_cast<pid_t>(t.pid()));
    ASSERT_TRUE(p) << "task " << t.index() << " pid " << t.pid();
    tasks.push_back(*p);
  }

  // kill -9 of the whole cell: `herd up`, its master and its agents.
  std::map<std::string, pid_t> daemons = CellDaemons();
  ASSERT_EQ(daemons.size(), 4u) << "up, master, m0, m1";
  std::vector<ProcInfo> dead;
  for (const auto& [name, pid] : daemons) {
    std::optional<ProcInfo> p = harness::ReadProc(pid);
    ASSERT_TRUE(p) << name;
    dead.push_back(*p);
    ASSERT_EQ(kill(pid, SIGKILL), 0) << name;
  }
  ASSERT_TRUE(Eventually([&] {
    for (const ProcInfo& p : dead) {
      if (harness::ProcessAlive(p)) return false;
    }
    return true;
  }));
  for (const ProcInfo& t : tasks) EXPECT_TRUE(harness::ProcessAlive(t)) << "task " << t.pid << " died with the cell";

  // The same command brings the cell back: the dead cell's lock is gone with
  // it, and its tasks are re-adopted, not restarted.
  up = Up();
  ASSERT_EQ(up.exit_code, 0) << up.Describe() << Logs();
  v1::ListTasksResponse after = WaitActive("sleepers", 3);
  ASSERT_FALSE(HasFailure());
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(after.tasks(i).pid(), before.tasks(i).pid()) << "task " << i << " was restarted";
    EXPECT_EQ(after.tasks(i).incarnation(), before.tasks(i).incarnation()) << "task " << i << " was moved";
    EXPECT_EQ(after.tasks(i).restarts(), 0) << "task " << i;
  }
  // Only `herd up` holds the cell's lock: not its master or agents, not a
  // task or a shim (or the lock would outlive the cell).
  const std::string lock = fs::canonical(data_ + "/up.lock").string();
  std::map<std::string, pid_t> holders = CellDaemons();
  ASSERT_EQ(holders.size(), 4u);
  EXPECT_TRUE(HoldsFile(holders["up"], lock));
  holders.erase("up");
  for (const ProcInfo& p : harness::ProcessesUnder(data_ + "/agents")) holders[absl::StrCat("pid ", p.pid)] = p.pid;
  for (const auto& [name, pid] : holders) EXPECT_FALSE(HoldsFile(pid, lock)) << name << " holds " << lock;

  // herd down: nothing of the cell is left.
  std::map<std::string, pid_t> second = CellDaemons();
  std::vector<ProcInfo> cell;
  for (const auto& [name, pid] : second) {
    if (std::optional<ProcInfo> p = harness::ReadProc(pid)) cell.push_back(*p);
  }
  for (const ProcInfo& p : harness::ProcessesUnder(data_ + "/agents")) cell.push_back(p);
  ASSERT_GE(cell.size(), 4u + 3u);
  RunResult down = Down();
  EXPECT_EQ(down.exit_code, 0) << down.Describe();
  EXPECT_TRUE(absl::StartsWith(down.out, "cell stopped")) << down.out;
  for (const ProcInfo& p : cell) {
    EXPECT_FALSE(harness::ProcessAlive(p)) << "pid " << p.pid << " (" << absl::StrJoin(p.cmdline, " ")
                                           << ") outlived herd down";
  }
  for (const ProcInfo& t : tasks) EXPECT_FALSE(harness::ProcessAlive(t)) << "task " << t.pid;
  EXPECT_TRUE(harness::ProcessesUnder(data_).empty());
}

// Issue #11: `herd down` of a cell running thousands of tasks said "did not
// stop within 90 s" and left task processes behind (1,360 with their
// shims): the agent that finished stopping first reported its runs gone, the
// master placed them again on an agent still stopping, which started them. A
// stopping agent now refuses polls, so nothing starts again and nothing is
// left.
void UpTest::DownOfABusyCell(int tasks, harness::Ms poll) {
  RunResult up = Up();
  ASSERT_EQ(up.exit_code, 0) << up.Describe() << Logs();
  const std::string spec = dir_.Sub("many.yaml");
  std::ofstream(spec) << "name: many\nuser: alice\npriority: batch\ntasks: " << tasks
                      << "\ncommand: [\"sleep\", \"3600\"]\nresources: {cpu: 1m, memory: 1Mi}\ngrace_period: 1s\n";
  RunResult r = Herd({"submit", spec});
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  ASSERT_TRUE(Eventually(
      [&] {
        RunResult t = Herd({"tasks", "many", "--json"});
        auto parsed = harness::ParseJsonAs<v1::ListTasksResponse>(t.out);
        return t.exit_code == 0 && parsed.ok() &&
               harness::CountTasks(*parsed, v1::Task::RUNNING, v1::Task::ACTIVE) == tasks;
      },
      600s, poll))
      << Logs();
  const auto t0 = std::chrono::steady_clock::now();
  RunResult down = Down();
  std::printf("herd down of %d tasks: %.1f s\n", tasks,
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  EXPECT_EQ(down.exit_code, 0) << down.Describe();
  EXPECT_TRUE(absl::StartsWith(down.out, "cell stopped")) << down.Describe();
  EXPECT_FALSE(absl::StrContains(harness::ReadFileOrEmpty(data_ + "/up.log"), "task processes the agents left"))
      << Logs();
  // Every run directory is a first incarnation: nothing was placed again.
  std::vector<std::string> again;
  std::error_code ec;
  for (const auto& agent : fs::directory_iterator(data_ + "/agents", ec)) {
    for (const auto& run : fs::directory_iterator(agent.path() / "runs", ec)) {
      if (!absl::EndsWith(run.path().filename().string(), ".1")) again.push_back(run.path().string());
    }
  }
  EXPECT_TRUE(again.empty()) << again.size() << " runs started again while the cell stopped, e.g. " << again[0];
  const std::vector<ProcInfo> left = harness::ProcessesUnder(data_);
  EXPECT_TRUE(left.empty()) << left.size() << " processes of the cell outlived herd down, e.g. pid " << left[0].pid
                            << " (" << absl::StrJoin(left[0].cmdline, " ") << ")";
}

// herd up --ha (issue #12): 3 etcd members and 3 masters on this machine.
// The leader killed -9: `herd up` starts it again (as a follower), another
// replica leads, a write through the list lands, the running tasks are
// untouched; herd down stops every process of the cell, etcd included.
TEST_F(UpTest, UpHaSurvivesItsLeadersDeathAndDownStopsEverything) {
  ha_ = true;
  RunResult up = harness::Run({harness::HerdBinary(), "up", "--ha", "--detach", "--data", data_, "--listen",
                               "127.0.0.1:0", "--agents", "2", "--poll-interval", "200ms"},
                              120s);
  ASSERT_EQ(up.exit_code, 0) << up.Describe() << Logs();
  EXPECT_NE(up.out.find("etcd://"), std::string::npos) << up.out;
  EXPECT_NE(up.out.find("(TLS"), std::string::npos) << up.out;  // etcd speaks TLS only
  EXPECT_NE(up.out.find(Master()), std::string::npos) << up.out;
  const std::string spec = data_ + "/web.yaml";
  std::ofstream(spec) << "name: web\nuser: alice\ntasks: 4\ncommand: [\"/bin/sleep\", \"3600\"]\n"
                         "resources: {cpu: 10m, memory: 8Mi}\n";
  RunResult r = Herd({"submit", spec});
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  const v1::ListTasksResponse before = WaitActive("alice/web", 4);

  auto info = harness::ParseJsonAs<v1::CellInfo>(Herd({"cell", "--json"}).out);
  ASSERT_TRUE(info.ok());
  const std::string leader = info->leader();
  std::vector<std::string> list = absl::StrSplit(Master(), ',');
  int li = -1;
  for (size_t i = 0; i < list.size(); ++i) {
    if (list[i] == leader) li = static_cast<int>(i);
  }
  ASSERT_GE(li, 0) << leader << " not in " << Master();
  const std::string name = absl::StrCat("master", li);
  const pid_t old_pid = CellDaemons().at(name);
  kill(old_pid, SIGKILL);
  // herd up starts it again...
  ASSERT_TRUE(Eventually([&] {
    auto d = CellDaemons();
    return d.count(name) && d.at(name) != old_pid && kill(d.at(name), 0) == 0;
  }, 60s)) << Logs();
  // ...and a write lands on whichever replica leads now.
  const std::string spec2 = data_ + "/after.yaml";
  std::ofstream(spec2) << "name: after\nuser: alice\ntasks: 1\ncommand: [\"/bin/sleep\", \"3600\"]\n"
                          "resources: {cpu: 10m, memory: 8Mi}\n";
  ASSERT_TRUE(Eventually([&] { return (r = Herd({"submit", spec2})).exit_code == 0; }, 60s)) << r.Describe() << Logs();
  WaitActive("alice/after", 1);
  const v1::ListTasksResponse after = WaitActive("alice/web", 4);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(after.tasks(i).pid(), before.tasks(i).pid()) << harness::Summarize(after);
    EXPECT_EQ(after.tasks(i).incarnation(), before.tasks(i).incarnation());
  }

  const auto daemons = CellDaemons();
  EXPECT_EQ(daemons.size(), 1u + 3u + 3u + 2u);  // up, etcd x3, masters x3, agents x2
  RunResult down = Down();
  ASSERT_EQ(down.exit_code, 0) << down.Describe();
  for (const auto& [n, pid] : daemons) {
    EXPECT_TRUE(Eventually([&, pid = pid] { return kill(pid, 0) != 0; }, 30s)) << n << " (pid " << pid << ") still runs";
  }
}

TEST_F(UpTest, DownOfABusyCellStartsNothingAgainAndLeavesNothing) { DownOfABusyCell(600, 200ms); }

// The same at the size of the cell, which left 1,360 task processes:
// 1,800 tasks (herd up slices this machine's CPUs among its agents; 1,800
// tasks of 1m need 2 CPUs). About 3,600 processes and ~1 GiB, 20-40 s: no
// heavier than scale_integration_test's 2,250 tasks, so in the quick suite.
TEST_F(UpTest, DownOfACellOfThousandsOfTasksStopsItAllAndStartsNothingAgain) {
  ASSERT_GE(sysconf(_SC_NPROCESSORS_ONLN), 2) << "1,800 tasks of 1m need 2 CPUs for herd up to slice";
  DownOfABusyCell(1800, 1s);
}

TEST_F(UpTest, DownAfterTheWholeCellWasKilledStopsWhatItLeft) {
  RunResult up = Up();
  ASSERT_EQ(up.exit_code, 0) << up.Describe() << Logs();
  ASSERT_EQ(Herd({"submit", dir_.Write("job.yaml", kJob)}).exit_code, 0);
  v1::ListTasksResponse before = WaitActive("sleepers", 3);
  ASSERT_FALSE(HasFailure());
  std::vector<ProcInfo> left;
  for (const auto& [name, pid] : CellDaemons()) {
    std::optional<ProcInfo> p = harness::ReadProc(pid);
    ASSERT_TRUE(p) << name;
    ASSERT_EQ(kill(pid, SIGKILL), 0) << name;
  }
  for (const ProcInfo& p : harness::ProcessesUnder(data_ + "/agents")) left.push_back(p);
  ASSERT_GE(left.size(), 3u);

  RunResult down = Down();
  EXPECT_EQ(down.exit_code, 0) << down.Describe();
  EXPECT_TRUE(absl::StrContains(down.out, "no cell was running")) << down.out;
  for (const ProcInfo& p : left) EXPECT_FALSE(harness::ProcessAlive(p)) << "pid " << p.pid;
  EXPECT_TRUE(harness::ProcessesUnder(data_).empty());

  // Nothing left: a second herd down says so and fails.
  down = Down();
  EXPECT_EQ(down.exit_code, 1) << down.Describe();
  EXPECT_TRUE(absl::StrContains(down.err, "no cell is running from")) << down.err;
}

}  // namespace
}  // namespace herd
