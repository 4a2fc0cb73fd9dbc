// Containers: every run in its own cgroup, with limits from its TaskRun,
// usage sampled from the cgroup's counters, OOM kills detected, the whole
// cgroup killed at the end of an attempt, and non-prod runs evicted when the
// machine runs short of memory. See docs/agent.md, "Containers".
//
// Layout (per hierarchy on v1):
//
//   <root>/<parent>/<agent>/ls/<run_id>      latency-sensitive runs
//   <root>/<parent>/<agent>/batch/<run_id>   batch runs
//
// An alloc (TaskRun.alloc) is an envelope group <ls|batch>/<run_id> with the
// alloc's limits, holding its placeholder process in <run_id>/pause and
// the runs of the tasks in it (TaskRun.alloc_run_id) in <run_id>/<their
// run_id>: they share the alloc's limits, and stay when the placeholder
// restarts. A task in an alloc waits to start until its alloc's envelope
// exists here.
//
// where <agent> is the agent's name and a hash of its root directory
// (CgroupOptions::owner_dir).
//
// ls/ has large CPU shares and batch/ tiny ones, so under CPU contention
// batch is throttled before LS; batch/ also carries limits (CPU quota,
// memory) that the colocation controller sets (SetBatchLimits). Several
// agents on one host each have their own <agent> directory.
//
// CPU shares of a run (v1 cpu.shares; v2 cpu.weight = SharesToWeight):
//   LS:    clamp(cpu_millis * 1024 / 1000 * (prod ? 2 : 1), 64, 262144)
//   batch: clamp(cpu_millis * 16 / 1000, 2, 1024)
// ls/ gets 65536 shares, batch/ 2. A run's CFS quota is its cpu_millis (none
// if 0), its memory hard limit its memory_bytes (none if 0, no swap), its
// pids limit CgroupOptions::pids_max. APPCLASS_UNSPECIFIED counts as LS for
// prod priorities and batch otherwise (as the job reader defaults it).
//
// CPU pinning (cpu_manager.h): latency-sensitive runs asking for whole cores
// get exclusive cpusets, everything else the CPUs left (the shared pool),
// where the host has a cpuset controller and CgroupOptions::cpu_pinning.
//
// Without cgroups (root "none", or not usable: not mounted, not root) the
// extension still reports machine usage and still evicts by the runs'
// requested memory; it reports cgroup_version "none".
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "agent/cgroup/cpu_manager.h"
#include "agent/cgroup/driver.h"
#include "agent/cgroup/interference.h"
#include "agent/runtime/process.h"
#include "agent/supervisor/extension.h"
#include "agent/supervisor/slow_checks.h"
#include "base/clock.h"

