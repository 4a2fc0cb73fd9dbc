// CPU pinning on the agent: latency-sensitive runs that ask for whole cores
// get exclusive cpusets (cpu_allocator.h: whole physical cores, hyper-thread
// siblings together, one NUMA node when it fits, cpuset.mems on that node);
// every other run -- batch, LS runs asking for a fraction of a core, runs in
// allocs -- shares what is left, the shared pool. See docs/agent.md, "CPU
// pinning".
//
// Part of the cgroup extension, not an extension of its own: a cpuset is a
// property of the run's cgroup, which the cgroup extension makes, names,
// recreates per attempt, kills and removes (in every v1 hierarchy, the
// cpuset one included); a second owner of those groups would have to
// repeat all of that and be ordered against it. The extension calls in at
// its hooks; the manager keeps the assignment and writes cpusets through
// the extension's driver.
//
// In cgroups (per hierarchy on v1):
//   ls/<run>          an exclusive run: cpuset.cpus = its CPUs, cpuset.mems
//                     = its node(s)
//   ls/<run>, ls/<alloc>/..., batch/ and everything under it:
//                     the shared pool, rewritten whenever an exclusive set is
//                     taken or given back
//   ls/               every CPU (v1: a parent must hold its children's CPUs)
// A run's assignment is also kept in its run directory (file "cpuset"), so a
// restarted agent gives each recovered run the same CPUs, and no CPU twice.
//
// Thread-safe: the hooks run on the supervisor's loop thread, CpusetOf and
// Describe on any.
#pragma once

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "agent/cgroup/cpu_allocator.h"
#include "agent/cgroup/driver.h"
#include "agent/supervisor/extension.h"
#include "agent/supervisor/run_dir.h"
#include "herd/v1/agent.pb.h"

namespace herd::agent {

class CpuManager {
 public:
  struct Options {
    // Where the topology is read (a fake tree in tests).
    std::string sys_root = "/sys/devices/system";
    // CPUs the shared pool always keeps.
    int min_shared_cpus = 1;
  };

  // The run directory file holding a run's assignment.
  static constexpr absl::string_view kRunDirFile = "cpuset";

  // Enables the driver's cpuset controller and reads the topology. Null,
  // with one log line saying why, where pinning cannot work: no cpuset
  // controller, no topology, a single CPU. `ls_group` and `batch_group`
  // must be made (driver->Create) after this, so they are cpusets too.
  static std::unique_ptr<CpuManager> Create(CgroupDriver* driver, std::string ls_group, std::string batch_group,
                                            const Options& options);

  // How many exclusive CPUs a run wants: cpu_millis / 1000 for a
  // latency-sensitive run (not `batch`) asking for a whole number of cores
  // (>= 1000, a multiple of 1000) that is neither an alloc nor in one; else 0.
  static int WantedCpus(const v1::TaskRun& spec, bool batch);

  // After an agent restart, before anything new is prepared: the run takes
  // the CPUs its run directory records (if it wants them and they are
  // still free; else it is shared, and its group gets the pool on the
  // first Tick).
  void Recover(const v1::TaskRun& spec, int wanted, const RunDir& dir, const std::string& group);
  // Before an attempt, once `group` exists and before any process joins:
  // the run keeps or gets its exclusive CPUs (or, if too few whole cores
  // are free, the pool, and a note in its status), and its group gets them.
  absl::Status Prepare(const v1::TaskRun& spec, int wanted, const RunDir& dir, const std::string& group);
  // The run's cpu changed in place: it gets the set its new size asks for.
  void Update(const v1::TaskRun& spec, int wanted, const RunDir& dir, const std::string& group);
  // The run is forgotten: its CPUs return to the pool.
  void Release(const std::string& run_id, const RunDir& dir);
  // Every tick, with every run: runs that ended for good (EXITED) give
  // their cores back; runs still wanted that wait for cores get the free
  // ones, in the order they began to wait (not runs being stopped); and
  // the shared groups get the pool if it changed -- or, on the `first` tick
  // after recovery, in any case.
  void Tick(const std::vector<RunView>& runs, bool first);
  // Writes the pool to one more shared group (an alloc's envelope).
  void SetShared(const std::string& group);

  // The run's exclusive CPUs ("" if it has none) and, for a run that wanted
  // cores and did not get them, why.
  std::string CpusetOf(const std::string& run_id) const;
  void Describe(const std::string& run_id, v1::RunStatus* status) const;
  std::string SharedPool() const;
  const CpuTopology& topology() const { return topo_; }

 private:
  struct RunInfo {
    int wanted = 0;
    std::string group;
    std::string dir;  // run directory
    std::string note;  // why it is not pinned
    uint64_t waiting_since = 0;  // order of runs waiting for cores (0: not waiting)
  };

  CpuManager(CgroupDriver* driver, std::string ls_group, std::string batch_group, CpuTopology topo,
             const Options& options);
  // Gets `id` its CPUs if it has none; false (and a note) if they do not fit.
  bool AssignLocked(const std::string& id, RunInfo& info) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ReleaseLocked(const std::string& id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Waiting runs in `wanted` take free cores, in the order they began to
  // wait. True if any did.
  bool PromoteWaitingLocked(const std::set<std::string>& wanted) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Writes the run's group: its exclusive set, or the pool.
  absl::Status WriteRunLocked(const std::string& id, const RunInfo& info) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ApplySharedPoolLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Persist(const std::string& id, const RunInfo& info) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  CgroupDriver* const driver_;
  const std::string ls_group_, batch_group_;
  const CpuTopology topo_;
  std::string all_mems_;

  mutable absl::Mutex mu_;
  CpuAllocator alloc_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, RunInfo> runs_ ABSL_GUARDED_BY(mu_);
  uint64_t wait_seq_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace herd::agent
