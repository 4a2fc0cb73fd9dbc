// Fault suite, network partitions (issue #12, deliverable 5): every etcd
// member, master and agent runs in a network namespace of its own on a
// private bridge (harness/netns.h), so a partition is a real one: a link
// down, or the routes between two hosts dropped. Scenarios:
//
//   LeaderCutOffFromEtcd: the leader loses etcd (only etcd, so it could still
//     command its agents; or its whole link) while writes stream in. It must
//     exit (code 4) within the lease's TTL, before the new leader takes
//     over (the order of their own log lines), and come back as a follower.
//   HalfTheAgentsCutOff: half the machines lose the masters; the leader is
//     killed mid-partition. Machines are marked down (their tasks placed
//     again) at the rate-limited pace of issue #8, across the failover;
//     after the heal, no task index runs on two machines.
//   AgentKilledDuringTaskStarts: kill -9 the agent that is starting a big
//     job's tasks, restart it: every task runs, none twice.
//
// Invariants checked after every run: no acknowledged write lost; no task
// index running on two machines once the heal settled (from the agents' real
// processes, cross-checked with the master); no running task stopped by a
// control-plane fault (tasks on machines never cut keep pid and
// incarnation); every job placed. RESULT lines give the counts.
//
// Needs root (namespaces, veth pairs, a bridge): without it the test fails,
// saying so. Short mode (CTest, labels fault and etcd): a couple of faults
// per scenario. Long mode: HERD_FAULT_ROUNDS=N.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "fault/fault_support.h"
#include "harness/harness.h"
#include "harness/netns.h"
#include "master/core/link/link_shard.h"
#include "store/etcd/testing.h"

namespace herd {
namespace {

using fault::JobSpec;
using fault::Rounds;
using harness::Cell;
using harness::Eventually;
using harness::Network;
using harness::Summarize;
using namespace std::chrono_literals;
using SteadyClock = std::chrono::steady_clock;

constexpr int kLeaseTtlS = 2;
// A leader cut off from etcd gives up no later than the lease's TTL after
// the cut (it counts from the last keep-alive etcd answered, which was sent
// before the cut); this much more covers the wake-up and the exit.
constexpr int64_t kExitSlackMs = 1000;
// How long a poll may take before it counts as missed (the default, 10 s,
// makes a cut machine take 30 s to be marked down).
constexpr char kPollTimeout[] = "3s";

int64_t MsSince(SteadyClock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(SteadyClock::now() - t).count();
}

// Issue #8's pace: at most Budget() machines of a cell of `machines` are
// marked down per Window(); the master's defaults (link_shard.h), with the
// harness's poll interval and misses.
struct DownPace {
  int64_t window_ms;
  int budget;
};
DownPace Pace(const Cell::Options& o, int machines) {
  const master::LinkShard::Options d;
  int64_t poll_ms = 0;
  EXPECT_TRUE(absl::EndsWith(o.poll_interval, "ms") &&
              absl::SimpleAtoi(o.poll_interval.substr(0, o.poll_interval.size() - 2), &poll_ms))
      << o.poll_interval;
  return {std::max(poll_ms * o.down_after, d.min_down_window_ms),
          std::max(1, static_cast<int>(d.max_down_fraction * machines))};
}

class PartitionFault : public ::testing::Test {
 protected:
  void TearDown() override {
    writes_.Stop();
    cell_.Shutdown();
    etcd_.reset();
    net_.reset();
  }