namespace herd::agent {

// The machine's memory as /proc/meminfo says (bytes; -1 if unknown).
struct MachineMemory {
  int64_t total_bytes = -1;
  int64_t available_bytes = -1;  // MemAvailable
  int64_t free_bytes = -1;
  int64_t buffers_bytes = -1;
  int64_t cached_bytes = -1;
};
MachineMemory ReadMachineMemory();

struct CgroupOptions {
  // Where cgroups are mounted ("none": no containers) and our place in them.
  std::string root = "/sys/fs/cgroup";
  std::string parent = "herd";
  std::string agent_name = "agent";
  // The agent's root directory. When set, the directory is
  // "<agent_name>-<8 hex digits of its hash>": stable across restarts of that
  // agent, and distinct for two agents of one name on one host (test cells
  // started side by side all have an "m0"), which must never see each
  // other's groups as stale.
  std::string owner_dir;
  int64_t pids_max = 4096;
  // Eviction: kill non-prod runs when MemAvailable < memory_reserve_bytes,
  // or, when capacity_memory_bytes > 0, when the runs' working sets add up
  // to more than capacity - reserve (evict.h).
  int64_t memory_reserve_bytes = 256ll << 20;
  int64_t capacity_memory_bytes = 0;
  // After evicting, memory readings lag the kills: judge again only after
  // this long.
  int64_t eviction_hold_ms = 5'000;
  // Per-run CPU and memory are sampled at most this often (Tick runs every
  // second); disk (a walk of the run directory) less often.
  int64_t usage_interval_ms = 2'000;
  int64_t disk_interval_ms = 10'000;
  // Disk is enforced on what is measured: a run whose directory (sandbox and
  // logs) passes its resources.disk_bytes is evicted saying so; and while
  // the file system of owner_dir has less than disk_reserve_bytes free, the
  // lowest-priority run using the most disk is evicted, one per disk
  // interval (and eviction hold), so a task cannot fill the machine's disk (the agent's state
  // and other tasks' logs live there). 0: no reserve.
  int64_t disk_reserve_bytes = 512ll << 20;
  // Free bytes where the runs live; default statvfs(owner_dir). Tests fake it.
  std::function<int64_t()> disk_free;
  // CPU pinning (cpu_manager.h): on where a cpuset controller is mounted.
  // Off for agents that share one host (their pools would overlap).
  bool cpu_pinning = true;
  std::string cpu_sys_root = "/sys/devices/system";  // topology; tests use a fake tree
  int min_shared_cpus = 1;
  // Initial batch/ limits (0: none); SetBatchLimits changes them.
  int64_t batch_cpu_millis = 0;
  int64_t batch_memory_bytes = 0;
  // Colocation control (issue #16; seed 004). Off: ls/ and batch/ weigh
  // the same, no batch box, no interference control -- a cell without
  // colocation control, the baseline `herd bench colocation` measures.
  bool colocation = true;
  // The batch big box: when batch_box_cpu_millis > 0, every
  // control_interval_ms batch/ is limited to this capacity minus the
  // predicted usage of ls/ (all latency-sensitive runs, read from the
  // group) minus batch_box_margin of the capacity (CPU quota; memory too
  // when batch_box_memory_bytes > 0), times the interference controller's
  // factor. The prediction is a decaying peak: up at once, down with
  // batch_box_half_life_ms. Batch keeps at least 5% of the CPU and 64 MiB.
  int64_t batch_box_cpu_millis = 0;
  int64_t batch_box_memory_bytes = 0;
  double batch_box_margin = 0.1;
  int64_t batch_box_half_life_ms = 30'000;
  // How often the box and the interference signals are read (within the
  // supervisor's tick: the agent ticks at this interval).
  int64_t control_interval_ms = 250;
  InterferenceOptions interference;
  // LS runs whose last health check was slower than its latency bound
  // (HealthExtension records them); may be null.
  std::shared_ptr<SlowChecks> slow_checks;
  // The machine's memory; default ReadMachineMemory. Tests inject shortage.
  std::function<MachineMemory()> machine_memory;
  // Times usage samples, eviction holds and the driver's waits; tests use a
  // ManualClock to decide when the next sample or eviction may happen.
  Clock* clock = RealClock::Get();
};

// Kills every process left in the groups of the agent `o` describes (its
// ls/ and batch/ runs), without the agent: `herd down` uses it for a local
// cell whose agents were killed. Returns how many processes it signalled;
// 0 without cgroups.
int KillAgentGroups(const CgroupOptions& o);

class CgroupExtension : public Extension {
 public:
  // Sets up <parent>/<agent>/{ls,batch}. If cgroups are asked for but cannot
  // be used, logs a warning and runs without (cgroup_version "none").
  static std::shared_ptr<CgroupExtension> Create(CgroupOptions options);

  absl::string_view name() const override { return "cgroup"; }
  // "v1", "v2" or "none".
  std::string version() const;
  // Null without cgroups.
  CgroupDriver* driver() const { return driver_.get(); }
  // Null without CPU pinning.
  CpuManager* cpu_manager() const { return cpu_.get(); }
  // How many exclusive CPUs the run wants (CpuManager::WantedCpus).
  static int WantedCpus(const v1::TaskRun& spec);

