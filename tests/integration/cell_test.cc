// A real cell: one master and three agents as separate processes on
// loopback, real task processes, driven through the herd CLI (issue #2).
// Each test starts its own cell in its own directory; the harness kills every
// process it started (tasks included) when the test ends.
#include <gtest/gtest.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <atomic>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/strings/ascii.h"
#include "harness/harness.h"

namespace herd {
namespace {

using harness::Cell;
using harness::CountTasks;
using harness::Eventually;
using harness::ProcInfo;
using harness::RunResult;
using harness::Summarize;
using namespace std::chrono_literals;

constexpr int64_t kTaskCpuMillis = 500;  // 4 tasks fit on an agent of cpu=2

// A job of `tasks` long-running tasks that print "task I" to stdout and
// "err I" to stderr.
std::string ServiceSpec(const std::string& name, int tasks, const std::string& grace = "2s") {
  return absl::StrCat("name: ", name, "\nuser: alice\npriority: production\ntasks: ", tasks,
                      "\ncommand: [\"/bin/sh\", \"-c\", \"echo task ${task.index}; echo err ${task.index} >&2; "
                      "sleep 3600\"]\nresources: {cpu: ", kTaskCpuMillis, "m, memory: 64Mi}\ngrace_period: ",
                      grace, "\n");
}

class CellTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(cell_.StartMaster().ok()) << cell_.LogTails();
    absl::Status st = cell_.StartAgents(3);
    ASSERT_TRUE(st.ok()) << st << "\n" << cell_.LogTails();
  }

  void Submit(const std::string& name, const std::string& spec) {
    RunResult r = cell_.Herd({"submit", cell_.WriteSpec(name + ".yaml", spec)});
    ASSERT_EQ(r.exit_code, 0) << r.Describe();
  }


  // The process behind a task's reported pid; it must be the task's own
  // process, started by the agent of the task's machine.
  ProcInfo TaskProcess(const v1::Task& t) {
    auto p = harness::ReadProc(static_cast<pid_t>(t.pid()));
    if (!p) {
      ADD_FAILURE() << "task " << t.job() << "/" << t.index() << ": pid " << t.pid() << " is not in /proc";
      return {};
    }
    EXPECT_NE(p->state, 'Z') << "pid " << t.pid() << " is a zombie";
    EXPECT_EQ(harness::ProcEnv(p->pid, "HERD_JOB").value_or("?"), t.job()) << "pid " << t.pid();
    EXPECT_EQ(harness::ProcEnv(p->pid, "HERD_TASK_INDEX").value_or("?"), absl::StrCat(t.index())) << "pid " << t.pid();
    std::string root = cell_.AgentRoot(t.machine());
    bool under = false;
    for (const auto& q : harness::ProcessesUnder(root)) under |= q.pid == p->pid;
    EXPECT_TRUE(under) << "pid " << t.pid() << " of task " << t.index() << " was not started by the agent of "
                       << t.machine() << " (root " << root << ")";
    return *p;
  }

  // Every live process of the task's process group (the task leads it).
  std::vector<ProcInfo> TaskGroup(const v1::Task& t) {
    std::vector<ProcInfo> out;
    for (const auto& p : harness::ProcessesUnder(cell_.AgentRoot(t.machine()))) {
      if (p.pgid == t.pid()) out.push_back(p);
    }
    return out;
  }

  Cell cell_;
};

std::map<std::string, int> PerMachine(const v1::ListTasksResponse& r) {
  std::map<std::string, int> n;
  for (const auto& t : r.tasks()) ++n[t.machine()];
  return n;
}