  // The cell: etcd members e0..e2 (TLS), masters master0..2 and agents
  // m1..mN, each in a namespace of its own; a job "base" of `base_tasks`.
  void StartCell(int agents, int base_tasks) {
    absl::StatusOr<std::unique_ptr<Network>> net = Network::Create();
    ASSERT_TRUE(net.ok()) << "this test makes real partitions and cannot build its network: " << net.status();
    net_ = std::move(*net);
    store::etcd::testing::EtcdCluster::Options eo;
    eo.tls = true;  // a master refuses plaintext to an etcd off loopback
    for (int i = 0; i < 3; ++i) {
      absl::StatusOr<const Network::Host*> h = net_->AddHost(absl::StrCat("e", i));
      ASSERT_TRUE(h.ok()) << h.status();
      eo.wrappers.push_back(Network::Wrapper(**h));
      eo.hosts.push_back((*h)->ip);
    }
    std::vector<std::string> names;
    for (int i = 0; i < 3; ++i) names.push_back(absl::StrCat("master", i));
    for (int i = 1; i <= agents; ++i) names.push_back(absl::StrCat("m", i));
    for (const std::string& name : names) {
      absl::StatusOr<const Network::Host*> h = net_->AddHost(name);
      ASSERT_TRUE(h.ok()) << h.status();
      cell_.Place(name, {Network::Wrapper(**h), (*h)->ip});
    }
    std::filesystem::create_directories(cell_.dir().Sub("etcd"));
    etcd_ = std::make_unique<store::etcd::testing::EtcdCluster>(cell_.dir().Sub("etcd"), 3, eo);
    absl::Status st = etcd_->Start();
    ASSERT_TRUE(st.ok()) << st;
    st = cell_.StartReplicas(3, etcd_->Url("/herd/fault/"),
                             {"--etcd-credentials", etcd_->MasterCredential(), "--lease-ttl",
                              absl::StrCat(kLeaseTtlS), "--poll-timeout", kPollTimeout});
    ASSERT_TRUE(st.ok()) << st << cell_.LogTails();
    st = cell_.StartAgents(agents);
    ASSERT_TRUE(st.ok()) << st << cell_.LogTails();
    cell_.WriteSpec("base.yaml", JobSpec("base", base_tasks));
    ASSERT_EQ(cell_.Herd({"submit", cell_.dir().Sub("base.yaml")}).exit_code, 0);
    expected_["alice/base"] = base_tasks;
    cell_.WaitRunning("alice/base", base_tasks);
  }

  std::string MasterLog(int i) const { return cell_.dir().Sub(absl::StrCat("logs/master", i, ".log")); }

  // What a process supervisor does: a master that exited is started again
  // (it follows until it wins the lease).
  void Supervise() {
    for (int i = 0; i < cell_.replica_count(); ++i) {
      if (!cell_.replica(i)->Running()) {
        ASSERT_TRUE(cell_.RestartReplica(i).ok());
      }
    }
  }

  int WaitLeader() {
    int leader = -1;
    EXPECT_TRUE(Eventually([&] { return (leader = cell_.LeaderIndex()) >= 0; }, 120s)) << cell_.LogTails();
    return leader;
  }

  // Remembers every RUNNING task of `job` on a machine outside `exclude`
  // (each the first time it is seen): it must run on, undisturbed, to the
  // end.
  void RememberRunning(const std::string& job, const std::set<std::string>& exclude) {
    absl::StatusOr<v1::ListTasksResponse> t;
    ASSERT_TRUE(Eventually([&] { return (t = cell_.Tasks(job)).ok(); }, 60s)) << t.status();
    for (const auto& task : t->tasks()) {
      if (task.state() != v1::Task::RUNNING || task.pid() <= 0 || exclude.contains(task.machine())) continue;
      untouched_.try_emplace(absl::StrCat(job, "/", task.index()),
                             Seen{task.machine(), task.pid(), task.incarnation()});
    }
  }
  // Forgets the remembered tasks on `machine` (a machine the test hits).
  void ForgetRunningOn(const std::string& machine) {
    std::erase_if(untouched_, [&](const auto& kv) { return kv.second.machine == machine; });
  }
  // How many remembered tasks were stopped or started again.
  int CountDisturbed() {
    std::map<std::string, v1::ListTasksResponse> by_job;
    int disturbed = 0;
    for (const auto& [key, seen] : untouched_) {
      const std::string job = key.substr(0, key.rfind('/'));
      int index = std::stoi(key.substr(key.rfind('/') + 1));
      if (!by_job.contains(job)) {
        absl::StatusOr<v1::ListTasksResponse> t;
        Eventually([&] { return (t = cell_.Tasks(job)).ok(); }, 60s);
        by_job[job] = t.ok() ? *t : v1::ListTasksResponse();
      }
      bool same = false;
      for (const auto& task : by_job[job].tasks()) {
        if (task.index() != index) continue;
        same = task.state() == v1::Task::RUNNING && task.machine() == seen.machine && task.pid() == seen.pid &&
               task.incarnation() == seen.incarnation;
      }
      if (!same) {
        ++disturbed;
        ADD_FAILURE() << key << " ran on " << seen.machine << " as pid " << seen.pid << " (incarnation "
                      << seen.incarnation << ") on a machine no fault hit, and was touched: "
                      << Summarize(by_job[job]);
      }
    }
    return disturbed;
  }