  // The group (relative to the root) of the agent, of batch/, of a run.
  std::string AgentGroup() const;
  // The agent group an agent with these options uses.
  static std::string AgentGroupOf(const CgroupOptions& o);
  std::string BatchGroup() const { return AgentGroup() + "/batch"; }
  std::string GroupOf(const v1::TaskRun& spec) const;
  // An alloc's envelope group (the group of any other run).
  std::string EnvelopeOf(const v1::TaskRun& spec) const;
  static constexpr absl::string_view kAllocPause = "pause";
  static bool IsBatch(const v1::TaskRun& spec);
  static int64_t CpuShares(const v1::TaskRun& spec);
  // What a run's group is limited to: its memory and CPU, its shares, the
  // agent's pids limit.
  CgroupLimits LimitsOf(const v1::TaskRun& spec) const;

  // CPU quota and memory limit of batch/ as a whole (<= 0: none). For the
  // colocation controller; thread-safe.
  absl::Status SetBatchLimits(int64_t cpu_millis, int64_t memory_bytes);

  absl::Status Init(SupervisorControl* control) override;
  void Shutdown() override;
  void Recovered(const RunView& run) override;
  absl::Status Prepare(const RunView& run, AttemptSetup* setup) override;
  void Started(const RunView& run, bool recovered) override;
  void Ended(const RunView& run, ExitStatus* exit) override;
  bool KillAll(const RunView& run) override;
  void Released(const RunView& run) override;
  // The run's limits changed in place (an update): its group takes them.
  void Updated(const RunView& run) override;
  void Describe(const RunView& run, v1::RunStatus* status) const override;
  void DescribeMachine(v1::PollResponse* response) const override;
  void Tick(const std::vector<RunView>& runs) override;

 private:
  struct RunInfo {
    std::string group;
    bool disk_sampled = false;
    int64_t oom_base = 0;          // the group's OOM count when the attempt began
    bool have_sample = false;
    CgroupSample last;
    int64_t last_mono_ms = 0;
    v1::Usage usage;
    int64_t disk_mono_ms = 0;
    // Interference signals at the last control step (latency-sensitive runs).
    int64_t ctl_mono_ms = 0;
    int64_t ctl_periods = 0;
    int64_t ctl_throttled = 0;
    int64_t ctl_delay_ns = 0;
    int64_t ctl_throttled_ns = 0;
    int64_t quota_millis = -1;  // v1, boxed batch runs: the CPU quota last set to follow the box
  };