TEST_F(CellTest, JobRunsAllTasksAsRealProcessesSpreadOverMachinesThatFit) {
  ASSERT_NO_FATAL_FAILURE(Submit("web", ServiceSpec("web", 6)));
  v1::ListTasksResponse tasks = cell_.WaitActive("web", 6);
  ASSERT_EQ(CountTasks(tasks, v1::Task::RUNNING, v1::Task::ACTIVE), 6);

  // Placement: only machines of the cell, none over capacity (6 x 500m does
  // not fit on one machine of 2 cpus, so at least two are used).
  std::map<std::string, int> per = PerMachine(tasks);
  for (const auto& [m, n] : per) {
    EXPECT_TRUE(m == "m1" || m == "m2" || m == "m3") << m;
    EXPECT_LE(n * kTaskCpuMillis, 2000) << m << " holds " << n << " tasks";
  }
  EXPECT_GE(per.size(), 2u) << Summarize(tasks);
  auto machines = cell_.Machines();
  ASSERT_TRUE(machines.ok()) << machines.status();
  for (const auto& m : machines->machines()) {
    EXPECT_EQ(m.state(), v1::Machine::UP) << m.name();
    EXPECT_EQ(m.task_count(), per[m.name()]) << m.name();
    EXPECT_EQ(m.allocated().cpu_millis(), per[m.name()] * kTaskCpuMillis) << m.name();
  }

  // The processes are real: distinct, alive, the task's own (environment),
  // started by the agent of the machine the master says.
  std::set<int64_t> pids;
  for (const auto& t : tasks.tasks()) {
    EXPECT_EQ(t.incarnation(), 1) << t.index();
    EXPECT_EQ(t.last_event().transition(), v1::Event::SCHEDULE) << t.index();
    pids.insert(t.pid());
    TaskProcess(t);
  }
  EXPECT_EQ(pids.size(), 6u);
}

TEST_F(CellTest, LostMachineTasksAreRescheduledAndItsDuplicatesKilledWhenItReturns) {
  ASSERT_NO_FATAL_FAILURE(Submit("web", ServiceSpec("web", 6)));
  v1::ListTasksResponse before = cell_.WaitActive("web", 6);
  ASSERT_FALSE(HasFailure());

  // The victim: the machine holding the most tasks.
  std::map<std::string, int> per = PerMachine(before);
  std::string victim = std::max_element(per.begin(), per.end(), [](auto& a, auto& b) { return a.second < b.second; })
                           ->first;
  std::map<int, ProcInfo> old_procs;  // task index -> its process on the victim
  std::map<int, v1::Task> elsewhere;
  for (const auto& t : before.tasks()) {
    if (t.machine() == victim) {
      old_procs[t.index()] = TaskProcess(t);
    } else {
      elsewhere[t.index()] = t;
    }
  }
  ASSERT_FALSE(old_procs.empty());

  cell_.StopAgent(victim, SIGKILL);

  // Missed polls -> DOWN.
  v1::Machine down;
  ASSERT_TRUE(Eventually(
      [&] {
        auto m = cell_.Machine(victim);
        if (m.ok()) down = *m;
        return m.ok() && m->state() == v1::Machine::DOWN;
      },
      10s))
      << victim << " never went DOWN: " << down.ShortDebugString();
  EXPECT_TRUE(absl::StrContains(down.reason(), "missed")) << down.reason();

  // Its tasks run again elsewhere, as new incarnations; the others are
  // untouched.
  v1::ListTasksResponse after;
  ASSERT_TRUE(Eventually(
      [&] {
        auto t = cell_.Tasks("web");
        if (!t.ok()) return false;
        after = *t;
        if (CountTasks(after, v1::Task::RUNNING, v1::Task::ACTIVE) != 6) return false;
        for (const auto& task : after.tasks()) {
          if (task.machine() == victim || task.pid() == 0) return false;
        }
        return true;
      },
      15s))
      << "web did not recover from losing " << victim << ": " << Summarize(after);
  for (const auto& t : after.tasks()) {
    if (old_procs.contains(t.index())) {
      EXPECT_EQ(t.incarnation(), 2) << "task " << t.index();
      ASSERT_GE(t.history_size(), 2) << "task " << t.index();
      EXPECT_EQ(t.history(t.history_size() - 1).transition(), v1::Event::SCHEDULE) << t.ShortDebugString();
      EXPECT_EQ(t.history(t.history_size() - 2).transition(), v1::Event::LOST) << t.ShortDebugString();
      EXPECT_EQ(t.last_event().transition(), v1::Event::SCHEDULE);
      EXPECT_NE(t.pid(), old_procs[t.index()].pid);
      TaskProcess(t);
    } else {
      const v1::Task& was = elsewhere[t.index()];
      EXPECT_EQ(t.machine(), was.machine()) << "task " << t.index() << " moved";
      EXPECT_EQ(t.incarnation(), was.incarnation()) << "task " << t.index();
      EXPECT_EQ(t.pid(), was.pid()) << "task " << t.index() << " was restarted";
    }
  }
  // Tasks outlive their agent: the old runs are still there (duplicates).
  for (const auto& [index, p] : old_procs) {
    EXPECT_TRUE(harness::ProcessAlive(p)) << "task " << index << "'s old process " << p.pid
                                          << " died with its agent";
  }

  // The agent comes back (same name and root): the master no longer wants
  // those runs there, so the agent kills them.
  absl::Status st = cell_.RestartAgent(victim);
  ASSERT_TRUE(st.ok()) << st;
  std::vector<int> survivors;
  bool gone = Eventually(
      [&] {
        survivors.clear();
        for (const auto& [index, p] : old_procs) {
          if (harness::ProcessAlive(p)) survivors.push_back(index);
        }
        return survivors.empty();
      },
      10s);
  EXPECT_TRUE(gone) << survivors.size() << " duplicate task processes still run on " << victim;
  EXPECT_TRUE(Eventually([&] { return harness::ProcessesUnder(cell_.AgentRoot(victim)).empty(); }, 10s))
      << "processes left under " << victim << "'s root";

  // The job was not disturbed by the return.
  auto now = cell_.Tasks("web");
  ASSERT_TRUE(now.ok()) << now.status();
  EXPECT_EQ(CountTasks(*now, v1::Task::RUNNING, v1::Task::ACTIVE), 6) << Summarize(*now);
  for (int i = 0; i < now->tasks_size(); ++i) {
    const v1::Task& t = now->tasks(i);
    const v1::Task& was = after.tasks(i);
    EXPECT_EQ(t.index(), was.index());
    EXPECT_EQ(t.machine(), was.machine()) << "task " << t.index();
    EXPECT_EQ(t.incarnation(), was.incarnation()) << "task " << t.index();
    EXPECT_EQ(t.pid(), was.pid()) << "task " << t.index();
    EXPECT_TRUE(harness::ProcessAlive(static_cast<pid_t>(t.pid()))) << "task " << t.index();
  }
  auto m = cell_.Machine(victim);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->state(), v1::Machine::UP);
  EXPECT_EQ(m->task_count(), 0);
}