  // Waits until the heal has settled: no task index runs on two machines
  // (the master told machines that came back to kill what now runs
  // elsewhere) and every expected task runs. Returns the task indexes that
  // still run twice (each a failure).
  int SettleAndCountDoubles() {
    std::map<std::string, std::vector<fault::TaskProcess>> procs;
    std::string missing;
    const std::vector<std::string> acked = writes_.acked();
    const bool settled = Eventually([&] {
      procs = fault::TaskProcesses(cell_);
      if (!fault::DoubleRunning(procs).empty()) return false;
      missing.clear();
      for (const auto& [job, n] : expected_) {
        for (int i = 0; i < n; ++i) {
          if (!procs.contains(absl::StrCat(job, "/", i))) absl::StrAppend(&missing, " ", job, "/", i);
        }
      }
      for (const std::string& j : acked) {
        if (!procs.contains(absl::StrCat("alice/", j, "/0"))) absl::StrAppend(&missing, " alice/", j, "/0");
      }
      return missing.empty();
    }, 180s, 100ms);
    const std::vector<std::string> doubles = fault::DoubleRunning(procs);
    for (const std::string& d : doubles) ADD_FAILURE() << "runs on two machines after the heal settled: " << d;
    EXPECT_TRUE(settled || !doubles.empty()) << "tasks that run nowhere after the heal:" << missing;
    return static_cast<int>(doubles.size());
  }

  // Every task process the agents run is one the master lists as running:
  // for the jobs of expected_, the same task (machine, pid); for the
  // writer's one-task jobs, as many as the master counts running. A process
  // the master does not know of is a ghost. Returns how many there are (each
  // a failure).
  int CountGhosts() {
    std::map<std::string, std::vector<fault::TaskProcess>> by_job;
    for (const auto& [key, ps] : fault::TaskProcesses(cell_)) {
      auto& v = by_job[key.substr(0, key.rfind('/'))];
      v.insert(v.end(), ps.begin(), ps.end());
    }
    absl::StatusOr<std::map<std::string, v1::Job>> jobs = fault::AllJobs(cell_);
    if (!jobs.ok()) {
      ADD_FAILURE() << "no leader lists the jobs: " << jobs.status();
      return 0;
    }
    int ghosts = 0;
    for (const auto& [job, ps] : by_job) {
      if (!expected_.contains(job)) {
        auto it = jobs->find(job);
        const int running = it == jobs->end() ? 0 : it->second.running();
        if (static_cast<int>(ps.size()) > running) {
          ghosts += static_cast<int>(ps.size()) - running;
          ADD_FAILURE() << job << " has " << ps.size() << " task processes (first on " << ps[0].machine
                        << ", pid " << ps[0].pid << "); the master counts " << running << " running";
        }
        continue;
      }
      absl::StatusOr<v1::ListTasksResponse> t;
      Eventually([&] { return (t = cell_.Tasks(job)).ok(); }, 60s);
      const v1::ListTasksResponse listed = t.ok() ? *t : v1::ListTasksResponse();
      for (const fault::TaskProcess& p : ps) {
        bool known = false;
        for (const auto& task : listed.tasks()) {
          known |= task.state() == v1::Task::RUNNING && task.machine() == p.machine && task.pid() == p.pid;
        }
        if (!known) {
          ++ghosts;
          ADD_FAILURE() << job << " runs on " << p.machine << " as pid " << p.pid << " (run " << p.run_id
                        << "), which the master does not list: "
                        << (t.ok() ? Summarize(listed) : t.status().ToString());
        }
      }
    }
    return ghosts;
  }

