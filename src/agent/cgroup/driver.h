// Cgroups behind one interface: v1 (a hierarchy per controller, e.g.
// /sys/fs/cgroup/{cpu,cpuacct,memory,pids,freezer}) and v2 (one unified
// hierarchy, recognised by cgroup.controllers at its root). A driver is
// opened on a root directory, so tests can point it at a fake tree.
//
// Groups are named by a relative path ("herd/agent1/ls/RUN"), the same in
// every v1 hierarchy. The drivers only read and write cgroup files: no
// threads, no state beyond the hierarchies found at open, so their methods
// may be called from any thread.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "base/clock.h"

namespace herd::agent {

// What SetLimits changes; unset fields are left as they are.
struct CgroupLimits {
  std::optional<int64_t> memory_bytes;      // hard limit; <= 0: none. Swap is kept off where possible.
  std::optional<int64_t> cpu_quota_millis;  // CFS bandwidth; <= 0: none
  std::optional<int64_t> cpu_shares;        // v1 cpu.shares units [2, 262144]; v2: mapped to cpu.weight
  std::optional<int64_t> pids_max;          // <= 0: none
};

// One reading of a group's counters.
struct CgroupSample {
  int64_t cpu_usage_ns = 0;           // cumulative CPU time
  int64_t memory_usage_bytes = 0;     // everything charged (page cache included)
  int64_t memory_rss_bytes = 0;       // anonymous memory (v1 total_rss, v2 anon)
  int64_t memory_working_set_bytes = 0;  // usage - inactive file pages
  int64_t oom_kills = 0;              // processes killed by the OOM killer in it (cumulative)
  // CFS bandwidth (cpu.stat): periods with runnable tasks, and those in
  // which the group ran out of quota (cumulative; 0 without a quota).
  int64_t cpu_periods = 0;
  int64_t cpu_throttled_periods = 0;
  int64_t cpu_throttled_ns = 0;  // time throttled (summed over CPUs)
  // v2 cpu.pressure "some" total: microseconds in which some task of the
  // group waited for a CPU (cumulative); -1 where unknown (v1).
  int64_t cpu_pressure_some_us = -1;
};

// The CFS period every quota is expressed in.
inline constexpr int64_t kCfsPeriodUs = 100'000;
// v1 cpu.shares range, and its map onto v2 cpu.weight [1, 10000] (the
// mapping runc and the kubelet use).
inline constexpr int64_t kMinShares = 2;
inline constexpr int64_t kMaxShares = 262'144;
int64_t SharesToWeight(int64_t shares);

class CgroupDriver {
 public:
  virtual ~CgroupDriver() = default;

  // "v1" or "v2".
  virtual absl::string_view version() const = 0;
  const std::string& root() const { return root_; }

  // Creates the group and any missing parents (v2: with the cpu, memory and
  // pids controllers enabled for the children of every parent). OK if it
  // exists.
  virtual absl::Status Create(absl::string_view group) = 0;
  virtual bool Exists(absl::string_view group) const = 0;
  virtual absl::Status SetLimits(absl::string_view group, const CgroupLimits& limits) = 0;
  // The cgroup.procs files a process writes "0" to, to join the group: one
  // per hierarchy (herd-shim --cgroup FILE, repeated).
  virtual std::vector<std::string> ProcsFiles(absl::string_view group) const = 0;
  virtual absl::StatusOr<CgroupSample> Sample(absl::string_view group) const = 0;
  // The processes in the group itself (not those in its child groups).
  virtual std::vector<pid_t> Pids(absl::string_view group) const = 0;
  // SIGKILL to every process in the group, including ones that left the
  // task's process group or session: v2 cgroup.kill when the kernel has it,
  // else freeze, kill each listed pid, thaw, until the group is empty (or
  // `timeout_ms` passed: then UNAVAILABLE).
  virtual absl::Status Kill(absl::string_view group, int64_t timeout_ms = 1000) = 0;
  // Removes the (empty) group; OK if it does not exist. Busy: UNAVAILABLE.
  virtual absl::Status Remove(absl::string_view group) = 0;
  // Names of the group's child groups.
  virtual std::vector<std::string> Children(absl::string_view group) const = 0;
  // The group's directory (v1: in the memory hierarchy), e.g. to flock it.
  virtual std::string Dir(absl::string_view group) const = 0;

  // CPU pinning (the cpuset controller; cpu_manager.h). Off until
  // EnableCpuset: from then on Create makes groups cpusets can be set on --
  // v1: in the cpuset hierarchy too, each new group given its parent's
  // cpuset.cpus and cpuset.mems (a v1 cpuset admits no process until both
  // are set); v2: cpuset enabled in every parent's cgroup.subtree_control.
  // NOT_FOUND, and nothing changes, without a cpuset controller. Call it
  // before the driver is shared between threads.
  virtual absl::Status EnableCpuset() = 0;
  virtual bool cpuset_enabled() const = 0;
  // Writes the group's cpuset.mems (unless `mems` is empty) and cpuset.cpus,
  // in the kernel's list format ("0-3,8"). v1 refuses CPUs its parent does
  // not have, and a parent's CPUs its children still use.
  virtual absl::Status SetCpuset(absl::string_view group, absl::string_view cpus, absl::string_view mems) = 0;
  // The group's cpuset.cpus as written (v2: "" when it takes its parent's).
  virtual absl::StatusOr<std::string> Cpuset(absl::string_view group) const = 0;

 protected:
  CgroupDriver(std::string root, Clock* clock) : root_(std::move(root)), clock_(clock) {}
  std::string root_;
  Clock* const clock_;  // bounds the waits of Kill (freezing, retries)
};

// Opens the cgroups mounted at `root`: v2 if root/cgroup.controllers exists,
// else v1 if root/memory, root/cpu and root/cpuacct are hierarchies (they may
// be one combined hierarchy). NOT_FOUND if neither.
absl::StatusOr<std::unique_ptr<CgroupDriver>> OpenCgroupDriver(const std::string& root,
                                                               Clock* clock = RealClock::Get());

// Exposed for tests of the driver on fake trees; OpenCgroupDriver picks one.
std::unique_ptr<CgroupDriver> NewCgroupV1Driver(const std::string& root, Clock* clock = RealClock::Get());
std::unique_ptr<CgroupDriver> NewCgroupV2Driver(const std::string& root, Clock* clock = RealClock::Get());

// Small helpers over cgroup files (also used by the extension for /proc).
absl::StatusOr<std::string> ReadSmallFile(const std::string& path);
// open(O_WRONLY) + one write(2): what cgroup files need (no O_TRUNC, no
// temp file). The kernel's error comes back in the status.
absl::Status WriteCgroupFile(const std::string& path, absl::string_view value);
// "key value" lines (memory.stat, cpu.stat, memory.events, /proc/meminfo's
// "Key:   123 kB" with the colon and unit stripped): value of `key` or -1.
int64_t StatValue(absl::string_view text, absl::string_view key);
// The "total=" of the "some" line of a pressure file (PSI: /proc/pressure/cpu,
// v2 cpu.pressure), in microseconds; -1 if there is none.
int64_t PressureSomeTotalUs(absl::string_view text);

}  // namespace herd::agent