TEST_F(CellTest, MasterKilledWhileSubmissionsStreamInKeepsAcknowledgedJobsAndRunningTasks) {
  ASSERT_NO_FATAL_FAILURE(Submit("web", ServiceSpec("web", 6)));
  cell_.WaitActive("web", 6);
  ASSERT_FALSE(HasFailure());

  // A client submitting small jobs one by one, recording which the master
  // acknowledged (exit 0).
  struct Attempt {
    std::string job;
    int exit_code;
    std::string err;
  };
  std::mutex mu;
  std::vector<Attempt> attempts;
  std::atomic<bool> stop{false};
  std::thread client([&] {
    for (int i = 0; i < 400 && !stop; ++i) {
      std::string name = absl::StrCat("s", i);
      std::string spec = absl::StrCat("name: ", name,
                                      "\nuser: alice\npriority: batch\ntasks: 1\n"
                                      "command: [\"sleep\", \"3600\"]\nresources: {cpu: 10m, memory: 4Mi}\n");
      RunResult r = cell_.Herd({"submit", cell_.WriteSpec(name + ".yaml", spec)}, 20s);
      {
        std::lock_guard<std::mutex> l(mu);
        attempts.push_back({"alice/" + name, r.exit_code, r.err});
      }
      if (r.exit_code != 0) std::this_thread::sleep_for(20ms);
    }
  });
  auto count = [&](bool acked) {
    std::lock_guard<std::mutex> l(mu);
    return std::count_if(attempts.begin(), attempts.end(), [&](auto& a) { return (a.exit_code == 0) == acked; });
  };
  // Joins the client whatever happens below.
  struct Joiner {
    std::atomic<bool>& stop;
    std::thread& t;
    ~Joiner() {
      stop = true;
      if (t.joinable()) t.join();
    }
  } joiner{stop, client};

  ASSERT_TRUE(Eventually([&] { return count(true) >= 10; }, 20s)) << "the client got no acknowledgements";
  v1::ListTasksResponse web = cell_.WaitActive("web", 6);
  v1::ListTasksResponse s0 = cell_.WaitActive("s0", 1);
  std::vector<ProcInfo> procs;
  for (const auto& r : {web, s0}) {
    for (const auto& t : r.tasks()) procs.push_back(TaskProcess(t));
  }

  cell_.StopMaster(SIGKILL);
  auto acked_at_kill = count(true);
  // Submissions keep coming and fail while the master is down.
  ASSERT_TRUE(Eventually([&] { return count(false) >= 2; }, 10s));

  absl::Status st = cell_.StartMaster();
  ASSERT_TRUE(st.ok()) << st;
  ASSERT_TRUE(Eventually([&] { return count(true) >= acked_at_kill + 10; }, 20s))
      << "no acknowledgements after the restart";
  stop = true;
  client.join();

  std::vector<Attempt> all;
  {
    std::lock_guard<std::mutex> l(mu);
    all = attempts;
  }
  for (const auto& a : all) {
    if (a.exit_code != 0) {
      EXPECT_EQ(a.exit_code, 1) << a.job << ": " << a.err;
      EXPECT_TRUE(absl::StrContains(a.err, "cannot reach the master")) << a.job << ": " << a.err;
    }
  }

  // Every acknowledged job is there (and gets its task running).
  std::set<std::string> missing;
  std::set<std::string> not_running;
  bool ok = Eventually(
      [&] {
        auto jobs = cell_.Jobs(/*include_dead=*/true);
        if (!jobs.ok()) return false;
        std::map<std::string, const v1::Job*> by_id;
        for (const auto& j : jobs->jobs()) by_id[j.id()] = &j;
        missing.clear();
        not_running.clear();
        for (const auto& a : all) {
          if (a.exit_code != 0) continue;
          auto it = by_id.find(a.job);
          if (it == by_id.end()) {
            missing.insert(a.job);
          } else if (it->second->running() != 1) {
            not_running.insert(a.job);
          }
        }
        return missing.empty() && not_running.empty();
      },
      20s);
  EXPECT_TRUE(missing.empty()) << missing.size() << " acknowledged jobs lost, e.g. " << *missing.begin();
  EXPECT_TRUE(ok) << not_running.size() << " acknowledged jobs not running, e.g. "
                  << (not_running.empty() ? "" : *not_running.begin());
  EXPECT_GE(count(true), 20);
  std::printf("submissions: %zu attempted, %zu acknowledged (%zu before the kill), %zu refused\n", all.size(),
              static_cast<size_t>(count(true)), static_cast<size_t>(acked_at_kill), static_cast<size_t>(count(false)));

  // Tasks that ran before the crash were not disturbed: same pid, same
  // incarnation, same process.
  for (const auto& before : {web, s0}) {
    auto now = cell_.Tasks(before.tasks(0).job());
    ASSERT_TRUE(now.ok()) << now.status();
    ASSERT_EQ(now->tasks_size(), before.tasks_size());
    for (int i = 0; i < before.tasks_size(); ++i) {
      const v1::Task& b = before.tasks(i);
      const v1::Task& n = now->tasks(i);
      EXPECT_EQ(n.state(), v1::Task::RUNNING) << n.ShortDebugString();
      EXPECT_EQ(n.machine(), b.machine()) << n.job() << "/" << n.index();
      EXPECT_EQ(n.incarnation(), b.incarnation()) << n.job() << "/" << n.index();
      EXPECT_EQ(n.pid(), b.pid()) << n.job() << "/" << n.index();
    }
  }
  for (const auto& p : procs) EXPECT_TRUE(harness::ProcessAlive(p)) << "task process " << p.pid << " died";
}

