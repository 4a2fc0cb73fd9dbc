// CPU pinning without root: the topology read from fake sysfs trees, the
// allocator on fake topologies (SMT, two NUMA nodes, too few cores, release
// and reuse, siblings never split), and the manager writing cpusets into
// fake cgroup trees of both versions, recovering after a restart, and
// turning itself off without a cpuset controller.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "agent/cgroup/cpu_allocator.h"
#include "agent/cgroup/cpu_manager.h"
#include "agent/cgroup/cpu_topology.h"
#include "agent/cgroup/driver.h"
#include "agent/cgroup/fake_files.h"

namespace herd::agent {
namespace {

namespace fs = std::filesystem;

class TempDir : public testing::FakeFiles {
 protected:
  // A fake /sys/devices/system under `rel`: `cores` lists each physical
  // core's CPUs, `node_of_core` its NUMA node (none: no node directory).
  std::string FakeSys(const std::string& rel, const std::vector<CpuSet>& cores, std::vector<int> node_of_core = {}) {
    CpuSet online;
    std::map<int, CpuSet> nodes;
    for (size_t i = 0; i < cores.size(); ++i) {
      for (int c : cores[i]) {
        online.insert(c);
        Put(absl::StrCat(rel, "/cpu/cpu", c, "/topology/thread_siblings_list"), FormatCpuList(cores[i]) + "\n");
        Put(absl::StrCat(rel, "/cpu/cpu", c, "/topology/physical_package_id"),
            absl::StrCat(node_of_core.empty() ? 0 : node_of_core[i], "\n"));
        if (!node_of_core.empty()) nodes[node_of_core[i]].insert(c);
      }
    }
    Put(rel + "/cpu/online", FormatCpuList(online) + "\n");
    CpuSet all_nodes;
    for (const auto& [n, cpus] : nodes) {
      Put(absl::StrCat(rel, "/node/node", n, "/cpulist"), FormatCpuList(cpus) + "\n");
      all_nodes.insert(n);
    }
    if (!nodes.empty()) Put(rel + "/node/has_memory", FormatCpuList(all_nodes) + "\n");
    return root_ + "/" + rel;
  }

