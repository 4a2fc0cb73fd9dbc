// The cgroup drivers against fake cgroup trees in a temporary directory:
// what they write (limits, controllers, kills) and how they read counters.
// The tree stands in for the kernel, so the test pre-creates the interface
// files the kernel would put in a new group. This is how the version not
// present on the test host (v2 here) is tested; v1 is tested for real in
// cgroup_test.cc too.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "agent/cgroup/driver.h"
#include "agent/cgroup/fake_files.h"

namespace herd::agent {
namespace {

namespace fs = std::filesystem;

class FakeTree : public testing::FakeFiles {
 protected:
  // The files the kernel creates in a new v2 group.
  void PopulateV2(const std::string& group, bool with_kill) {
    Put(group + "/cgroup.controllers", "cpu memory pids\n");
    for (const char* f : {"cgroup.subtree_control", "cgroup.procs", "cgroup.freeze", "memory.max", "memory.swap.max",
                          "cpu.max", "cpu.weight", "pids.max"}) {
      Put(group + "/" + f, "");
    }
    if (with_kill) Put(group + "/cgroup.kill", "");
  }

};

TEST_F(FakeTree, DetectsNothingV1OrV2) {
  EXPECT_TRUE(absl::IsNotFound(OpenCgroupDriver(root_).status()));
  Put("cgroup.controllers", "cpu io memory pids\n");
  auto d = OpenCgroupDriver(root_);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ((*d)->version(), "v2");
  fs::remove(root_ + "/cgroup.controllers");
  for (const char* c : {"memory", "cpu", "cpuacct"}) fs::create_directories(root_ + "/" + c);
  d = OpenCgroupDriver(root_);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ((*d)->version(), "v1");
}

TEST_F(FakeTree, V2CreateEnablesControllersInEveryParentButTheLeaf) {
  Put("cgroup.controllers", "cpuset cpu io memory hugetlb pids rdma\n");
  Put("cgroup.subtree_control", "cpu\n");  // some already on
  PopulateV2("herd", false);
  PopulateV2("herd/a", false);
  PopulateV2("herd/a/ls", false);
  auto d = OpenCgroupDriver(root_);
  ASSERT_TRUE(d.ok());
  CgroupDriver& v2 = **d;
  ASSERT_TRUE(v2.Create("herd/a/ls/run1").ok());
  EXPECT_TRUE(v2.Exists("herd/a/ls/run1"));
  EXPECT_EQ(Get("cgroup.subtree_control"), "+memory +pids");  // only what was missing
  EXPECT_EQ(Get("herd/cgroup.subtree_control"), "+cpu +memory +pids");
  EXPECT_EQ(Get("herd/a/ls/cgroup.subtree_control"), "+cpu +memory +pids");
  EXPECT_FALSE(fs::exists(root_ + "/herd/a/ls/run1/cgroup.subtree_control"));  // processes live there
  EXPECT_EQ(v2.ProcsFiles("herd/a/ls/run1"), std::vector<std::string>{root_ + "/herd/a/ls/run1/cgroup.procs"});
  EXPECT_EQ(v2.Children("herd/a/ls"), std::vector<std::string>{"run1"});
}

TEST_F(FakeTree, V2LimitsAndCounters) {
  Put("cgroup.controllers", "cpu memory pids\n");
  PopulateV2("g", true);
  auto d = OpenCgroupDriver(root_);
  ASSERT_TRUE(d.ok());
  CgroupDriver& v2 = **d;
  CgroupLimits l;
  l.memory_bytes = 64 << 20;
  l.cpu_quota_millis = 250;
  l.cpu_shares = 1024;
  l.pids_max = 100;
  ASSERT_TRUE(v2.SetLimits("g", l).ok());
  EXPECT_EQ(Get("g/memory.max"), absl::StrCat(64 << 20));
  EXPECT_EQ(Get("g/memory.swap.max"), "0");
  EXPECT_EQ(Get("g/cpu.max"), "25000 100000");
  EXPECT_EQ(Get("g/cpu.weight"), "39");  // 1 + (1024-2)*9999/262142
  EXPECT_EQ(Get("g/pids.max"), "100");
  // Unset fields stay; <= 0 lifts a limit.
  CgroupLimits off;
  off.memory_bytes = 0;
  off.cpu_quota_millis = 0;
  ASSERT_TRUE(v2.SetLimits("g", off).ok());
  EXPECT_EQ(Get("g/memory.max"), "max");
  EXPECT_EQ(Get("g/cpu.max"), "max 100000");
  EXPECT_EQ(Get("g/pids.max"), "100");

  Put("g/cpu.stat", "usage_usec 1500000\nuser_usec 1000000\nsystem_usec 500000\n");
  Put("g/memory.current", "100000000\n");
  Put("g/memory.stat", "anon 60000000\nfile 40000000\nactive_file 10000000\ninactive_file 30000000\n");
  Put("g/memory.events", "low 0\nhigh 0\nmax 12\noom 2\noom_kill 1\noom_group_kill 0\n");
  absl::StatusOr<CgroupSample> s = v2.Sample("g");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->cpu_usage_ns, 1'500'000'000);
  EXPECT_EQ(s->memory_usage_bytes, 100'000'000);
  EXPECT_EQ(s->memory_rss_bytes, 60'000'000);
  EXPECT_EQ(s->memory_working_set_bytes, 70'000'000);
  EXPECT_EQ(s->oom_kills, 1);
  EXPECT_TRUE(absl::IsNotFound(v2.Sample("nope").status()));
}

TEST_F(FakeTree, V2KillUsesCgroupKill) {
  Put("cgroup.controllers", "cpu memory pids\n");
  PopulateV2("g", true);
  auto d = OpenCgroupDriver(root_);
  ASSERT_TRUE(d.ok());
  ASSERT_TRUE((*d)->Kill("g").ok());
  EXPECT_EQ(Get("g/cgroup.kill"), "1");
}

// Without cgroup.kill (Linux < 5.14): freeze, SIGKILL each listed pid,
// thaw. A real process stands in the fake group.
TEST_F(FakeTree, V2KillWithoutCgroupKillSignalsEveryListedProcess) {
  Put("cgroup.controllers", "cpu memory pids\n");
  PopulateV2("g", false);
  pid_t child = fork();
  if (child == 0) {
    while (true) pause();
  }
  Put("g/cgroup.procs", absl::StrCat(child, "\n"));
  auto d = OpenCgroupDriver(root_);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ((*d)->Pids("g"), std::vector<pid_t>{child});
  ASSERT_TRUE((*d)->Kill("g").ok());
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  EXPECT_EQ(Get("g/cgroup.freeze"), "0");  // thawed again
}

TEST_F(FakeTree, V2RemoveTakesChildrenFirst) {
  Put("cgroup.controllers", "cpu memory pids\n");
  auto d = OpenCgroupDriver(root_);
  ASSERT_TRUE(d.ok());
  Put("cgroup.subtree_control", "");
  PopulateV2("a", false);
  PopulateV2("a/b", false);
  ASSERT_TRUE((*d)->Create("a/b/c").ok());
  ASSERT_TRUE((*d)->Remove("a/b").ok());
  EXPECT_FALSE((*d)->Exists("a/b"));
  EXPECT_TRUE((*d)->Exists("a"));
  EXPECT_TRUE((*d)->Remove("a/missing").ok());
}

TEST_F(FakeTree, V1CombinedCpuCpuacctIsOneHierarchy) {
  for (const char* c : {"memory", "cpu,cpuacct", "pids", "freezer"}) fs::create_directories(root_ + "/" + c);
  fs::create_directory_symlink("cpu,cpuacct", root_ + "/cpu");
  fs::create_directory_symlink("cpu,cpuacct", root_ + "/cpuacct");
  auto d = OpenCgroupDriver(root_);
  ASSERT_TRUE(d.ok()) << d.status();
  CgroupDriver& v1 = **d;
  ASSERT_TRUE(v1.Create("herd/a/ls/r").ok());
  std::vector<std::string> procs = v1.ProcsFiles("herd/a/ls/r");
  ASSERT_EQ(procs.size(), 4u);  // memory, cpu+cpuacct, pids, freezer
  EXPECT_EQ(procs[0], root_ + "/memory/herd/a/ls/r/cgroup.procs");
  for (const char* f : {"memory/herd/a/ls/r/memory.limit_in_bytes", "memory/herd/a/ls/r/memory.memsw.limit_in_bytes",
                        "cpu,cpuacct/herd/a/ls/r/cpu.cfs_period_us", "cpu,cpuacct/herd/a/ls/r/cpu.cfs_quota_us",
                        "cpu,cpuacct/herd/a/ls/r/cpu.shares", "pids/herd/a/ls/r/pids.max"}) {
    Put(f, "");
  }
  CgroupLimits l;
  l.memory_bytes = 32 << 20;
  l.cpu_quota_millis = 200;
  l.cpu_shares = 1;  // clamped to 2
  l.pids_max = 0;
  ASSERT_TRUE(v1.SetLimits("herd/a/ls/r", l).ok());
  EXPECT_EQ(Get("memory/herd/a/ls/r/memory.limit_in_bytes"), absl::StrCat(32 << 20));
  EXPECT_EQ(Get("memory/herd/a/ls/r/memory.memsw.limit_in_bytes"), absl::StrCat(32 << 20));
  EXPECT_EQ(Get("cpu,cpuacct/herd/a/ls/r/cpu.cfs_period_us"), "100000");
  EXPECT_EQ(Get("cpu,cpuacct/herd/a/ls/r/cpu.cfs_quota_us"), "20000");
  EXPECT_EQ(Get("cpu,cpuacct/herd/a/ls/r/cpu.shares"), "2");
  EXPECT_EQ(Get("pids/herd/a/ls/r/pids.max"), "max");

  Put("cpu,cpuacct/herd/a/ls/r/cpuacct.usage", "2500000000\n");
  Put("memory/herd/a/ls/r/memory.usage_in_bytes", "50000000\n");
  Put("memory/herd/a/ls/r/memory.stat", "cache 0\nrss 1\ntotal_cache 20000000\ntotal_rss 30000000\n"
                                        "total_inactive_file 15000000\n");
  Put("memory/herd/a/ls/r/memory.oom_control", "oom_kill_disable 0\nunder_oom 0\noom_kill 3\n");
  absl::StatusOr<CgroupSample> s = v1.Sample("herd/a/ls/r");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->cpu_usage_ns, 2'500'000'000);
  EXPECT_EQ(s->memory_rss_bytes, 30'000'000);
  EXPECT_EQ(s->memory_working_set_bytes, 35'000'000);
  EXPECT_EQ(s->oom_kills, 3);
}

TEST(StatValue, ParsesCgroupAndMeminfoLines) {
  EXPECT_EQ(StatValue("rss 5\ntotal_rss 7\n", "rss"), 5);
  EXPECT_EQ(StatValue("rss 5\ntotal_rss 7\n", "total_rss"), 7);
  EXPECT_EQ(StatValue("MemTotal:       24684000 kB\nMemAvailable:   100 kB\n", "MemAvailable"), 102400);
  EXPECT_EQ(StatValue("MemAvailable: 1 kB\n", "MemAvail"), -1);
  EXPECT_EQ(StatValue("", "x"), -1);
}

TEST(SharesToWeight, MapsTheRangeOntoWeights) {
  EXPECT_EQ(SharesToWeight(2), 1);
  EXPECT_EQ(SharesToWeight(1), 1);
  EXPECT_EQ(SharesToWeight(262144), 10000);
  EXPECT_EQ(SharesToWeight(1 << 30), 10000);
  EXPECT_EQ(SharesToWeight(65536), 2500);
}

}  // namespace
}  // namespace herd::agent
