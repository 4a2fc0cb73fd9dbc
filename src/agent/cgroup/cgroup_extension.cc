#include "agent/cgroup/cgroup_extension.h"

#include <sys/statvfs.h>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <chrono>
#include <filesystem>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "agent/cgroup/evict.h"
#include "base/files.h"
#include "base/log.h"
#include "base/priority.h"
#include "base/status.h"

namespace herd::agent {
namespace {

namespace fs = std::filesystem;

// ls/ against batch/: under contention batch gets ~1/32768 of what LS
// leaves (v2 weights 2500 : 1).
constexpr int64_t kLsParentShares = 65'536;
constexpr int64_t kBatchParentShares = 2;

// An LS run throttled in more than this share of its CFS periods: its
// run-queue delay is its quota's doing, not a sign of interference.
constexpr double kThrottledIgnoresDelay = 0.05;

// Bytes allocated to everything under `dir` (du: blocks, not sizes, not
// following symlinks).
// A run directory's disk use (sandbox, logs): walked through descriptors,
// following nothing the task left in its sandbox (base/files.h).
int64_t DirBytes(const std::string& dir) {
  const size_t slash = dir.rfind('/');
  if (slash == std::string::npos || slash == 0) return 0;
  absl::StatusOr<Fd> parent = OpenDirectory(dir.substr(0, slash));
  if (!parent.ok()) return 0;
  absl::StatusOr<int64_t> bytes = DiskUsageAt(parent->get(), dir.substr(slash + 1));
  return bytes.ok() ? *bytes : 0;
}

int64_t FreeBytesOf(const std::string& dir) {
  struct statvfs vfs;
  if (statvfs(dir.c_str(), &vfs) != 0) return -1;
  return static_cast<int64_t>(vfs.f_bavail) * static_cast<int64_t>(vfs.f_frsize);
}

// The whole machine's busy CPU time from /proc/stat's "cpu" line, in ticks
// (user + nice + system + irq + softirq + steal; not idle or iowait).
int64_t MachineBusyTicks() {
  absl::StatusOr<std::string> stat = ReadSmallFile("/proc/stat");
  if (!stat.ok()) return -1;
  absl::string_view line = *stat;
  line = line.substr(0, line.find('\n'));
  std::vector<absl::string_view> f = absl::StrSplit(line, ' ', absl::SkipEmpty());
  if (f.size() < 9 || f[0] != "cpu") return -1;
  int64_t busy = 0;
  for (size_t i : {1, 2, 3, 6, 7, 8}) {
    int64_t v;
    if (absl::SimpleAtoi(f[i], &v)) busy += v;
  }
  return busy;
}

std::string Mi(int64_t bytes) { return absl::StrCat(bytes >> 20, "Mi"); }

}  // namespace

MachineMemory ReadMachineMemory() {
  MachineMemory m;
  absl::StatusOr<std::string> info = ReadSmallFile("/proc/meminfo");
  if (!info.ok()) return m;
  m.total_bytes = StatValue(*info, "MemTotal");
  m.available_bytes = StatValue(*info, "MemAvailable");
  m.free_bytes = StatValue(*info, "MemFree");
  m.buffers_bytes = StatValue(*info, "Buffers");
  m.cached_bytes = StatValue(*info, "Cached");
  return m;
}

std::shared_ptr<CgroupExtension> CgroupExtension::Create(CgroupOptions options) {
  std::unique_ptr<CgroupDriver> driver;
  if (options.root != "none") {
    absl::StatusOr<std::unique_ptr<CgroupDriver>> d = OpenCgroupDriver(options.root, options.clock);
    if (d.ok()) {
      driver = *std::move(d);
    } else {
      HERD_LOG_WARN("containers off: {}", d.status().ToString());
    }
  }
  if (!options.machine_memory) options.machine_memory = ReadMachineMemory;
  std::shared_ptr<CgroupExtension> ext(new CgroupExtension(std::move(options), std::move(driver)));
  if (ext->driver_) {
    if (ext->options_.cpu_pinning) {
      CpuManager::Options c;
      c.sys_root = ext->options_.cpu_sys_root;
      c.min_shared_cpus = ext->options_.min_shared_cpus;
      ext->cpu_ = CpuManager::Create(ext->driver_.get(), ext->AgentGroup() + "/ls", ext->BatchGroup(), c);
    }
    if (absl::Status st = ext->SetUp(); !st.ok()) {
      HERD_LOG_WARN("containers off: cannot set up cgroups under {}/{}: {}", ext->options_.root, ext->AgentGroup(),
                    st.ToString());
      ext->cpu_.reset();
      ext->driver_.reset();
    } else {
      HERD_LOG_INFO("containers: cgroup {} under {}/{}", ext->driver_->version(), ext->options_.root,
                    ext->AgentGroup());
    }
  }
  return ext;
}

CgroupExtension::CgroupExtension(CgroupOptions options, std::unique_ptr<CgroupDriver> driver)
    : options_(std::move(options)), agent_group_(AgentGroupOf(options_)), driver_(std::move(driver)) {
  InterferenceOptions i = options_.interference;
  i.enabled = i.enabled && options_.colocation;
  interference_ = InterferenceController(i);
}

absl::Status CgroupExtension::SetUp() {
  HERD_RETURN_IF_ERROR(LockAgentGroup());
  const std::string ls = AgentGroup() + "/ls";
  HERD_RETURN_IF_ERROR(driver_->Create(ls));
  HERD_RETURN_IF_ERROR(driver_->Create(BatchGroup()));
  CgroupLimits l;
  // Without colocation control the two weigh the same (v1's default).
  l.cpu_shares = options_.colocation ? kLsParentShares : 1024;
  HERD_RETURN_IF_ERROR(driver_->SetLimits(ls, l));
  l.cpu_shares = options_.colocation ? kBatchParentShares : 1024;
  l.cpu_quota_millis = options_.batch_cpu_millis;
  l.memory_bytes = options_.batch_memory_bytes;
  HERD_RETURN_IF_ERROR(driver_->SetLimits(BatchGroup(), l));
  RemoveDeadAgents();
  return absl::OkStatus();
}

absl::Status CgroupExtension::LockAgentGroup() {
  // The lock tells other agents on this host that we are alive, so it is
  // taken before anything is put in the group: an agent starting beside us
  // sweeps groups it can lock and finds empty (RemoveDeadAgents), and it
  // used to find ours between our mkdir and our lock, and removed it under
  // us (seen with herd up's agents starting together). A sweeper holds the
  // lock only while it checks and removes, so we wait for it a moment, and
  // if it removed the directory meanwhile we make it again.
  const std::string dir = driver_->Dir(AgentGroup());
  for (int attempt = 0; attempt < 100; ++attempt) {
    HERD_RETURN_IF_ERROR(driver_->Create(AgentGroup()));
    Fd fd(open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!fd.valid()) continue;  // removed right after we made it
    bool locked = false;
    for (int i = 0; i < 200 && !locked; ++i) {
      locked = flock(fd.get(), LOCK_EX | LOCK_NB) == 0;
      if (!locked) usleep(10'000);
    }
    if (!locked) {
      // Held for two seconds: not a sweeper but a live agent of this name
      // and root (a mistake the operator should hear of; go on as before).
      HERD_LOG_WARN("cannot lock {} (another agent with this name and root?)", dir);
      lock_fd_ = std::move(fd);
      return absl::OkStatus();
    }
    // Still the directory at that path, or one a sweeper removed while we
    // waited for its lock?
    struct stat held, now;
    if (fstat(fd.get(), &held) == 0 && stat(dir.c_str(), &now) == 0 && held.st_ino == now.st_ino &&
        held.st_dev == now.st_dev) {
      lock_fd_ = std::move(fd);
      return absl::OkStatus();
    }
  }
  return absl::InternalError(absl::StrCat("cannot make and lock ", dir, ": it keeps being removed"));
}

bool CgroupExtension::HasProcesses(const std::string& group) const {
  if (!driver_->Pids(group).empty()) return true;
  for (const std::string& child : driver_->Children(group)) {
    if (HasProcesses(group + "/" + child)) return true;
  }
  return false;
}

void CgroupExtension::RemoveDeadAgents() {
  if (options_.parent.empty()) return;  // never sweep the root of the hierarchy
  const std::string mine = AgentGroup().substr(options_.parent.size() + 1);
  for (const std::string& other : driver_->Children(options_.parent)) {
    if (other == mine) continue;
    const std::string group = absl::StrCat(options_.parent, "/", other);
    Fd fd(open(driver_->Dir(group).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!fd.valid() || flock(fd.get(), LOCK_EX | LOCK_NB) != 0) continue;  // alive
    // Tasks of an agent that is restarting keep their groups.
    if (HasProcesses(group)) continue;
    absl::Status st = driver_->Remove(group);
    HERD_LOG_INFO("removed the cgroups of dead agent {}{}", other, st.ok() ? "" : ": " + st.ToString());
  }
}

std::string CgroupExtension::version() const { return driver_ ? std::string(driver_->version()) : "none"; }

std::string CgroupExtension::AgentGroup() const { return agent_group_; }

std::string CgroupExtension::AgentGroupOf(const CgroupOptions& o) {
  std::string name = o.agent_name;
  if (!o.owner_dir.empty()) {
    std::error_code ec;
    fs::path dir = fs::absolute(o.owner_dir, ec);
    if (ec) dir = o.owner_dir;
    // FNV-1a: stable across builds and releases (unlike std::hash).
    uint32_t h = 2166136261u;
    std::string key = dir.lexically_normal().string();
    while (key.size() > 1 && key.back() == '/') key.pop_back();
    for (char c : key) h = (h ^ static_cast<uint8_t>(c)) * 16777619u;
    absl::StrAppend(&name, "-", absl::Hex(h, absl::kZeroPad8));
  }
  return o.parent.empty() ? name : absl::StrCat(o.parent, "/", name);
}

int CgroupExtension::WantedCpus(const v1::TaskRun& spec) { return CpuManager::WantedCpus(spec, IsBatch(spec)); }

bool CgroupExtension::IsBatch(const v1::TaskRun& spec) {
  if (spec.appclass() == v1::APPCLASS_UNSPECIFIED) return !IsProd(spec.priority());
  return spec.appclass() == v1::BATCH;
}

std::string CgroupExtension::EnvelopeOf(const v1::TaskRun& spec) const {
  return absl::StrCat(AgentGroup(), IsBatch(spec) ? "/batch/" : "/ls/", spec.run_id());
}

std::string CgroupExtension::GroupOf(const v1::TaskRun& spec) const {
  // An alloc's placeholder sits in a child of its envelope (cgroup v2 lets
  // a group hold processes or child groups with controllers, not both).
  if (spec.alloc()) return absl::StrCat(EnvelopeOf(spec), "/", kAllocPause);
  if (!spec.alloc_run_id().empty()) {
    std::string envelope = AllocEnvelope(spec.alloc_run_id());
    if (!envelope.empty()) return absl::StrCat(envelope, "/", spec.run_id());
  }
  return EnvelopeOf(spec);
}

std::string CgroupExtension::AllocEnvelope(const std::string& alloc_run_id) const {
  {
    absl::MutexLock l(&mu_);
    if (auto it = allocs_.find(alloc_run_id); it != allocs_.end()) return it->second;
  }
  // After a restart of the agent, before the alloc's run is recovered.
  for (const char* cls : {"/ls/", "/batch/"}) {
    std::string g = absl::StrCat(AgentGroup(), cls, alloc_run_id);
    if (driver_ && driver_->Exists(g)) return g;
  }
  return "";
}

int64_t CgroupExtension::CpuShares(const v1::TaskRun& spec) {
  const int64_t millis = std::max<int64_t>(0, spec.resources().cpu_millis());
  if (IsBatch(spec)) return std::clamp<int64_t>(millis * 16 / 1000, kMinShares, 1024);
  return std::clamp<int64_t>(millis * 1024 / 1000 * (IsProd(spec.priority()) ? 2 : 1), 64, kMaxShares);
}

absl::Status CgroupExtension::SetBatchLimits(int64_t cpu_millis, int64_t memory_bytes) {
  if (!driver_) return absl::FailedPreconditionError("no cgroups on this agent");
  CgroupLimits l;
  l.cpu_quota_millis = cpu_millis;
  l.memory_bytes = memory_bytes;
  HERD_RETURN_IF_ERROR(driver_->SetLimits(BatchGroup(), l));
  HERD_LOG_INFO("batch limits: cpu {} memory {}", cpu_millis > 0 ? absl::StrCat(cpu_millis, "m") : "none",
                memory_bytes > 0 ? Mi(memory_bytes) : "none");
  return absl::OkStatus();
}

absl::Status CgroupExtension::Init(SupervisorControl* control) {
  control_ = control;
  return absl::OkStatus();
}

void CgroupExtension::Shutdown() {
  if (!driver_) return;
  // Leave no empty directories behind (tasks that keep running keep theirs,
  // and so ours).
  const std::string ls = AgentGroup() + "/ls";
  if (driver_->Children(ls).empty() && driver_->Children(BatchGroup()).empty()) {
    (void)driver_->Remove(ls);
    (void)driver_->Remove(BatchGroup());
    (void)driver_->Remove(AgentGroup());
  }
  lock_fd_.Reset();
}

void CgroupExtension::Recovered(const RunView& run) {
  if (!driver_) return;
  // Adopt the group as it is: its OOM count started at 0 with the attempt
  // (Prepare creates a fresh group per attempt).
  std::string group = GroupOf(run.spec);
  if (cpu_) cpu_->Recover(run.spec, WantedCpus(run.spec), run.dir, group);
  absl::MutexLock l(&mu_);
  runs_[run.spec.run_id()].group = std::move(group);
  if (run.spec.alloc()) allocs_[run.spec.run_id()] = EnvelopeOf(run.spec);
}

absl::Status CgroupExtension::Prepare(const RunView& run, AttemptSetup* setup) {
  if (!driver_) return absl::OkStatus();
  if (run.spec.alloc()) {
    // The envelope holds the alloc's limits and outlives the placeholder's
    // attempts: the tasks in it keep running when the placeholder restarts.
    const std::string envelope = EnvelopeOf(run.spec);
    absl::Status st = driver_->Create(envelope);
    if (st.ok()) st = driver_->SetLimits(envelope, LimitsOf(run.spec));
    if (!st.ok()) return absl::InternalError(absl::StrCat("cgroup ", envelope, ": ", st.message()));
    if (cpu_) cpu_->SetShared(envelope);  // as the runs in it
    bool added = false;
    {
      absl::MutexLock l(&mu_);
      added = allocs_.insert_or_assign(run.spec.run_id(), envelope).second;
    }
    if (added && control_ != nullptr) control_->Retry();  // tasks waiting for it
  } else if (!run.spec.alloc_run_id().empty() && AllocEnvelope(run.spec.alloc_run_id()).empty()) {
    return absl::UnavailableError(absl::StrCat("alloc ", run.spec.alloc_run_id(), " is not set up here yet"));
  }
  const std::string group = GroupOf(run.spec);
  int64_t oom_base = 0;
  if (driver_->Exists(group)) {
    // A previous attempt's group: start afresh so its counters (OOM kills,
    // CPU, peak memory) are this attempt's alone.
    if (!driver_->Pids(group).empty()) (void)driver_->Kill(group, 200);
    if (absl::Status st = driver_->Remove(group); !st.ok()) {
      absl::StatusOr<CgroupSample> s = driver_->Sample(group);
      oom_base = s.ok() ? s->oom_kills : 0;
      HERD_LOG_WARN("run {}: reusing its cgroup ({})", run.spec.run_id(), st.ToString());
    }
  }
  absl::Status st = driver_->Create(group);
  if (st.ok()) st = driver_->SetLimits(group, LimitsOf(run.spec));
  if (!st.ok()) return absl::InternalError(absl::StrCat("cgroup ", group, ": ", st.message()));
  // Its CPUs before the task joins (never fails the attempt).
  if (cpu_) (void)cpu_->Prepare(run.spec, WantedCpus(run.spec), run.dir, group);
  for (std::string& procs : driver_->ProcsFiles(group)) {
    setup->shim_args.push_back("--cgroup");
    setup->shim_args.push_back(std::move(procs));
  }
  absl::MutexLock l(&mu_);
  RunInfo& info = runs_[run.spec.run_id()];
  info.group = group;
  info.oom_base = oom_base;
  info.have_sample = false;
  info.quota_millis = -1;  // as LimitsOf set it: the next resize of the box looks again
  return absl::OkStatus();
}

CgroupLimits CgroupExtension::LimitsOf(const v1::TaskRun& spec) const {
  CgroupLimits l;
  l.memory_bytes = spec.resources().memory_bytes();
  l.cpu_quota_millis = spec.resources().cpu_millis();
  l.cpu_shares = CpuShares(spec);
  l.pids_max = options_.pids_max;
  if (BoxedOnV1(spec)) {
    // v1 refuses a child's CPU quota above its parent's: at most the box
    // (FitBatchChildrenLocked lifts it back as the box grows).
    absl::MutexLock lock(&mu_);
    if (box_cpu_ > 0 && (*l.cpu_quota_millis <= 0 || *l.cpu_quota_millis > box_cpu_)) l.cpu_quota_millis = box_cpu_;
  }
  return l;
}

bool CgroupExtension::BoxedOnV1(const v1::TaskRun& spec) const {
  return driver_ && driver_->version() == "v1" && options_.batch_box_cpu_millis > 0 && IsBatch(spec) &&
         !spec.alloc() && spec.alloc_run_id().empty();
}

int64_t CgroupExtension::FitBatchChildrenLocked(const std::vector<RunView>& runs, int64_t box, bool before) {
  int64_t floor = 0;
  if (!driver_ || driver_->version() != "v1") return floor;
  for (const RunView& r : runs) {
    if (!IsBatch(r.spec)) continue;
    const int64_t own = r.spec.resources().cpu_millis();
    if (r.spec.alloc()) {
      // An alloc's envelope keeps its quota (its tasks' quotas are under
      // it): the box stays at least as large.
      if (own > 0) floor = std::max(floor, own);
      continue;
    }
    if (!BoxedOnV1(r.spec)) continue;
    auto it = runs_.find(r.spec.run_id());
    if (it == runs_.end() || it->second.group.empty()) continue;
    const int64_t want = own > 0 && own <= box ? own : box;
    const int64_t have = it->second.quota_millis;  // -1: as Prepare set it, maybe above `want`
    if (have == want) continue;
    // Shrinking: children before the parent; growing: after it.
    const bool shrink = have < 0 || want < have;
    if (before != shrink) continue;
    CgroupLimits l;
    l.cpu_quota_millis = want;
    if (driver_->SetLimits(it->second.group, l).ok()) it->second.quota_millis = want;
  }
  return floor;
}

void CgroupExtension::Updated(const RunView& run) {
  if (!driver_) return;
  const std::string group = run.spec.alloc() ? EnvelopeOf(run.spec) : GroupOf(run.spec);
  if (!driver_->Exists(group)) return;  // no attempt yet: its Prepare sets the new limits
  if (absl::Status st = driver_->SetLimits(group, LimitsOf(run.spec)); !st.ok()) {
    HERD_LOG_WARN("run {}: cannot change its limits in place: {}", run.spec.run_id(), st.ToString());
    return;
  }
  HERD_LOG_INFO("run {}: limits now cpu {}m, memory {}", run.spec.run_id(), run.spec.resources().cpu_millis(),
                Mi(run.spec.resources().memory_bytes()));
  if (cpu_ && !run.spec.alloc()) cpu_->Update(run.spec, WantedCpus(run.spec), run.dir, group);
}

void CgroupExtension::Started(const RunView& run, bool recovered) {
  if (!driver_ || !recovered) return;
  std::string group = GroupOf(run.spec);  // not under mu_: it may take it
  absl::MutexLock l(&mu_);
  RunInfo& info = runs_[run.spec.run_id()];
  if (info.group.empty()) info.group = std::move(group);
}

void CgroupExtension::Ended(const RunView& run, ExitStatus* exit) {
  if (!driver_) return;
  const std::string& id = run.spec.run_id();
  std::string group;
  int64_t oom_base = 0;
  {
    absl::MutexLock l(&mu_);
    evicting_.erase(id);
    auto it = runs_.find(id);
    if (it != runs_.end()) {
      group = it->second.group;
      oom_base = it->second.oom_base;
      it->second.usage.set_cpu_millis(0);
    }
  }
  if (group.empty()) group = GroupOf(run.spec);
  absl::StatusOr<CgroupSample> s = driver_->Sample(group);
  if (s.ok() && s->oom_kills > oom_base) {
    exit->oom = true;
    HERD_LOG_WARN("run {}: the OOM killer killed {} process(es) in it (limit {})", id, s->oom_kills - oom_base,
                  Mi(run.spec.resources().memory_bytes()));
  }
  // The shim killed the task's process group and its orphans; anything
  // else still in the group (it left both) dies with the attempt too.
  if (!driver_->Pids(group).empty()) {
    if (absl::Status st = driver_->Kill(group, 200); !st.ok()) HERD_LOG_WARN("run {}: {}", id, st.ToString());
  }
}

bool CgroupExtension::KillAll(const RunView& run) {
  if (!driver_) return false;
  std::string group = GroupOf(run.spec);
  if (!driver_->Exists(group)) return false;
  absl::Status st = driver_->Kill(group, 200);
  if (!st.ok()) HERD_LOG_WARN("run {}: killing cgroup {}: {}", run.spec.run_id(), group, st.ToString());
  return true;
}

void CgroupExtension::Released(const RunView& run) {
  if (!driver_) return;
  std::vector<std::string> groups = {GroupOf(run.spec)};
  // An alloc's envelope goes after its placeholder (and after the tasks in
  // it, which the master stops with it: until then, later ticks retry).
  if (run.spec.alloc()) groups.push_back(EnvelopeOf(run.spec));
  std::vector<std::string> later;
  for (const std::string& group : groups) {
    absl::Status st;
    // The last processes may still be exiting: a few short tries here, then
    // again on later ticks.
    for (int i = 0; i < 5; ++i) {
      st = driver_->Remove(group);
      if (st.ok()) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    if (!st.ok()) later.push_back(group);
  }
  // After the groups went: the pool is written to the groups that remain.
  if (cpu_) cpu_->Release(run.spec.run_id(), run.dir);
  absl::MutexLock l(&mu_);
  runs_.erase(run.spec.run_id());
  evicting_.erase(run.spec.run_id());
  allocs_.erase(run.spec.run_id());
  remove_later_.insert(later.begin(), later.end());
}

void CgroupExtension::Describe(const RunView& run, v1::RunStatus* status) const {
  if (cpu_) cpu_->Describe(run.spec.run_id(), status);
  absl::MutexLock l(&mu_);
  auto it = runs_.find(run.spec.run_id());
  if (it != runs_.end() && it->second.usage.sampled_ms() > 0) *status->mutable_usage() = it->second.usage;
}

void CgroupExtension::DescribeMachine(v1::PollResponse* response) const {
  response->set_cgroup_version(version());
  absl::MutexLock l(&mu_);
  if (machine_.sampled_ms() > 0) *response->mutable_machine_usage() = machine_;
  if (interference_.level() != InterferenceController::Level::kNone) {
    response->mutable_interference()->set_level(InterferenceController::LevelName(interference_.level()));
    response->mutable_interference()->set_reason(interference_.reason());
  }
}

void CgroupExtension::Tick(const std::vector<RunView>& runs) {
  const int64_t now = options_.clock->MonotonicMs();
  bool clean = false;
  {
    absl::MutexLock l(&mu_);
    clean = !std::exchange(cleaned_, true);
  }
  if (clean && driver_) RemoveStaleGroups(runs);
  // Cores of runs that ended go back, runs waiting for cores get them; on
  // the first tick, the shared groups get the pool the recovered runs left.
  if (cpu_) cpu_->Tick(runs, clean);
  absl::MutexLock l(&mu_);
  for (auto it = remove_later_.begin(); it != remove_later_.end();) {
    it = driver_ && !driver_->Remove(*it).ok() ? std::next(it) : remove_later_.erase(it);
  }
  if (now >= next_control_mono_ms_) {
    next_control_mono_ms_ = now + std::max<int64_t>(1, options_.control_interval_ms);
    ControlLocked(runs, now);
  }
  if (now < next_sample_mono_ms_) return;
  next_sample_mono_ms_ = now + std::max<int64_t>(1, options_.usage_interval_ms);
  SampleRunsLocked(runs, now);
  SampleMachineLocked(now);
  EvictLocked(runs, now);
  EnforceDiskLocked(runs, now);
}

void CgroupExtension::RemoveStaleGroups(const std::vector<RunView>& runs) {
  // After recovery: groups under our directory that no known run owns were
  // left by runs forgotten while no agent ran (or by a crash mid-Released).
  std::set<std::string> known;
  for (const RunView& r : runs) known.insert(r.spec.alloc() ? EnvelopeOf(r.spec) : GroupOf(r.spec));
  for (const std::string& cls : {std::string("ls"), std::string("batch")}) {
    const std::string parent = absl::StrCat(AgentGroup(), "/", cls);
    for (const std::string& child : driver_->Children(parent)) {
      const std::string group = absl::StrCat(parent, "/", child);
      if (known.contains(group)) continue;
      if (!driver_->Pids(group).empty()) {
        HERD_LOG_WARN("stale cgroup {} still has processes (no run owns them): killing them", group);
        (void)driver_->Kill(group, 200);
      }
      absl::Status st = driver_->Remove(group);
      HERD_LOG_INFO("removed stale cgroup {}{}", group, st.ok() ? "" : " failed: " + st.ToString());
      if (!st.ok()) {
        absl::MutexLock l(&mu_);
        remove_later_.insert(group);
      }
    }
  }
}

void CgroupExtension::SampleRunsLocked(const std::vector<RunView>& runs, int64_t now) {
  if (!driver_) return;
  const int64_t wall = options_.clock->NowMs();
  for (const RunView& r : runs) {
    auto it = runs_.find(r.spec.run_id());
    if (it == runs_.end() || it->second.group.empty()) continue;
    RunInfo& info = it->second;
    if (r.phase != v1::Task::ACTIVE && r.phase != v1::Task::STOPPING) {
      info.have_sample = false;
      continue;
    }
    absl::StatusOr<CgroupSample> s = driver_->Sample(info.group);
    if (!s.ok()) continue;
    if (info.have_sample && now > info.last_mono_ms && s->cpu_usage_ns >= info.last.cpu_usage_ns) {
      // ns of CPU per ms of wall time / 1000 = millicores.
      info.usage.set_cpu_millis((s->cpu_usage_ns - info.last.cpu_usage_ns) / (now - info.last_mono_ms) / 1000);
    }
    info.usage.set_memory_rss_bytes(s->memory_rss_bytes);
    info.usage.set_memory_working_set_bytes(s->memory_working_set_bytes);
    if (info.disk_mono_ms == 0 || now - info.disk_mono_ms >= options_.disk_interval_ms) {
      info.usage.set_disk_bytes(DirBytes(r.dir.path()));
      info.disk_mono_ms = now;
      info.disk_sampled = true;
    }
    info.usage.set_sampled_ms(wall);
    info.last = *s;
    info.last_mono_ms = now;
    info.have_sample = true;
  }
}

void CgroupExtension::ControlLocked(const std::vector<RunView>& runs, int64_t now) {
  if (!driver_ || !options_.colocation) return;
  // ls/ as a whole: its CPU and memory for the box, its pressure (v2) for
  // interference.
  absl::StatusOr<CgroupSample> ls = driver_->Sample(AgentGroup() + "/ls");
  if (!ls.ok()) return;
  InterferenceSample signals = InterferenceSignalsLocked(runs, *ls, now);
  // Batch busy enough to be the cause (InterferenceOptions::batch_busy_share).
  if (absl::StatusOr<CgroupSample> b = driver_->Sample(BatchGroup()); b.ok()) {
    if (batch_mono_ms_ > 0 && now > batch_mono_ms_ && options_.batch_box_cpu_millis > 0) {
      const double millis = static_cast<double>(std::max<int64_t>(0, b->cpu_usage_ns - batch_cpu_ns_)) /
                            static_cast<double>(now - batch_mono_ms_) / 1000;
      signals.batch_busy =
          millis >= options_.interference.batch_busy_share * static_cast<double>(options_.batch_box_cpu_millis);
    } else {
      signals.batch_busy = true;  // unknown: assume it may be
    }
    batch_cpu_ns_ = b->cpu_usage_ns;
    batch_mono_ms_ = now;
  }
  const InterferenceController::Level was = interference_.level();
  InterferenceController::Decision d = interference_.Observe(signals);
  if (d.changed) {
    if (d.level > was) {
      HERD_LOG_WARN("interference: {} -> {}: {} (batch box x{:.3f})", InterferenceController::LevelName(was),
                    InterferenceController::LevelName(d.level), d.reason, d.box_factor);
    } else {
      HERD_LOG_INFO("interference: {} -> {} (calm)", InterferenceController::LevelName(was),
                    InterferenceController::LevelName(d.level));
    }
  }
  ResizeBatchBoxLocked(runs, *ls, now, d.box_factor);
  ls_last_ = *ls;
  ls_mono_ms_ = now;
  ++control_steps_;
  if (d.evict_one) EvictForInterferenceLocked(runs, d.reason);
}

InterferenceSample CgroupExtension::InterferenceSignalsLocked(const std::vector<RunView>& runs,
                                                              const CgroupSample& ls, int64_t now) {
  InterferenceSample out;
  out.now_ms = now;
  if (ls_mono_ms_ > 0 && now > ls_mono_ms_ && ls.cpu_pressure_some_us >= 0 && ls_last_.cpu_pressure_some_us >= 0) {
    out.pressure_share =
        static_cast<double>(std::max<int64_t>(0, ls.cpu_pressure_some_us - ls_last_.cpu_pressure_some_us)) /
        (static_cast<double>(now - ls_mono_ms_) * 1000);
  }
  if (!options_.interference.enabled) return out;
  if (options_.slow_checks) {
    // A slow health check of a latency-sensitive run (not of batch).
    auto [run, ms] = options_.slow_checks->Slowest();
    for (const RunView& r : runs) {
      if (r.spec.run_id() == run && !IsBatch(r.spec) && r.phase == v1::Task::ACTIVE) {
        out.slow_run = run;
        out.slow_ms = ms;
        break;
      }
    }
  }
  for (const RunView& r : runs) {
    if (IsBatch(r.spec) || r.phase != v1::Task::ACTIVE) continue;
    auto it = runs_.find(r.spec.run_id());
    if (it == runs_.end() || it->second.group.empty()) continue;
    RunInfo& info = it->second;
    absl::StatusOr<CgroupSample> s = driver_->Sample(info.group);
    if (!s.ok()) continue;
    const int64_t delay = RunQueueDelayNs(driver_->Pids(info.group));
    if (info.ctl_mono_ms > 0 && now > info.ctl_mono_ms) {
      const double wall_ns = static_cast<double>(now - info.ctl_mono_ms) * 1e6;
      double throttled = 0;
      if (const int64_t periods = s->cpu_periods - info.ctl_periods; periods > 0) {
        throttled = static_cast<double>(std::max<int64_t>(0, s->cpu_throttled_periods - info.ctl_throttled)) /
                    static_cast<double>(periods);
      }
      if (throttled > out.throttled_share) {
        out.throttled_share = throttled;
        out.throttled_run = r.spec.run_id();
      }
      // Throttled by its own quota, its threads count as waiting (and wait
      // more after each throttle): its delay says nothing about batch. Nor
      // does a pinned run's: batch never runs on its CPUs, so what it waits
      // for is its own threads (or processes Herd does not run).
      const bool pinned = cpu_ != nullptr && !cpu_->CpusetOf(r.spec.run_id()).empty();
      if (throttled <= kThrottledIgnoresDelay && !pinned) {
        const int64_t waited = delay - info.ctl_delay_ns - (s->cpu_throttled_ns - info.ctl_throttled_ns);
        const double delay_share = static_cast<double>(std::max<int64_t>(0, waited)) / wall_ns;
        if (delay_share > out.runq_delay_share) {
          out.runq_delay_share = delay_share;
          out.delay_run = r.spec.run_id();
        }
      }
    }
    info.ctl_mono_ms = now;
    info.ctl_periods = s->cpu_periods;
    info.ctl_throttled = s->cpu_throttled_periods;
    info.ctl_delay_ns = delay;
    info.ctl_throttled_ns = s->cpu_throttled_ns;
  }
  return out;
}

void CgroupExtension::ResizeBatchBoxLocked(const std::vector<RunView>& runs, const CgroupSample& ls, int64_t now,
                                           double factor) {
  const int64_t cap_cpu = options_.batch_box_cpu_millis;
  if (cap_cpu <= 0 || ls_mono_ms_ == 0 || now <= ls_mono_ms_) return;  // a rate needs two readings
  // ns of CPU per ms of wall time / 1000 = millicores.
  const double cpu =
      static_cast<double>(std::max<int64_t>(0, ls.cpu_usage_ns - ls_last_.cpu_usage_ns)) /
      static_cast<double>(now - ls_mono_ms_) / 1000;
  const double memory = static_cast<double>(ls.memory_working_set_bytes);
  // Up at once, down by half-lives.
  const double keep = box_mono_ms_ == 0 || options_.batch_box_half_life_ms <= 0
                          ? 0.0
                          : std::exp2(-static_cast<double>(now - box_mono_ms_) / options_.batch_box_half_life_ms);
  auto follow = [keep](double& predicted, double used) {
    predicted = used >= predicted ? used : used + (predicted - used) * keep;
  };
  follow(ls_cpu_, cpu);
  follow(ls_memory_, memory);
  box_mono_ms_ = now;
  const double margin = std::clamp(options_.batch_box_margin, 0.0, 0.9);
  const int64_t floor_cpu = cap_cpu / 20;
  int64_t want_cpu = std::max<int64_t>(
      floor_cpu,
      std::llround(factor * static_cast<double>(cap_cpu - std::llround(ls_cpu_) -
                                                std::llround(margin * static_cast<double>(cap_cpu)))));
  const int64_t cap_mem = options_.batch_box_memory_bytes;
  const int64_t want_mem =
      cap_mem <= 0 ? 0
                   : std::max<int64_t>(64ll << 20, cap_mem - std::llround(ls_memory_) -
                                                       std::llround(margin * static_cast<double>(cap_mem)));
  // Smaller at once; larger once it moved by 2% of the capacity.
  auto changed = [](int64_t was, int64_t now_v, int64_t cap) {
    return was < 0 || now_v < was || now_v - was >= cap / 50;
  };
  if (!changed(box_cpu_, want_cpu, cap_cpu) && !(cap_mem > 0 && changed(box_memory_, want_mem, cap_mem))) return;
  want_cpu = std::max(want_cpu, FitBatchChildrenLocked(runs, want_cpu, /*before=*/true));
  CgroupLimits l;
  l.cpu_quota_millis = want_cpu;
  if (cap_mem > 0) l.memory_bytes = want_mem;
  if (absl::Status st = driver_->SetLimits(BatchGroup(), l); !st.ok()) {
    HERD_LOG_WARN("batch box: {}", st.ToString());
    return;
  }
  FitBatchChildrenLocked(runs, want_cpu, /*before=*/false);
  if (box_cpu_ < 0 || std::abs(want_cpu - box_cpu_) >= cap_cpu / 10) {
    HERD_LOG_INFO("batch box: cpu {}m (latency-sensitive use {}m predicted{}){}", want_cpu, std::llround(ls_cpu_),
                  factor < 1 ? absl::StrCat(", interference x", factor) : "",
                  cap_mem > 0 ? absl::StrCat(", memory ", Mi(want_mem)) : "");
  }
  box_cpu_ = want_cpu;
  box_memory_ = want_mem;
}

void CgroupExtension::EvictForInterferenceLocked(const std::vector<RunView>& runs, const std::string& reason) {
  if (!control_) return;
  // The lowest-priority batch run; among equals the one that uses the most CPU.
  const RunView* victim = nullptr;
  int64_t victim_cpu = -1;
  for (const RunView& r : runs) {
    if (!IsBatch(r.spec) || IsProd(r.spec.priority()) || r.phase != v1::Task::ACTIVE || !r.desired ||
        evicting_.contains(r.spec.run_id())) {
      continue;
    }
    auto it = runs_.find(r.spec.run_id());
    const int64_t cpu = it == runs_.end() ? 0 : it->second.usage.cpu_millis();
    if (victim == nullptr || r.spec.priority() < victim->spec.priority() ||
        (r.spec.priority() == victim->spec.priority() && cpu > victim_cpu)) {
      victim = &r;
      victim_cpu = cpu;
    }
  }
  if (victim == nullptr) {
    HERD_LOG_WARN("interference ({}) and no batch run left to evict", reason);
    return;
  }
  const std::string id = victim->spec.run_id();
  evicting_.insert(id);
  control_->KillAttempt(id, absl::StrCat("evicted: interference with latency-sensitive work (", reason, ")"),
                        /*evict=*/true);
}

void CgroupExtension::SampleMachineLocked(int64_t now) {
  // Whole-machine figures from /proc (not the sum of the runs): what the
  // master compares with capacity includes the system and the agent.
  int64_t busy = MachineBusyTicks();
  if (busy >= 0) {
    if (cpu_busy_ticks_ >= 0 && now > cpu_mono_ms_) {
      static const int64_t hz = std::max<long>(1, sysconf(_SC_CLK_TCK));
      machine_.set_cpu_millis((busy - cpu_busy_ticks_) * 1000 * 1000 / hz / (now - cpu_mono_ms_));
    }
    cpu_busy_ticks_ = busy;
    cpu_mono_ms_ = now;
  }
  MachineMemory m = ReadMachineMemory();
  if (m.total_bytes >= 0 && m.available_bytes >= 0) {
    machine_.set_memory_working_set_bytes(m.total_bytes - m.available_bytes);
    machine_.set_memory_rss_bytes(
        std::max<int64_t>(0, m.total_bytes - m.free_bytes - std::max<int64_t>(0, m.buffers_bytes) -
                                 std::max<int64_t>(0, m.cached_bytes)));
  }
  int64_t disk = 0;
  for (const auto& [id, info] : runs_) disk += info.usage.disk_bytes();
  machine_.set_disk_bytes(disk);
  machine_.set_sampled_ms(options_.clock->NowMs());
}

void CgroupExtension::EvictLocked(const std::vector<RunView>& runs, int64_t now) {
  if (!control_ || now < evict_hold_until_ms_) return;
  std::vector<EvictionCandidate> candidates;
  int64_t usage = 0;
  for (const RunView& r : runs) {
    if (r.phase != v1::Task::ACTIVE || !r.desired || evicting_.contains(r.spec.run_id())) continue;
    int64_t mem = r.spec.resources().memory_bytes();  // without cgroups: what it asked for
    auto it = runs_.find(r.spec.run_id());
    if (it != runs_.end() && it->second.usage.sampled_ms() > 0) mem = it->second.usage.memory_working_set_bytes();
    usage += mem;
    candidates.push_back({r.spec.run_id(), r.spec.priority(), mem});
  }
  MachineMemory m = options_.machine_memory();
  int64_t shortfall =
      MemoryShortfall(m.available_bytes, options_.memory_reserve_bytes, options_.capacity_memory_bytes, usage);
  if (shortfall <= 0) return;
  std::vector<std::string> victims = ChooseEvictions(candidates, shortfall);
  if (victims.empty()) {
    HERD_LOG_WARN("machine short of {} of memory and only prod runs are left: evicting nothing", Mi(shortfall));
    evict_hold_until_ms_ = now + options_.eviction_hold_ms;
    return;
  }
  const std::string why = absl::StrCat("evicted: machine out of memory (", Mi(shortfall), " short; available ",
                                       Mi(m.available_bytes), ", reserve ", Mi(options_.memory_reserve_bytes), ")");
  for (const std::string& id : victims) {
    evicting_.insert(id);
    control_->KillAttempt(id, why, /*evict=*/true);
  }
  evict_hold_until_ms_ = now + options_.eviction_hold_ms;
}

void CgroupExtension::EnforceDiskLocked(const std::vector<RunView>& runs, int64_t now) {
  if (!control_) return;
  struct Candidate {
    std::string id;
    int32_t priority;
    int64_t disk;
  };
  std::vector<Candidate> candidates;
  for (const RunView& r : runs) {
    if (r.phase != v1::Task::ACTIVE || !r.desired || evicting_.contains(r.spec.run_id())) continue;
    auto it = runs_.find(r.spec.run_id());
    if (it == runs_.end() || !it->second.disk_sampled) continue;
    const int64_t used = it->second.usage.disk_bytes();
    const int64_t limit = r.spec.resources().disk_bytes();
    if (limit > 0 && used > limit) {
      evicting_.insert(r.spec.run_id());
      control_->KillAttempt(r.spec.run_id(),
                            absl::StrCat("evicted: its sandbox and logs use ", Mi(used), ", over its disk limit of ",
                                         Mi(limit)),
                            /*evict=*/true);
      continue;
    }
    candidates.push_back({r.spec.run_id(), r.spec.priority(), used});
  }
  if (options_.disk_reserve_bytes <= 0 || candidates.empty() || now < disk_reserve_next_ms_) return;
  const int64_t free = options_.disk_free ? options_.disk_free() : FreeBytesOf(options_.owner_dir);
  if (free < 0 || free >= options_.disk_reserve_bytes) return;
  // The lowest priority first, then the most disk: one per disk interval
  // (the next walk shows what that freed).
  const Candidate& victim = *std::min_element(candidates.begin(), candidates.end(), [](const auto& a, const auto& b) {
    return a.priority != b.priority ? a.priority < b.priority : a.disk > b.disk;
  });
  evicting_.insert(victim.id);
  control_->KillAttempt(victim.id,
                        absl::StrCat("evicted: the machine's disk has ", Mi(free), " free, below the agent's reserve of ",
                                     Mi(options_.disk_reserve_bytes), " (this task used ", Mi(victim.disk), ")"),
                        /*evict=*/true);
  disk_reserve_next_ms_ = now + std::max(options_.disk_interval_ms, options_.eviction_hold_ms);
}

int KillAgentGroups(const CgroupOptions& o) {
  if (o.root == "none") return 0;
  absl::StatusOr<std::unique_ptr<CgroupDriver>> driver = OpenCgroupDriver(o.root, o.clock);
  if (!driver.ok()) return 0;
  const std::string agent = CgroupExtension::AgentGroupOf(o);
  int killed = 0;
  for (const char* cls : {"/ls", "/batch"}) {
    for (const std::string& run : (*driver)->Children(agent + cls)) {
      const std::string group = absl::StrCat(agent, cls, "/", run);
      const size_t pids = (*driver)->Pids(group).size();
      if (pids == 0) continue;
      killed += static_cast<int>(pids);
      if (absl::Status st = (*driver)->Kill(group, 1000); !st.ok()) HERD_LOG_WARN("{}: {}", group, st.ToString());
    }
  }
  return killed;
}

}  // namespace herd::agent