  CpuTopology Topo(const std::vector<CpuSet>& cores, std::vector<int> node_of_core = {}) {
    static int n = 0;
    absl::StatusOr<CpuTopology> t = ReadCpuTopology(FakeSys(absl::StrCat("sys", n++), cores, node_of_core));
    EXPECT_TRUE(t.ok()) << t.status();
    return t.ok() ? *t : CpuTopology{};
  }
};

// ---- lists and topology ------------------------------------------------

TEST(CpuList, ParsesAndFormatsTheKernelsFormat) {
  EXPECT_EQ(*ParseCpuList("0-3,8,10-11\n"), (CpuSet{0, 1, 2, 3, 8, 10, 11}));
  EXPECT_EQ(*ParseCpuList(""), CpuSet{});
  EXPECT_EQ(*ParseCpuList(" 5 "), CpuSet{5});
  EXPECT_FALSE(ParseCpuList("3-1").ok());
  EXPECT_FALSE(ParseCpuList("a").ok());
  EXPECT_FALSE(ParseCpuList("1,,2").ok());
  EXPECT_EQ(FormatCpuList({0, 1, 2, 3, 8, 10, 11}), "0-3,8,10-11");
  EXPECT_EQ(FormatCpuList({}), "");
  EXPECT_EQ(FormatCpuList({7}), "7");
}

TEST(CpuAssignmentRecord, RoundTrips) {
  CpuAssignment a{{2, 3}, {2, 3, 6, 7}, {1}};
  EXPECT_EQ(EncodeCpuAssignment(a), "cpus=2-3 held=2-3,6-7 mems=1\n");
  absl::StatusOr<CpuAssignment> back = DecodeCpuAssignment(EncodeCpuAssignment(a));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, a);
  EXPECT_FALSE(DecodeCpuAssignment("held=1\n").ok());
  EXPECT_FALSE(DecodeCpuAssignment("cpus=x held=1").ok());
}

TEST_F(TempDir, TopologyGroupsSiblingsAndNodes) {
  // Two sockets/nodes, two cores each, two threads per core, Linux's usual
  // numbering (a core's second thread is CPU n + 4).
  CpuTopology t = Topo({{0, 4}, {1, 5}, {2, 6}, {3, 7}}, {0, 0, 1, 1});
  ASSERT_EQ(t.cpus.size(), 8u);
  ASSERT_EQ(t.cores.size(), 4u);
  EXPECT_EQ(t.cores[0].cpus, (CpuSet{0, 4}));
  EXPECT_EQ(t.cores[3].cpus, (CpuSet{3, 7}));
  EXPECT_EQ(t.cores[2].node, 1);
  EXPECT_EQ(t.Find(6)->core, 2);
  EXPECT_EQ(t.Find(6)->node, 1);
  EXPECT_EQ(t.nodes, (CpuSet{0, 1}));
  EXPECT_EQ(t.Summary(), "4 cores, 8 CPUs (0-7), 2 NUMA nodes");
}

TEST_F(TempDir, TopologyWithoutTopologyFilesOrNodesOrOnlineSiblings) {
  Put("sys/cpu/online", "0-2\n");
  // CPU 1's sibling 3 is offline: CPU 1 is a core of its own.
  Put("sys/cpu/cpu1/topology/thread_siblings_list", "1,3\n");
  absl::StatusOr<CpuTopology> t = ReadCpuTopology(root_ + "/sys");
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_EQ(t->cores.size(), 3u);
  EXPECT_EQ(t->cores[1].cpus, CpuSet{1});
  EXPECT_EQ(t->nodes, CpuSet{0});
  EXPECT_EQ(t->memory_nodes, CpuSet{0});
  EXPECT_TRUE(absl::IsNotFound(ReadCpuTopology(root_ + "/nope").status()));
}

TEST_F(TempDir, TopologyOfThisMachineReads) {
  absl::StatusOr<CpuTopology> t = ReadCpuTopology();
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(static_cast<long>(t->cpus.size()), sysconf(_SC_NPROCESSORS_ONLN));
}

// ---- the allocator -----------------------------------------------------

// Every core is wholly in the shared pool or wholly held by one owner, and
// every owner's cpuset lies in what it holds.
void ExpectNoSplitCore(const CpuAllocator& a) {
  const CpuSet pool = a.SharedPool();
  std::map<int, std::string> owner_of;
  for (const auto& [owner, as] : a.assignments()) {
    for (int c : as.cpus) EXPECT_TRUE(as.held.contains(c)) << owner;
    for (int c : as.held) {
      EXPECT_FALSE(owner_of.contains(c)) << "CPU " << c << " held by " << owner << " and " << owner_of[c];
      owner_of[c] = owner;
      EXPECT_FALSE(pool.contains(c)) << "CPU " << c;
    }
  }
  for (const CpuTopology::Core& core : a.topology().cores) {
    std::set<std::string> users;
    for (int c : core.cpus) users.insert(pool.contains(c) ? std::string("<shared>") : owner_of[c]);
    EXPECT_EQ(users.size(), 1u) << "core " << FormatCpuList(core.cpus) << " is split";
  }
  EXPECT_GE(static_cast<int>(pool.size()), a.min_shared_cpus());
}

TEST_F(TempDir, OneSocketTwoThreadsPerCoreKeepsSiblingsTogether) {
  CpuAllocator a(Topo({{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
  // 2 CPUs: both threads of one core (the highest; CPU 0 stays shared).
  absl::StatusOr<CpuAssignment> two = a.Allocate("ls1", 2);
  ASSERT_TRUE(two.ok()) << two.status();
  EXPECT_EQ(two->cpus, (CpuSet{3, 7}));
  EXPECT_EQ(two->held, (CpuSet{3, 7}));
  EXPECT_EQ(two->mems, CpuSet{0});
  // 1 CPU: one thread, its sibling held idle -- in nobody's cpuset, and out
  // of the shared pool, so no batch task runs beside it on that core.
  absl::StatusOr<CpuAssignment> one = a.Allocate("ls2", 1);
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ(one->cpus, CpuSet{2});
  EXPECT_EQ(one->held, (CpuSet{2, 6}));
  EXPECT_EQ(a.SharedPool(), (CpuSet{0, 1, 4, 5}));
  // 3 CPUs would need the last two cores and leave the pool nothing.
  absl::StatusOr<CpuAssignment> three = a.Allocate("ls3", 3);
  ASSERT_TRUE(absl::IsResourceExhausted(three.status())) << three.status();
  EXPECT_TRUE(absl::StrContains(three.status().message(), "2 cores (4 CPUs) free")) << three.status();
  EXPECT_EQ(a.SharedPool(), (CpuSet{0, 1, 4, 5}));  // nothing taken by the failure
  ExpectNoSplitCore(a);
}

TEST_F(TempDir, TwoNumaNodesPlaceOnOneNodeWhenItFits) {
  // Node 0: cores {0,1} {2,3}; node 1: cores {4,5} {6,7}.
  CpuAllocator a(Topo({{0, 1}, {2, 3}, {4, 5}, {6, 7}}, {0, 0, 1, 1}));
  absl::StatusOr<CpuAssignment> four = a.Allocate("big", 4);
  ASSERT_TRUE(four.ok()) << four.status();
  EXPECT_EQ(four->cpus, (CpuSet{4, 5, 6, 7}));  // all of node 1 (of two equal nodes, not CPU 0's)
  EXPECT_EQ(four->mems, CpuSet{1});
  absl::StatusOr<CpuAssignment> two = a.Allocate("small", 2);
  ASSERT_TRUE(two.ok()) << two.status();
  EXPECT_EQ(two->cpus, (CpuSet{2, 3}));
  EXPECT_EQ(two->mems, CpuSet{0});
  EXPECT_EQ(a.SharedPool(), (CpuSet{0, 1}));
  ExpectNoSplitCore(a);

  // Best fit: with node 1 down to one free core and node 0 at two, a
  // one-core request goes to node 1 and node 0 keeps room for two cores.
  CpuAllocator b(Topo({{0, 1}, {2, 3}, {4, 5}, {6, 7}, {8, 9}, {10, 11}}, {0, 0, 0, 1, 1, 1}));
  ASSERT_TRUE(b.Allocate("x", 4).ok());  // two cores of node 1 (the later of two equal nodes)
  EXPECT_EQ(b.Find("x")->cpus, (CpuSet{8, 9, 10, 11}));
  absl::StatusOr<CpuAssignment> one_core = b.Allocate("y", 2);
  ASSERT_TRUE(one_core.ok());
  EXPECT_EQ(one_core->cpus, (CpuSet{6, 7}));
  EXPECT_EQ(one_core->mems, CpuSet{1});

  // Too big for any node: across nodes, memory on both.
  CpuAllocator c(Topo({{0, 1}, {2, 3}, {4, 5}, {6, 7}}, {0, 0, 1, 1}));
  absl::StatusOr<CpuAssignment> six = c.Allocate("huge", 6);
  ASSERT_TRUE(six.ok()) << six.status();
  EXPECT_EQ(six->cpus.size(), 6u);
  EXPECT_EQ(six->mems, (CpuSet{0, 1}));
  EXPECT_EQ(c.SharedPool().size(), 2u);
  ExpectNoSplitCore(c);
}

TEST_F(TempDir, NotEnoughCoresLeavesOneCpuShared) {
  // This machine's shape: two CPUs, no SMT.
  CpuAllocator a(Topo({{0}, {1}}));
  absl::StatusOr<CpuAssignment> first = a.Allocate("a", 1);
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->cpus, CpuSet{1});
  EXPECT_EQ(a.SharedPool(), CpuSet{0});
  absl::StatusOr<CpuAssignment> second = a.Allocate("b", 1);
  EXPECT_TRUE(absl::IsResourceExhausted(second.status())) << second.status();
  EXPECT_EQ(second.status().message(),
            "not enough free whole cores for 1 CPU: 1 core (1 CPU) free, and the shared pool keeps at least 1 CPU");
  EXPECT_TRUE(absl::IsResourceExhausted(CpuAllocator(Topo({{0}, {1}})).Allocate("c", 2).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(a.Allocate("d", 0).status()));
  EXPECT_TRUE(absl::IsAlreadyExists(a.Allocate("a", 1).status()));
}

TEST_F(TempDir, ReleasedCoresAreReused) {
  CpuAllocator a(Topo({{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
  const CpuSet all = a.SharedPool();
  ASSERT_TRUE(a.Allocate("a", 2).ok());
  ASSERT_TRUE(a.Allocate("b", 2).ok());
  ASSERT_TRUE(a.Allocate("c", 2).ok());
  EXPECT_FALSE(a.Allocate("d", 2).ok());
  const CpuSet b_cpus = a.Find("b")->cpus;
  a.Release("b");
  EXPECT_EQ(a.Find("b"), nullptr);
  absl::StatusOr<CpuAssignment> d = a.Allocate("d", 2);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->cpus, b_cpus);
  a.Release("a");
  a.Release("c");
  a.Release("d");
  a.Release("never");
  EXPECT_EQ(a.SharedPool(), all);
}

// Random takes and releases of every size: no core is ever split between an
// LS run and anything else, no CPU is held twice, the pool keeps one CPU.
TEST_F(TempDir, SiblingsAreNeverSplitUnderChurn) {
  for (const auto& [cores, nodes] : std::vector<std::pair<std::vector<CpuSet>, std::vector<int>>>{
           {{{0, 4}, {1, 5}, {2, 6}, {3, 7}}, {}},
           {{{0, 8}, {1, 9}, {2, 10}, {3, 11}, {4, 12}, {5, 13}, {6, 14}, {7, 15}}, {0, 0, 0, 0, 1, 1, 1, 1}},
           {{{0, 1, 2, 3}, {4, 5, 6, 7}, {8}}, {}}}) {  // SMT4, and a core with its siblings offline
    CpuAllocator a(Topo(cores, nodes));
    std::mt19937 rng(42);
    std::vector<std::string> owners;
    int taken = 0, refused = 0;
    for (int step = 0; step < 400; ++step) {
      if (!owners.empty() && rng() % 3 == 0) {
        size_t i = rng() % owners.size();
        a.Release(owners[i]);
        owners.erase(owners.begin() + static_cast<long>(i));
      } else {
        const std::string owner = absl::StrCat("r", step);
        const int n = 1 + static_cast<int>(rng() % 5);
        absl::StatusOr<CpuAssignment> got = a.Allocate(owner, n);
        if (got.ok()) {
          EXPECT_EQ(static_cast<int>(got->cpus.size()), n);
          owners.push_back(owner);
          ++taken;
        } else {
          EXPECT_TRUE(absl::IsResourceExhausted(got.status()));
          EXPECT_EQ(a.Find(owner), nullptr);
          ++refused;
        }
      }
      ExpectNoSplitCore(a);
      if (HasFailure()) return;
    }
    EXPECT_GT(taken, 20);
    EXPECT_GT(refused, 5);
  }
}

TEST_F(TempDir, ClaimTakesBackExactlyWhatWasHeld) {
  CpuAllocator a(Topo({{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
  ASSERT_TRUE(a.Claim("a", {{3, 7}, {3, 7}, {0}}).ok());
  EXPECT_TRUE(absl::IsFailedPrecondition(a.Claim("b", {{7}, {3, 7}, {0}})));             // held by a
  EXPECT_TRUE(absl::IsFailedPrecondition(a.Claim("b", {{2}, {2}, {0}})));                // splits core 2,6
  EXPECT_TRUE(absl::IsFailedPrecondition(a.Claim("b", {{9}, {9}, {0}})));                // offline
  EXPECT_TRUE(absl::IsFailedPrecondition(a.Claim("b", {{2}, {1, 5}, {0}})));             // cpus not held
  EXPECT_TRUE(absl::IsFailedPrecondition(a.Claim("b", {{0, 1, 2}, {0, 1, 2, 4, 5, 6}, {0}})));  // empties the pool
  ASSERT_TRUE(a.Claim("b", {{2}, {2, 6}, {0}}).ok());
  EXPECT_EQ(a.SharedPool(), (CpuSet{0, 1, 4, 5}));
  ExpectNoSplitCore(a);
}

// ---- the manager on fake cgroup trees ----------------------------------

v1::TaskRun MakeSpec(const std::string& id, int64_t cpu_millis, v1::AppClass cls) {
  v1::TaskRun r;
  r.set_run_id(id);
  r.set_appclass(cls);
  r.mutable_resources()->set_cpu_millis(cpu_millis);
  return r;
}

TEST(WantedCpus, OnlyLatencySensitiveWholeCores) {
  EXPECT_EQ(CpuManager::WantedCpus(MakeSpec("a", 2000, v1::LATENCY_SENSITIVE), false), 2);
  EXPECT_EQ(CpuManager::WantedCpus(MakeSpec("a", 1000, v1::LATENCY_SENSITIVE), false), 1);
  EXPECT_EQ(CpuManager::WantedCpus(MakeSpec("a", 1500, v1::LATENCY_SENSITIVE), false), 0);
  EXPECT_EQ(CpuManager::WantedCpus(MakeSpec("a", 500, v1::LATENCY_SENSITIVE), false), 0);
  EXPECT_EQ(CpuManager::WantedCpus(MakeSpec("a", 0, v1::LATENCY_SENSITIVE), false), 0);
  EXPECT_EQ(CpuManager::WantedCpus(MakeSpec("a", 2000, v1::BATCH), true), 0);
  v1::TaskRun in_alloc = MakeSpec("a", 1000, v1::LATENCY_SENSITIVE);
  in_alloc.set_alloc_run_id("alloc1");
  EXPECT_EQ(CpuManager::WantedCpus(in_alloc, false), 0);
}

class FakeCgroups : public TempDir {
 protected:
  // The cpuset files the kernel puts in a new group (empty in a v1 child
  // until set; in v2, "" means the parent's).
  void CpusetFiles(const std::string& dir) {
    Put(dir + "/cpuset.cpus", "");
    Put(dir + "/cpuset.mems", "");
  }

  // A v1 tree with memory, cpu, cpuacct and (if `cpuset`) cpuset
  // hierarchies, and `groups` pre-made in the cpuset one.
  std::unique_ptr<CgroupDriver> V1(bool cpuset, const std::string& cpus, const std::string& mems,
                                   const std::vector<std::string>& groups) {
    for (const char* c : {"cg/memory", "cg/cpu", "cg/cpuacct"}) fs::create_directories(root_ + "/" + c);
    if (cpuset) {
      Put("cg/cpuset/cpuset.cpus", cpus + "\n");
      Put("cg/cpuset/cpuset.mems", mems + "\n");
      for (const std::string& g : groups) CpusetFiles("cg/cpuset/" + g);
    }
    return NewCgroupV1Driver(root_ + "/cg");
  }

  std::unique_ptr<CgroupDriver> V2(bool cpuset, const std::vector<std::string>& groups) {
    const std::string controllers = cpuset ? "cpuset cpu memory pids\n" : "cpu memory pids\n";
    Put("cg/cgroup.controllers", controllers);
    Put("cg/cgroup.subtree_control", "");
    for (const std::string& g : groups) {
      Put("cg/" + g + "/cgroup.controllers", controllers);
      Put("cg/" + g + "/cgroup.subtree_control", "");
      if (cpuset) CpusetFiles("cg/" + g);
    }
    return NewCgroupV2Driver(root_ + "/cg");
  }

  RunDir Dir(const std::string& id) {
    fs::create_directories(root_ + "/runs/" + id);
    return RunDir(root_ + "/runs/" + id);
  }

  std::string Cpus(const std::string& v1_hierarchy_or_v2, const std::string& group) {
    std::string s = Get("cg/" + v1_hierarchy_or_v2 + group + "/cpuset.cpus");
    return std::string(absl::StripAsciiWhitespace(s));
  }
  std::string Mems(const std::string& h, const std::string& group) {
    return std::string(absl::StripAsciiWhitespace(Get("cg/" + h + group + "/cpuset.mems")));
  }

  const std::vector<std::string> kGroups = {"herd",           "herd/a",         "herd/a/ls",     "herd/a/batch",
                                            "herd/a/ls/pin1", "herd/a/ls/pin2", "herd/a/ls/lsfr", "herd/a/batch/b1"};
};

TEST_F(FakeCgroups, V1ExclusiveSetsAndTheSharedPoolFollowEachOther) {
  std::unique_ptr<CgroupDriver> d = V1(true, "0-3", "0", kGroups);
  CpuManager::Options o;
  o.sys_root = FakeSys("sys", {{0, 1}, {2, 3}});  // two cores, two threads each
  std::unique_ptr<CpuManager> m = CpuManager::Create(d.get(), "herd/a/ls", "herd/a/batch", o);
  ASSERT_NE(m, nullptr);
  ASSERT_TRUE(d->cpuset_enabled());
  for (const std::string g : {"herd/a/ls", "herd/a/batch"}) ASSERT_TRUE(d->Create(g).ok());
  // v1: every new level starts with its parent's CPUs and nodes, so a
  // process may join it.
  EXPECT_EQ(Cpus("cpuset/", "herd/a/batch"), "0-3");
  EXPECT_EQ(Mems("cpuset/", "herd/a/batch"), "0");
  EXPECT_EQ(d->ProcsFiles("herd/a/batch").back(), root_ + "/cg/cpuset/herd/a/batch/cgroup.procs");

  // A batch run and a fractional LS run: the whole pool.
  v1::TaskRun b1 = MakeSpec("b1", 2000, v1::BATCH), lsfr = MakeSpec("lsfr", 500, v1::LATENCY_SENSITIVE);
  ASSERT_TRUE(d->Create("herd/a/batch/b1").ok());
  ASSERT_TRUE(m->Prepare(b1, 0, Dir("b1"), "herd/a/batch/b1").ok());
  ASSERT_TRUE(d->Create("herd/a/ls/lsfr").ok());
  ASSERT_TRUE(m->Prepare(lsfr, 0, Dir("lsfr"), "herd/a/ls/lsfr").ok());
  EXPECT_EQ(Cpus("cpuset/", "herd/a/batch/b1"), "0-3");
  EXPECT_EQ(Cpus("cpuset/", "herd/a/ls/lsfr"), "0-3");

  // An LS run asking 2 cores' worth (2 CPUs = one whole core): CPUs 2-3;
  // batch/, its run and the fractional LS run move off them.
  v1::TaskRun pin1 = MakeSpec("pin1", 2000, v1::LATENCY_SENSITIVE);
  ASSERT_TRUE(d->Create("herd/a/ls/pin1").ok());
  ASSERT_TRUE(m->Prepare(pin1, 2, Dir("pin1"), "herd/a/ls/pin1").ok());
  EXPECT_EQ(Cpus("cpuset/", "herd/a/ls/pin1"), "2-3");
  EXPECT_EQ(Mems("cpuset/", "herd/a/ls/pin1"), "0");
  EXPECT_EQ(Cpus("cpuset/", "herd/a/batch"), "0-1");
  EXPECT_EQ(Cpus("cpuset/", "herd/a/batch/b1"), "0-1");
  EXPECT_EQ(Cpus("cpuset/", "herd/a/ls/lsfr"), "0-1");
  EXPECT_EQ(Cpus("cpuset/", "herd/a/ls"), "0-3");  // holds its children's CPUs
  EXPECT_EQ(Get("runs/pin1/cpuset"), "cpus=2-3 held=2-3 mems=0\n");
  v1::RunStatus st;
  m->Describe("pin1", &st);
  EXPECT_EQ(st.cpuset(), "2-3");
  EXPECT_EQ(st.message(), "");

  // A second one does not fit (the pool keeps a CPU): it runs in the pool
  // and says so.
  v1::TaskRun pin2 = MakeSpec("pin2", 2000, v1::LATENCY_SENSITIVE);
  ASSERT_TRUE(d->Create("herd/a/ls/pin2").ok());
  ASSERT_TRUE(m->Prepare(pin2, 2, Dir("pin2"), "herd/a/ls/pin2").ok());
  EXPECT_EQ(Cpus("cpuset/", "herd/a/ls/pin2"), "0-1");
  EXPECT_FALSE(fs::exists(root_ + "/runs/pin2/cpuset"));
  v1::RunStatus st2;
  st2.set_message("restarted");
  m->Describe("pin2", &st2);
  EXPECT_EQ(st2.cpuset(), "");
  EXPECT_TRUE(absl::StartsWith(st2.message(), "restarted; cpu pinning: not enough free whole cores for 2 CPUs"))
      << st2.message();
  EXPECT_TRUE(absl::EndsWith(st2.message(), "; running on the shared CPUs")) << st2.message();

  // A restart of pin1's attempt keeps its CPUs (its new group gets them).
  ASSERT_TRUE(d->Remove("herd/a/ls/pin1").ok());
  CpusetFiles("cg/cpuset/herd/a/ls/pin1");
  ASSERT_TRUE(d->Create("herd/a/ls/pin1").ok());
  ASSERT_TRUE(m->Prepare(pin1, 2, Dir("pin1"), "herd/a/ls/pin1").ok());
  EXPECT_EQ(Cpus("cpuset/", "herd/a/ls/pin1"), "2-3");

  // pin1 goes: its cores are free, the pool grows, until the next tick
  // gives them to pin2, which waits -- unless pin2 is being stopped.
  m->Release("pin1", Dir("pin1"));
  EXPECT_FALSE(fs::exists(root_ + "/runs/pin1/cpuset"));
  EXPECT_EQ(Cpus("cpuset/", "herd/a/batch/b1"), "0-3");
  RunDir pin2_dir = Dir("pin2"), b1_dir = Dir("b1");
  m->Tick({RunView{pin2, pin2_dir, v1::Task::STOPPING, {}, false}, RunView{b1, b1_dir, v1::Task::ACTIVE, {}, true}},
          false);
  EXPECT_EQ(m->CpusetOf("pin2"), "");
  m->Tick({RunView{pin2, pin2_dir, v1::Task::ACTIVE, {}, true}, RunView{b1, b1_dir, v1::Task::ACTIVE, {}, true}},
          false);
  EXPECT_EQ(m->CpusetOf("pin2"), "2-3");
  EXPECT_EQ(Cpus("cpuset/", "herd/a/ls/pin2"), "2-3");
  EXPECT_EQ(Cpus("cpuset/", "herd/a/batch/b1"), "0-1");
  v1::RunStatus st3;
  m->Describe("pin2", &st3);
  EXPECT_EQ(st3.message(), "");

  // pin2 shrinks to half a core: shared again, everything gets every CPU.
  m->Update(MakeSpec("pin2", 500, v1::LATENCY_SENSITIVE), 0, Dir("pin2"), "herd/a/ls/pin2");
  EXPECT_EQ(m->CpusetOf("pin2"), "");
  for (const char* g : {"herd/a/ls/pin2", "herd/a/batch", "herd/a/batch/b1", "herd/a/ls/lsfr"}) {
    EXPECT_EQ(Cpus("cpuset/", g), "0-3") << g;
  }
  EXPECT_EQ(m->SharedPool(), "0-3");
}

TEST_F(FakeCgroups, V1RecoveredRunsKeepTheirCpusAndNoCpuIsGivenTwice) {
  std::unique_ptr<CgroupDriver> d = V1(true, "0-3", "0", kGroups);
  CpuManager::Options o;
  o.sys_root = FakeSys("sys", {{0}, {1}, {2}, {3}});
  v1::TaskRun pin1 = MakeSpec("pin1", 2000, v1::LATENCY_SENSITIVE), pin2 = MakeSpec("pin2", 2000, v1::LATENCY_SENSITIVE);
  {
    std::unique_ptr<CpuManager> m = CpuManager::Create(d.get(), "herd/a/ls", "herd/a/batch", o);
    ASSERT_NE(m, nullptr);
    for (const std::string g : {"herd/a/ls", "herd/a/batch", "herd/a/ls/pin1", "herd/a/ls/pin2"}) {
      ASSERT_TRUE(d->Create(g).ok());
    }
    ASSERT_TRUE(m->Prepare(pin1, 2, Dir("pin1"), "herd/a/ls/pin1").ok());
    ASSERT_TRUE(m->Prepare(pin2, 2, Dir("pin2"), "herd/a/ls/pin2").ok());
    EXPECT_EQ(m->CpusetOf("pin1"), "2-3");
    EXPECT_EQ(m->CpusetOf("pin2"), "");  // two more would leave the pool no CPU
  }
  // The agent restarts: a new manager, on the same groups and run dirs.
  std::unique_ptr<CgroupDriver> d2 = NewCgroupV1Driver(root_ + "/cg");
  std::unique_ptr<CpuManager> m = CpuManager::Create(d2.get(), "herd/a/ls", "herd/a/batch", o);
  ASSERT_NE(m, nullptr);
  // pin2 is recovered first: it must not take pin1's CPUs.
  m->Recover(pin2, 2, Dir("pin2"), "herd/a/ls/pin2");
  m->Recover(pin1, 2, Dir("pin1"), "herd/a/ls/pin1");
  EXPECT_EQ(m->CpusetOf("pin1"), "2-3");
  EXPECT_EQ(m->CpusetOf("pin2"), "");
  RunDir pin1_dir = Dir("pin1"), pin2_dir = Dir("pin2");
  m->Tick({RunView{pin1, pin1_dir, v1::Task::ACTIVE, {}, true}, RunView{pin2, pin2_dir, v1::Task::ACTIVE, {}, true}},
          true);  // the first tick after recovery
  EXPECT_EQ(m->CpusetOf("pin2"), "");  // still does not fit
  EXPECT_EQ(Cpus("cpuset/", "herd/a/ls/pin1"), "2-3");
  EXPECT_EQ(Cpus("cpuset/", "herd/a/ls/pin2"), "0-1");
  EXPECT_EQ(Cpus("cpuset/", "herd/a/batch"), "0-1");
  // A new run asking for a core gets none of pin1's.
  v1::TaskRun pin3 = MakeSpec("pin3", 1000, v1::LATENCY_SENSITIVE);
  CpusetFiles("cg/cpuset/herd/a/ls/pin3");
  ASSERT_TRUE(d2->Create("herd/a/ls/pin3").ok());
  ASSERT_TRUE(m->Prepare(pin3, 1, Dir("pin3"), "herd/a/ls/pin3").ok());
  EXPECT_EQ(m->CpusetOf("pin3"), "1");
  EXPECT_EQ(Cpus("cpuset/", "herd/a/batch"), "0");
  EXPECT_EQ(Cpus("cpuset/", "herd/a/ls/pin2"), "0");
  // pin1 ends for good: its cores go back at once (not when the master
  // forgets it), and pin2, waiting all along, gets them.
  RunDir pin3_dir = Dir("pin3");
  m->Tick({RunView{pin1, pin1_dir, v1::Task::EXITED, {}, true}, RunView{pin2, pin2_dir, v1::Task::ACTIVE, {}, true},
           RunView{pin3, pin3_dir, v1::Task::ACTIVE, {}, true}},
          false);
  EXPECT_EQ(m->CpusetOf("pin1"), "");
  EXPECT_FALSE(fs::exists(root_ + "/runs/pin1/cpuset"));
  EXPECT_EQ(m->CpusetOf("pin2"), "2-3");
  EXPECT_EQ(Cpus("cpuset/", "herd/a/ls/pin2"), "2-3");
  EXPECT_EQ(Cpus("cpuset/", "herd/a/batch"), "0");
}

TEST_F(FakeCgroups, V2EnablesCpusetAndPutsMemoryOnTheRunsNode) {
  std::unique_ptr<CgroupDriver> d = V2(true, {"herd", "herd/a", "herd/a/ls", "herd/a/batch"});
  CpuManager::Options o;
  // Two nodes of two cores, two threads per core.
  o.sys_root = FakeSys("sys", {{0, 4}, {1, 5}, {2, 6}, {3, 7}}, {0, 0, 1, 1});
  std::unique_ptr<CpuManager> m = CpuManager::Create(d.get(), "herd/a/ls", "herd/a/batch", o);
  ASSERT_NE(m, nullptr);
  for (const std::string g : {"herd/a/ls/pin1", "herd/a/batch/b1"}) {
    CpusetFiles("cg/" + g);
    ASSERT_TRUE(d->Create(g).ok());
  }
  EXPECT_EQ(Get("cg/cgroup.subtree_control"), "+cpu +memory +pids +cpuset");
  EXPECT_EQ(Get("cg/herd/a/ls/cgroup.subtree_control"), "+cpu +memory +pids +cpuset");
  EXPECT_EQ(Get("cg/herd/a/batch/cgroup.subtree_control"), "+cpu +memory +pids +cpuset");

  v1::TaskRun b1 = MakeSpec("b1", 1000, v1::BATCH), pin1 = MakeSpec("pin1", 2000, v1::LATENCY_SENSITIVE);
  ASSERT_TRUE(m->Prepare(b1, 0, Dir("b1"), "herd/a/batch/b1").ok());
  EXPECT_EQ(Cpus("", "herd/a/batch/b1"), "0-7");
  EXPECT_EQ(Mems("", "herd/a/batch/b1"), "0-1");
  ASSERT_TRUE(m->Prepare(pin1, 2, Dir("pin1"), "herd/a/ls/pin1").ok());
  EXPECT_EQ(Cpus("", "herd/a/ls/pin1"), "3,7");  // one core, both threads, on node 1
  EXPECT_EQ(Mems("", "herd/a/ls/pin1"), "1");
  EXPECT_EQ(Cpus("", "herd/a/batch"), "0-2,4-6");
  EXPECT_EQ(Cpus("", "herd/a/batch/b1"), "0-2,4-6");
  EXPECT_EQ(Mems("", "herd/a/batch/b1"), "0-1");
  EXPECT_EQ(Cpus("", "herd/a/ls"), "");  // untouched: its children say
  m->Release("pin1", Dir("pin1"));
  EXPECT_EQ(Cpus("", "herd/a/batch/b1"), "0-7");
}

TEST_F(FakeCgroups, WithoutACpusetControllerNothingChanges) {
  {
    std::unique_ptr<CgroupDriver> d = V2(false, {"herd"});
    CpuManager::Options o;
    o.sys_root = FakeSys("sys", {{0}, {1}});
    EXPECT_EQ(CpuManager::Create(d.get(), "herd/ls", "herd/batch", o), nullptr);
    EXPECT_FALSE(d->cpuset_enabled());
    ASSERT_TRUE(d->Create("herd/x").ok());
    EXPECT_EQ(Get("cg/herd/cgroup.subtree_control"), "+cpu +memory +pids");
  }
  fs::remove_all(root_ + "/cg");
  {
    std::unique_ptr<CgroupDriver> d = V1(false, "", "", {});
    CpuManager::Options o;
    o.sys_root = FakeSys("sys", {{0}, {1}});
    EXPECT_EQ(CpuManager::Create(d.get(), "herd/ls", "herd/batch", o), nullptr);
    ASSERT_TRUE(d->Create("herd/x").ok());
    EXPECT_EQ(d->ProcsFiles("herd/x").size(), 3u);  // memory, cpu, cpuacct: no cpuset
    EXPECT_FALSE(fs::exists(root_ + "/cg/cpuset"));
  }
  // A cpuset controller but one CPU: nothing to pin, and the driver is left
  // as it was.
  fs::remove_all(root_ + "/cg");
  std::unique_ptr<CgroupDriver> d = V1(true, "0", "0", {});
  CpuManager::Options o;
  o.sys_root = FakeSys("one", {{0}});
  EXPECT_EQ(CpuManager::Create(d.get(), "herd/ls", "herd/batch", o), nullptr);
  EXPECT_FALSE(d->cpuset_enabled());
}

}  // namespace
}  // namespace herd::agent