TEST_F(CellTest, KilledJobHasEveryTaskDeadAndItsProcessesGoneWithinTheGracePeriod) {
  // web stops on SIGTERM; stubborn ignores it and needs the SIGKILL that
  // follows its 1 s grace period.
  ASSERT_NO_FATAL_FAILURE(Submit("web", ServiceSpec("web", 4, "2s")));
  ASSERT_NO_FATAL_FAILURE(Submit(
      "stubborn", "name: stubborn\nuser: alice\npriority: production\ntasks: 2\n"
                  "command: [\"/bin/sh\", \"-c\", \"trap '' TERM; sleep 3600; echo survived\"]\n"
                  "resources: {cpu: 100m, memory: 16Mi}\ngrace_period: 1s\n"));
  v1::ListTasksResponse web = cell_.WaitActive("web", 4);
  v1::ListTasksResponse stubborn = cell_.WaitActive("stubborn", 2);
  ASSERT_FALSE(HasFailure());

  for (const auto& [job, tasks, grace] :
       {std::tuple{std::string("web"), web, 2000ms}, std::tuple{std::string("stubborn"), stubborn, 1000ms}}) {
    std::vector<ProcInfo> procs;  // every process of every task, shims included
    for (const auto& t : tasks.tasks()) {
      std::vector<ProcInfo> group = TaskGroup(t);
      EXPECT_GE(group.size(), 2u) << "task " << t.index() << " (sh and sleep)";
      procs.insert(procs.end(), group.begin(), group.end());
      auto task_proc = harness::ReadProc(static_cast<pid_t>(t.pid()));
      ASSERT_TRUE(task_proc.has_value()) << "task " << t.index();
      for (const auto& p : harness::ProcessesUnder(cell_.AgentRoot(t.machine()))) {
        if (p.pid == task_proc->ppid) procs.push_back(p);  // its shim
      }
    }
    ASSERT_GE(procs.size(), static_cast<size_t>(3 * tasks.tasks_size()));

    auto start = std::chrono::steady_clock::now();
    RunResult r = cell_.Herd({"kill", job});
    ASSERT_EQ(r.exit_code, 0) << r.Describe();
    EXPECT_EQ(r.out, absl::StrCat("killed alice/", job, ": ", tasks.tasks_size(), " tasks dead\n"));

    auto now = cell_.Tasks(job);
    ASSERT_TRUE(now.ok()) << now.status();
    for (const auto& t : now->tasks()) {
      EXPECT_EQ(t.state(), v1::Task::DEAD) << t.ShortDebugString();
      EXPECT_EQ(t.last_event().transition(), v1::Event::KILL) << t.ShortDebugString();
    }
    // Gone, shims included. The timeout only bounds a failure: how each task
    // ended is checked below from its agent's record, not from this clock.
    std::vector<pid_t> alive;
    bool gone = Eventually(
        [&] {
          alive.clear();
          for (const auto& p : procs) {
            if (harness::ProcessAlive(p)) alive.push_back(p.pid);
          }
          return alive.empty();
        },
        grace + 60s, 20ms);
    auto took = std::chrono::duration_cast<harness::Ms>(std::chrono::steady_clock::now() - start);
    EXPECT_TRUE(gone) << alive.size() << " processes of " << job << " survive its kill after " << took.count()
                      << " ms";
    // web ended by the SIGTERM, without needing its grace period; stubborn
    // ignored it and only the SIGKILL after its grace period ended it (which
    // cannot come sooner than the grace period: a lower bound holds on a
    // busy machine).
    const int want_signal = job == "web" ? SIGTERM : SIGKILL;
    for (const auto& t : tasks.tasks()) {
      // herd-shim writes how the task ended into its run directory.
      const std::string exit_file = absl::StrCat(cell_.AgentRoot(t.machine()), "/runs/alice.", job, ".", t.index(),
                                                 ".", t.incarnation(), "/exit");
      std::string text;
      EXPECT_TRUE(Eventually([&] { return !(text = harness::ReadFileOrEmpty(exit_file)).empty(); }, 30s))
          << exit_file;
      EXPECT_EQ(absl::StripAsciiWhitespace(text), absl::StrCat("signaled ", want_signal))
          << job << "/" << t.index() << " (" << exit_file << ")";
    }
    if (job == "stubborn") {
      EXPECT_GE(took, grace) << "stubborn ignores SIGTERM; only SIGKILL after the grace period stops it";
    }
  }
  for (const std::string& m : cell_.AgentNames()) {
    EXPECT_TRUE(harness::ProcessesUnder(cell_.AgentRoot(m)).empty()) << "processes left on " << m;
  }
  // The jobs are dead: `herd jobs` leaves them out, `--all` shows them.
  auto live = cell_.Jobs();
  ASSERT_TRUE(live.ok());
  EXPECT_EQ(live->jobs_size(), 0) << live->ShortDebugString();
  auto all = cell_.Jobs(/*include_dead=*/true);
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->jobs_size(), 2);
  for (const auto& j : all->jobs()) {
    EXPECT_EQ(j.state(), v1::Job::DEAD) << j.id();
    EXPECT_EQ(j.dead(), j.spec().task_count()) << j.id();
  }
}