  // The invariants, after every fault healed; prints the run's RESULT lines
  // (`counts` are the scenario's own).
  void Check(const std::string& scenario, const std::vector<std::pair<std::string, int64_t>>& counts) {
    writes_.Stop();
    ASSERT_TRUE(net_->HealAll().ok());
    Supervise();
    ASSERT_GE(WaitLeader(), 0);
    const std::vector<std::string> acked = writes_.acked();
    for (const std::string& f : writes_.failures()) std::printf("not acknowledged: %s\n", f.c_str());
    const int lost = fault::CountLost(cell_, acked);
    // Every job is placed and runs.
    std::map<std::string, int> all = expected_;
    for (const std::string& j : acked) all["alice/" + j] = 1;
    fault::WaitAllRunning(cell_, all);
    const int disturbed = CountDisturbed();
    const int doubles = SettleAndCountDoubles();
    const int ghosts = CountGhosts();
    std::string out;
    auto line = [&](const std::string& name, int64_t v) {
      absl::StrAppend(&out, "RESULT ", scenario, "_", name, "=", v, "\n");
    };
    for (const auto& [name, v] : counts) line(name, v);
    line("writes_attempted", writes_.attempts());
    line("writes_acknowledged", static_cast<int64_t>(acked.size()));
    line("lost_acknowledged_writes", lost);
    line("double_running_tasks", doubles + doubles_after_heals_);
    line("ghost_tasks", ghosts);
    line("untouched_tasks_checked", static_cast<int64_t>(untouched_.size()));
    line("tasks_restarted", disturbed);
    std::printf("%s", out.c_str());
    std::fflush(stdout);
    EXPECT_GT(acked.size(), 0u);
  }

  struct Seen {
    std::string machine;
    int64_t pid = 0;
    int64_t incarnation = 0;
  };