  CgroupExtension(CgroupOptions options, std::unique_ptr<CgroupDriver> driver);
  absl::Status SetUp();
  // Makes the agent's group and takes its lock (lock_fd_), before anything
  // goes in it.
  absl::Status LockAgentGroup();
  void SampleRunsLocked(const std::vector<RunView>& runs, int64_t now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void SampleMachineLocked(int64_t now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void EvictLocked(const std::vector<RunView>& runs, int64_t now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Disk limits and the agent's disk reserve (CgroupOptions::disk_reserve_bytes).
  void EnforceDiskLocked(const std::vector<RunView>& runs, int64_t now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  int64_t disk_reserve_next_ms_ ABSL_GUARDED_BY(mu_) = 0;
  // Every control_interval_ms: interference signals, the batch box, and
  // evictions the interference controller asks for.
  void ControlLocked(const std::vector<RunView>& runs, int64_t now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  InterferenceSample InterferenceSignalsLocked(const std::vector<RunView>& runs, const CgroupSample& ls,
                                               int64_t now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ResizeBatchBoxLocked(const std::vector<RunView>& runs, const CgroupSample& ls, int64_t now, double factor)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // cgroup v1 refuses a parent CPU quota below a child's: the batch runs'
  // quotas follow the box (at most it), set before the parent's when it
  // shrinks and after when it grows. Returns the largest quota that cannot
  // follow (an alloc's envelope): the box stays at least that.
  int64_t FitBatchChildrenLocked(const std::vector<RunView>& runs, int64_t box, bool before)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool BoxedOnV1(const v1::TaskRun& spec) const;
  void EvictForInterferenceLocked(const std::vector<RunView>& runs, const std::string& reason)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RemoveStaleGroups(const std::vector<RunView>& runs);
  // Removes the directories of other agents under <parent> that no live
  // agent holds (flock) and that hold no process: left by agents that were
  // SIGKILLed and never came back (test cells).
  void RemoveDeadAgents();
  bool HasProcesses(const std::string& group) const;
  // The envelope of the alloc whose run id is given, if it is set up here
  // ("" if not).
  std::string AllocEnvelope(const std::string& alloc_run_id) const;

  const CgroupOptions options_;
  const std::string agent_group_;
  std::unique_ptr<CgroupDriver> driver_;
  std::unique_ptr<CpuManager> cpu_;  // made before the groups (so they are cpusets too)
  SupervisorControl* control_ = nullptr;
  Fd lock_fd_;  // flock on our agent directory while we live

  mutable absl::Mutex mu_;
  std::map<std::string, RunInfo> runs_ ABSL_GUARDED_BY(mu_);
  std::set<std::string> evicting_ ABSL_GUARDED_BY(mu_);
  std::set<std::string> remove_later_ ABSL_GUARDED_BY(mu_);  // groups whose rmdir was busy
  std::map<std::string, std::string> allocs_ ABSL_GUARDED_BY(mu_);  // alloc run id -> envelope group
  bool cleaned_ ABSL_GUARDED_BY(mu_) = false;
  int64_t next_sample_mono_ms_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t evict_hold_until_ms_ ABSL_GUARDED_BY(mu_) = 0;
  // /proc/stat busy and total ticks at the previous machine sample.
  int64_t cpu_busy_ticks_ ABSL_GUARDED_BY(mu_) = -1;
  int64_t cpu_mono_ms_ ABSL_GUARDED_BY(mu_) = 0;
  v1::Usage machine_ ABSL_GUARDED_BY(mu_);
  int64_t next_control_mono_ms_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t control_steps_ ABSL_GUARDED_BY(mu_) = 0;
  // ls/ as a whole at the last control step.
  CgroupSample ls_last_ ABSL_GUARDED_BY(mu_);
  int64_t batch_cpu_ns_ ABSL_GUARDED_BY(mu_) = 0;  // batch/'s CPU at the last control step
  int64_t batch_mono_ms_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t ls_mono_ms_ ABSL_GUARDED_BY(mu_) = 0;
  InterferenceController interference_ ABSL_GUARDED_BY(mu_);
  // The batch box: the latency-sensitive runs' predicted usage, when it was
  // last updated, and the limits last set.
  double ls_cpu_ ABSL_GUARDED_BY(mu_) = 0;
  double ls_memory_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t box_mono_ms_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t box_cpu_ ABSL_GUARDED_BY(mu_) = -1;
  int64_t box_memory_ ABSL_GUARDED_BY(mu_) = -1;

 public:
  // The batch box's current limits (-1: not set yet), for tests.
  std::pair<int64_t, int64_t> BatchBox() const {
    absl::MutexLock l(&mu_);
    return {box_cpu_, box_memory_};
  }
  // Control steps taken so far (tests wait for steps, not for time).
  int64_t ControlSteps() const {
    absl::MutexLock l(&mu_);
    return control_steps_;
  }
  // The interference controller's level and why (for tests and logs).
  std::pair<InterferenceController::Level, std::string> Interference() const {
    absl::MutexLock l(&mu_);
    return {interference_.level(), interference_.reason()};
  }
};

}  // namespace herd::agent