TEST_F(CellTest, TaskExitingZeroFinishesAndExitingThreeFails) {
  ASSERT_NO_FATAL_FAILURE(Submit("done", "name: done\nuser: alice\npriority: batch\ntasks: 1\n"
                                         "command: [\"/bin/sh\", \"-c\", \"echo bye; exit 0\"]\n"
                                         "resources: {cpu: 100m, memory: 16Mi}\nrestart: never\n"));
  ASSERT_NO_FATAL_FAILURE(Submit("broken", "name: broken\nuser: alice\npriority: batch\ntasks: 1\n"
                                           "command: [\"/bin/sh\", \"-c\", \"echo oops >&2; exit 3\"]\n"
                                           "resources: {cpu: 100m, memory: 16Mi}\nrestart: never\n"));
  for (const auto& [job, transition, code] :
       {std::tuple{std::string("done"), v1::Event::FINISH, 0}, std::tuple{std::string("broken"), v1::Event::FAIL, 3}}) {
    v1::Task last;
    bool dead = Eventually(
        [&] {
          auto t = cell_.Tasks(job);
          if (!t.ok() || t->tasks_size() != 1) return false;
          last = t->tasks(0);
          return last.state() == v1::Task::DEAD;
        },
        15s);
    ASSERT_TRUE(dead) << job << ": " << last.ShortDebugString();
    EXPECT_EQ(last.last_event().transition(), transition) << last.ShortDebugString();
    EXPECT_EQ(last.exit_code(), code) << last.ShortDebugString();
    EXPECT_EQ(last.exit_signal(), 0) << last.ShortDebugString();
    EXPECT_EQ(last.restarts(), 0) << "restart: never";
    EXPECT_EQ(last.incarnation(), 1);
    auto j = cell_.HerdJson<v1::GetJobResponse>({"status", job});
    ASSERT_TRUE(j.ok()) << j.status();
    EXPECT_EQ(j->job().state(), v1::Job::DEAD);
  }
  // Output outlives the task.
  RunResult out = cell_.Herd({"logs", "done/0"});
  EXPECT_EQ(out.exit_code, 0) << out.Describe();
  EXPECT_EQ(out.out, "bye\n");
  RunResult err = cell_.Herd({"logs", "broken/0", "--stderr"});
  EXPECT_EQ(err.exit_code, 0) << err.Describe();
  EXPECT_EQ(err.out, "oops\n");
  for (const std::string& m : cell_.AgentNames()) {
    EXPECT_TRUE(Eventually([&] { return harness::ProcessesUnder(cell_.AgentRoot(m)).empty(); }, 5s))
        << "processes left on " << m;
  }
}