  // Declared first, destroyed last: the namespaces go once every process
  // in them is gone.
  std::unique_ptr<Network> net_;
  Cell cell_;
  std::unique_ptr<store::etcd::testing::EtcdCluster> etcd_;
  // Five submits a second at most: a long run must not fill the cell.
  fault::WriteStream writes_{&cell_, 200ms};
  std::map<std::string, int> expected_;  // jobs that must run, and their task counts
  std::map<std::string, Seen> untouched_;  // "USER/JOB/INDEX"
  int doubles_after_heals_ = 0;            // found by the rounds' own settle checks
};

// The leader loses etcd while writes stream in. Even rounds cut only the
// routes between it and the etcd members (it still reaches its agents and
// clients, so only the lease stops it from commanding them); odd rounds take
// its whole link down.
TEST_F(PartitionFault, LeaderCutOffFromEtcd) {
  ASSERT_NO_FATAL_FAILURE(StartCell(/*agents=*/2, /*base_tasks=*/8));
  writes_.Start();
  const int rounds = Rounds(2);
  int partitions = 0, exits_code4 = 0, order_violations = 0;
  int64_t max_exit_ms = 0, min_handover_gap_ms = INT64_MAX, max_new_leader_ms = 0, max_cli_ms = -1;
  for (int k = 0; k < rounds; ++k) {
    RememberRunning("alice/base", {});
    writes_.AfterWrites(writes_.RandomWrites(1, 6));
    const int old = WaitLeader();
    ASSERT_GE(old, 0);
    const std::string name = absl::StrCat("master", old);
    const bool whole_link = k % 2 == 1;
    const auto cut_at = SteadyClock::now();
    if (whole_link) {
      ASSERT_TRUE(net_->Cut(name).ok());
    } else {
      for (int e = 0; e < 3; ++e) ASSERT_TRUE(net_->Block(name, absl::StrCat("e", e)).ok());
    }
    ++partitions;
    // It must stop at once when its lease is gone: exit code 4, within the TTL.
    std::optional<int> status = cell_.replica(old)->Wait(60s);
    const int64_t exit_ms = MsSince(cut_at);
    ASSERT_TRUE(status.has_value()) << name << " still runs 60 s after it lost etcd" << cell_.LogTails();
    max_exit_ms = std::max(max_exit_ms, exit_ms);
    const bool code4 = WIFEXITED(*status) && WEXITSTATUS(*status) == 4;
    exits_code4 += code4;
    EXPECT_TRUE(code4) << name << " ended with wait status " << *status << ", not exit code 4 (lease lost)";
    EXPECT_LE(exit_ms, kLeaseTtlS * 1000 + kExitSlackMs) << name << " acted as leader for " << exit_ms
                                                          << " ms after it lost etcd; the lease is " << kLeaseTtlS
                                                          << " s";
    // A new leader, with the old one's link still cut.
    int leader = -1;
    ASSERT_TRUE(Eventually([&] { return (leader = cell_.LeaderIndex()) >= 0 && leader != old; }, 120s))
        << cell_.LogTails();
    max_new_leader_ms = std::max(max_new_leader_ms, MsSince(cut_at));
    // What one CLI call costs while the old leader is unreachable (its
    // packets dropped, not refused): it tries the masters in list order.
    int64_t cli_ms = -1;
    if (whole_link) {
      const auto t = SteadyClock::now();
      EXPECT_EQ(cell_.Herd({"cell"}, 60s).exit_code, 0);
      cli_ms = MsSince(t);
      max_cli_ms = std::max(max_cli_ms, cli_ms);
    }
    // Never two acting leaders: the old one said it stopped before the new
    // one said it won (both logs are stamped by this machine's clock; the
    // old one exits right after its line, the new one polls only after its).
    std::optional<int64_t> lost = fault::FirstLogMs(fault::LatestRunLines(MasterLog(old)), "lost the leader lease");
    std::optional<int64_t> won = fault::FirstLogMs(fault::LatestRunLines(MasterLog(leader)), "won the leader lease");
    EXPECT_TRUE(lost.has_value()) << name << " did not log that it lost the lease" << cell_.LogTails();
    EXPECT_TRUE(won.has_value()) << "master" << leader << " did not log that it won the lease";
    if (lost && won) {
      min_handover_gap_ms = std::min(min_handover_gap_ms, *won - *lost);
      if (*lost > *won) {
        ++order_violations;
        ADD_FAILURE() << "two acting leaders: master" << leader << " won the lease " << *lost - *won
                      << " ms before " << name << " gave it up";
      }
    }
    std::printf("round %d: %s (#%d of the master list) cut off from %s; it exited after %lld ms; master%d "
                "leads (for the CLI) %lld ms after the cut; handover gap %lld ms; a CLI call then took %lld ms\n",
                k, name.c_str(), old + 1, whole_link ? "everything (link down)" : "etcd only",
                static_cast<long long>(exit_ms), leader, static_cast<long long>(MsSince(cut_at)),
                static_cast<long long>(lost && won ? *won - *lost : -1), static_cast<long long>(cli_ms));
    // Healed and restarted (as a supervisor would), it comes back as a
    // follower and the leader stays.
    if (whole_link) {
      ASSERT_TRUE(net_->Heal(name).ok());
    } else {
      for (int e = 0; e < 3; ++e) ASSERT_TRUE(net_->Unblock(name, absl::StrCat("e", e)).ok());
    }
    ASSERT_TRUE(cell_.RestartReplica(old).ok());
    EXPECT_TRUE(Eventually([&] {
      return fault::FirstLogMs(fault::LatestRunLines(MasterLog(old)), "following cell").has_value();
    }, 60s)) << name << " did not come back as a follower" << cell_.LogTails();
    EXPECT_TRUE(cell_.replica(old)->Running());
    EXPECT_EQ(WaitLeader(), leader);
  }
  Check("leader_etcd_partition",
        {{"rounds", rounds},
         {"partitions", partitions},
         {"old_leader_exits_code_4", exits_code4},
         {"old_leader_max_exit_ms", max_exit_ms},
         {"new_leader_max_ms", max_new_leader_ms},
         {"cli_call_max_ms_old_leader_unreachable", max_cli_ms},
         {"handover_min_gap_ms", min_handover_gap_ms == INT64_MAX ? -1 : min_handover_gap_ms},
         {"two_acting_leaders", order_violations}});
}

// The times (log stamps) at which `machine` was marked down, from every
// master's log, at or after `since_ms`.
std::vector<int64_t> DownTimes(const Cell& cell, const std::string& machine, int64_t since_ms) {
  std::vector<int64_t> out;
  const std::string needle = absl::StrCat("machine ", machine, " marked down after");
  for (int i = 0; i < cell.replica_count(); ++i) {
    const std::vector<std::string> lines =
        absl::StrSplit(harness::ReadFileOrEmpty(cell.dir().Sub(absl::StrCat("logs/master", i, ".log"))), '\n');
    for (const std::string& l : lines) {
      if (l.find(needle) == std::string::npos) continue;
      std::optional<int64_t> t = fault::LogLineMs(l);
      if (t && *t >= since_ms) out.push_back(*t);
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Half the machines lose the masters; the leader is killed during the
// partition; then the links come back.
TEST_F(PartitionFault, HalfTheAgentsCutOff) {
  constexpr int kAgents = 4;
  ASSERT_NO_FATAL_FAILURE(StartCell(kAgents, /*base_tasks=*/8));
  const DownPace pace = Pace(cell_.options(), kAgents);
  // Cut the two machines with the most of base's tasks; the others keep
  // theirs untouched.
  absl::StatusOr<v1::ListTasksResponse> base = cell_.Tasks("alice/base");
  ASSERT_TRUE(base.ok()) << base.status();
  std::map<std::string, int> per_machine;
  for (const std::string& m : cell_.AgentNames()) per_machine[m] = 0;
  for (const auto& t : base->tasks()) ++per_machine[t.machine()];
  std::vector<std::string> order = cell_.AgentNames();
  std::stable_sort(order.begin(), order.end(),
                   [&](const std::string& a, const std::string& b) { return per_machine[a] > per_machine[b]; });
  const std::set<std::string> cut(order.begin(), order.begin() + kAgents / 2);
  std::printf("cutting %s; base runs %s\n", absl::StrJoin(cut, ",").c_str(), Summarize(*base).c_str());

  writes_.Start();
  const int rounds = Rounds(1);
  int partitions = 0, kills = 0, pace_violations = 0;
  std::set<std::string> uncut_down;  // machines never cut that were marked down
  int64_t min_gap_ms = INT64_MAX;
  int rescheduled = 0;
  for (int k = 0; k < rounds; ++k) {
    RememberRunning("alice/base", cut);
    writes_.AfterWrites(writes_.RandomWrites(1, 6));
    const int64_t cut_wall = fault::WallMs();
    for (const std::string& m : cut) ASSERT_TRUE(net_->Cut(m).ok());
    ++partitions;
    // Watches the machines; a machine never cut must never be marked down.
    auto down = [&](std::set<std::string>* downs) {
      absl::StatusOr<v1::ListMachinesResponse> ms = cell_.Machines();
      if (!ms.ok()) return false;
      downs->clear();
      for (const auto& m : ms->machines()) {
        if (m.state() != v1::Machine::DOWN) continue;
        downs->insert(m.name());
        if (!cut.contains(m.name()) && uncut_down.insert(m.name()).second) {
          ADD_FAILURE() << m.name() << " was never cut but is down: " << m.reason();
        }
      }
      return true;
    };
    std::set<std::string> downs;
    ASSERT_TRUE(Eventually([&] { return down(&downs) && !downs.empty(); }, 180s)) << cell_.LogTails();
    // Kill -9 the leader in the middle of the partition; a supervisor
    // restarts it.
    writes_.AfterWrites(writes_.RandomWrites(1, 4));
    const int leader = WaitLeader();
    ASSERT_GE(leader, 0);
    cell_.StopReplica(leader, SIGKILL);
    ++kills;
    ASSERT_NO_FATAL_FAILURE(Supervise());
    ASSERT_GE(WaitLeader(), 0);
    // The other machine goes down too, at the pace, not at once.
    ASSERT_TRUE(Eventually([&] { return down(&downs) && downs.size() == cut.size(); },
                           std::chrono::milliseconds(pace.window_ms) + 180s))
        << cell_.LogTails();
    std::vector<int64_t> times;
    for (const std::string& m : cut) {
      std::vector<int64_t> t = DownTimes(cell_, m, cut_wall);
      EXPECT_EQ(t.size(), 1u) << m << " marked down " << t.size() << " times";
      if (!t.empty()) times.push_back(t.front());
    }
    std::sort(times.begin(), times.end());
    for (size_t i = 0; i + pace.budget < times.size(); ++i) {
      const int64_t gap = times[i + pace.budget] - times[i];
      min_gap_ms = std::min(min_gap_ms, gap);
      // 1 s for the stamps: each is logged once its mark is committed.
      if (gap < pace.window_ms - 1000) {
        ++pace_violations;
        ADD_FAILURE() << pace.budget + 1 << " machines marked down within " << gap << " ms (across a failover); "
                      << "the pace is " << pace.budget << " per " << pace.window_ms << " ms";
      }
    }
    // Their tasks were placed again.
    absl::StatusOr<v1::ListTasksResponse> now = cell_.Tasks("alice/base");
    ASSERT_TRUE(now.ok()) << now.status();
    for (const auto& t : now->tasks()) rescheduled += !cut.contains(t.machine()) && t.incarnation() > 1;
    // Heal; the machines come back and are told to kill what runs elsewhere.
    for (const std::string& m : cut) ASSERT_TRUE(net_->Heal(m).ok());
    EXPECT_TRUE(Eventually([&] { return down(&downs) && downs.empty(); }, 180s)) << cell_.LogTails();
    doubles_after_heals_ += SettleAndCountDoubles();
  }
  Check("agent_partition", {{"rounds", rounds},
                            {"partitions", partitions},
                            {"machines_cut_per_partition", static_cast<int64_t>(cut.size())},
                            {"leader_kills", kills},
                            {"down_window_ms", pace.window_ms},
                            {"down_min_gap_ms", min_gap_ms == INT64_MAX ? -1 : min_gap_ms},
                            {"down_pace_violations", pace_violations},
                            {"never_cut_machines_marked_down", static_cast<int64_t>(uncut_down.size())},
                            {"tasks_rescheduled", rescheduled}});
}

// Runs of `job` (alice's) the agent on `machine` was handed: its run
// directories.
int RunDirs(const Cell& cell, const std::string& machine, const std::string& job) {
  int n = 0;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(cell.AgentRoot(machine) + "/runs", ec)) {
    n += absl::StartsWith(e.path().filename().string(), absl::StrCat("alice.", job, "."));
  }
  return n;
}

// kill -9 the agent that is starting a big job's tasks, then restart it.
TEST_F(PartitionFault, AgentKilledDuringTaskStarts) {
  constexpr int kBurst = 30;
  ASSERT_NO_FATAL_FAILURE(StartCell(/*agents=*/3, /*base_tasks=*/6));
  writes_.Start();
  const int rounds = Rounds(2);
  int kills = 0, in_flight = 0;
  for (int k = 0; k < rounds; ++k) {
    RememberRunning("alice/base", {});
    writes_.AfterWrites(writes_.RandomWrites(1, 6));
    const std::string job = absl::StrCat("burst", k);
    cell_.WriteSpec(job + ".yaml", JobSpec(job, kBurst));
    harness::RunResult r = cell_.Herd({"submit", cell_.dir().Sub(job + ".yaml")}, 30s);
    ASSERT_EQ(r.exit_code, 0) << r.Describe();
    expected_["alice/" + job] = kBurst;
    // The first agent that has begun a random number of the job's runs
    // (made their run directories) is killed at once: its starts are under
    // way.
    const int begun = writes_.RandomWrites(1, 5);
    std::string victim;
    ASSERT_TRUE(Eventually([&] {
      for (const std::string& m : cell_.AgentNames()) {
        if (RunDirs(cell_, m, job) >= begun) victim = m;
      }
      return !victim.empty();
    }, 60s, 1ms));
    cell_.StopAgent(victim, SIGKILL);
    ++kills;
    ForgetRunningOn(victim);  // its tasks may be placed again: the machine was hit
    // What it was given (the master's placements) against what it started.
    int started = 0, placed = 0;
    for (const auto& [key, ps] : fault::TaskProcesses(cell_)) {
      for (const auto& p : ps) started += p.machine == victim && absl::StartsWith(key, "alice/" + job + "/");
    }
    if (absl::StatusOr<v1::ListTasksResponse> t = cell_.Tasks("alice/" + job); t.ok()) {
      for (const auto& task : t->tasks()) placed += task.machine() == victim;
    }
    std::printf("killed %s with %d of the %d tasks of %s placed on it started (%d run directories)\n",
                victim.c_str(), started, placed, job.c_str(), RunDirs(cell_, victim, job));
    in_flight += std::max(0, placed - started);
    ASSERT_TRUE(cell_.RestartAgent(victim).ok()) << cell_.LogTails();
    cell_.WaitRunning("alice/" + job, kBurst);
    doubles_after_heals_ += SettleAndCountDoubles();
  }
  EXPECT_GT(in_flight, 0) << "every kill came after the agent had started all its runs: the scenario did not hit "
                             "task starts";
  Check("agent_kill_during_starts",
        {{"rounds", rounds}, {"agent_kills", kills}, {"starts_in_flight_at_kill", in_flight}});
}

}  // namespace
}  // namespace herd