TEST_F(CellTest, LogsPrintTheTasksStdoutAndStderr) {
  ASSERT_NO_FATAL_FAILURE(Submit("web", ServiceSpec("web", 3)));
  cell_.WaitActive("web", 3);
  for (int i = 0; i < 3; ++i) {
    std::string task = absl::StrCat("web/", i);
    RunResult out, err;
    EXPECT_TRUE(Eventually([&] { return (out = cell_.Herd({"logs", task})).out == absl::StrCat("task ", i, "\n"); },
                           5s))
        << task << ": " << out.Describe();
    EXPECT_EQ(out.exit_code, 0);
    EXPECT_EQ(out.err, "");
    EXPECT_TRUE(Eventually(
        [&] { return (err = cell_.Herd({"logs", task, "--stderr"})).out == absl::StrCat("err ", i, "\n"); }, 5s))
        << task << ": " << err.Describe();
    EXPECT_EQ(err.exit_code, 0);
  }
  // The owner's prefix works too; a task that does not exist is an error.
  RunResult full = cell_.Herd({"logs", "alice/web/1"});
  EXPECT_EQ(full.out, "task 1\n") << full.Describe();
  RunResult none = cell_.Herd({"logs", "web/7"});
  EXPECT_EQ(none.exit_code, 1) << none.Describe();
  EXPECT_TRUE(absl::StartsWith(none.err, "herd: ")) << none.err;
}

}  // namespace
}  // namespace herd
