#include "agent/cgroup/cpu_manager.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

#include <algorithm>
#include <functional>
#include <set>

#include "absl/strings/str_cat.h"
#include "agent/runtime/process.h"
#include "base/log.h"

namespace herd::agent {
namespace {

bool Includes(const CpuSet& big, const CpuSet& small) {
  return std::includes(big.begin(), big.end(), small.begin(), small.end());
}

}  // namespace

std::unique_ptr<CpuManager> CpuManager::Create(CgroupDriver* driver, std::string ls_group, std::string batch_group,
                                               const Options& options) {
  absl::StatusOr<CpuTopology> topo = ReadCpuTopology(options.sys_root);
  if (!topo.ok()) {
    HERD_LOG_INFO("cpu pinning off: no CPU topology ({})", topo.status().ToString());
    return nullptr;
  }
  if (static_cast<int>(topo->cpus.size()) <= std::max(1, options.min_shared_cpus)) {
    HERD_LOG_INFO("cpu pinning off: {} CPUs, none to spare beside the shared pool", topo->cpus.size());
    return nullptr;
  }
  // Last, so that nothing changes in the cgroups when pinning is off.
  if (absl::Status st = driver->EnableCpuset(); !st.ok()) {
    HERD_LOG_INFO("cpu pinning off: no cpuset controller ({})", st.ToString());
    return nullptr;
  }
  HERD_LOG_INFO("cpu pinning on: {}", topo->Summary());
  return std::unique_ptr<CpuManager>(
      new CpuManager(driver, std::move(ls_group), std::move(batch_group), *std::move(topo), options));
}

CpuManager::CpuManager(CgroupDriver* driver, std::string ls_group, std::string batch_group, CpuTopology topo,
                       const Options& options)
    : driver_(driver),
      ls_group_(std::move(ls_group)),
      batch_group_(std::move(batch_group)),
      topo_(topo),
      all_mems_(FormatCpuList(topo.memory_nodes)),
      alloc_(std::move(topo), options.min_shared_cpus) {}

int CpuManager::WantedCpus(const v1::TaskRun& spec, bool batch) {
  const int64_t millis = spec.resources().cpu_millis();
  if (batch || spec.alloc() || !spec.alloc_run_id().empty()) return 0;
  if (millis < 1000 || millis % 1000 != 0) return 0;
  return static_cast<int>(std::min<int64_t>(millis / 1000, 1 << 16));
}

void CpuManager::Recover(const v1::TaskRun& spec, int wanted, const RunDir& dir, const std::string& group) {
  const std::string& id = spec.run_id();
  absl::MutexLock l(&mu_);
  RunInfo& info = runs_[id];
  info.wanted = wanted;
  info.group = group;
  info.dir = dir.path();
  if (wanted == 0) {
    Persist(id, info);  // a record from a larger earlier size
    return;
  }
  absl::StatusOr<std::string> text = ReadSmallFile(dir.File(kRunDirFile));
  if (text.ok()) {
    absl::StatusOr<CpuAssignment> a = DecodeCpuAssignment(*text);
    absl::Status st = a.ok() ? absl::OkStatus() : a.status();
    if (st.ok() && static_cast<int>(a->cpus.size()) != wanted) {
      st = absl::FailedPreconditionError(absl::StrCat("it records ", a->cpus.size(), " CPUs, the run wants ", wanted));
    }
    if (st.ok()) st = alloc_.Claim(id, *a);
    if (st.ok()) {
      HERD_LOG_INFO("run {}: keeps CPUs {}", id, FormatCpuList(a->cpus));
      return;
    }
    HERD_LOG_WARN("run {}: cannot keep its CPUs ({}): shared until cores are free", id, st.ToString());
  }
  // Shared before the restart, or its record is no longer valid: it waits
  // for cores (from the first Tick on).
  info.note = "cpu pinning: waiting for free whole cores; running on the shared CPUs";
  info.waiting_since = ++wait_seq_;
  Persist(id, info);
}

absl::Status CpuManager::Prepare(const v1::TaskRun& spec, int wanted, const RunDir& dir, const std::string& group) {
  const std::string& id = spec.run_id();
  absl::MutexLock l(&mu_);
  RunInfo& info = runs_[id];
  info.wanted = wanted;
  info.group = group;
  info.dir = dir.path();
  bool changed = false;
  if (const CpuAssignment* a = alloc_.Find(id); a != nullptr && static_cast<int>(a->cpus.size()) != wanted) {
    alloc_.Release(id);
    changed = true;
  }
  if (wanted == 0) {
    info.note.clear();
    info.waiting_since = 0;
    Persist(id, info);
  } else if (alloc_.Find(id) == nullptr) {
    changed |= AssignLocked(id, info);
  }
  // A new attempt's group is fresh (v1: with its parent's CPUs): it gets its
  // CPUs before the task joins. Never a reason to fail the attempt: at worst
  // the task runs on its parent's CPUs.
  if (absl::Status st = WriteRunLocked(id, info); !st.ok()) {
    HERD_LOG_WARN("run {}: cannot set its cpuset: {}", id, st.ToString());
  }
  if (changed) ApplySharedPoolLocked();
  return absl::OkStatus();
}

void CpuManager::Update(const v1::TaskRun& spec, int wanted, const RunDir& dir, const std::string& group) {
  const std::string& id = spec.run_id();
  absl::MutexLock l(&mu_);
  RunInfo& info = runs_[id];
  info.group = group;
  info.dir = dir.path();
  const CpuAssignment* a = alloc_.Find(id);
  const bool held = a != nullptr;
  if (held && static_cast<int>(a->cpus.size()) == wanted) return;  // its set fits the new size
  if (!held && wanted == info.wanted) return;                        // still shared, for the same reason
  if (!held && wanted == 0) {                                        // shared, and no longer waits
    info.wanted = 0;
    info.note.clear();
    info.waiting_since = 0;
    return;
  }
  info.wanted = wanted;
  if (held) alloc_.Release(id);
  info.note.clear();
  info.waiting_since = 0;
  if (wanted > 0) {
    AssignLocked(id, info);
  } else {
    Persist(id, info);
  }
  if (driver_->Exists(group)) {
    if (absl::Status st = WriteRunLocked(id, info); !st.ok()) {
      HERD_LOG_WARN("run {}: cannot set its cpuset: {}", id, st.ToString());
    }
  }
  ApplySharedPoolLocked();
}

void CpuManager::Release(const std::string& run_id, const RunDir& dir) {
  absl::MutexLock l(&mu_);
  auto it = runs_.find(run_id);
  if (it == runs_.end()) return;
  const bool held = alloc_.Find(run_id) != nullptr;
  alloc_.Release(run_id);
  it->second.note.clear();
  Persist(run_id, it->second);  // removes the record
  runs_.erase(it);
  if (!held) return;
  HERD_LOG_INFO("run {}: its CPUs are back in the shared pool", run_id);
  ApplySharedPoolLocked();
}

void CpuManager::Tick(const std::vector<RunView>& runs, bool first) {
  absl::MutexLock l(&mu_);
  bool changed = first;
  std::set<std::string> wanted;
  for (const RunView& r : runs) {
    const std::string& id = r.spec.run_id();
    if (r.phase == v1::Task::EXITED) {
      // Over for good: its cores need not wait for the master to forget it.
      auto it = runs_.find(id);
      if (it == runs_.end()) continue;
      const bool held = alloc_.Find(id) != nullptr;
      if (!held && it->second.waiting_since == 0 && it->second.note.empty()) continue;  // done before
      alloc_.Release(id);
      it->second.note.clear();
      it->second.waiting_since = 0;
      Persist(id, it->second);
      if (held) {
        HERD_LOG_INFO("run {}: ended; its CPUs are back in the shared pool", id);
        changed = true;
      }
    } else if (r.desired) {
      wanted.insert(id);
    }
  }
  changed |= PromoteWaitingLocked(wanted);
  if (changed) ApplySharedPoolLocked();
}

void CpuManager::SetShared(const std::string& group) {
  absl::MutexLock l(&mu_);
  if (absl::Status st = driver_->SetCpuset(group, FormatCpuList(alloc_.SharedPool()), all_mems_); !st.ok()) {
    HERD_LOG_WARN("cpuset of {}: {}", group, st.ToString());
  }
}

bool CpuManager::AssignLocked(const std::string& id, RunInfo& info) {
  absl::StatusOr<CpuAssignment> a = alloc_.Allocate(id, info.wanted);
  if (!a.ok()) {
    const std::string note = absl::StrCat("cpu pinning: ", a.status().message(), "; running on the shared CPUs");
    if (info.note != note) HERD_LOG_INFO("run {}: {}", id, note);
    info.note = note;
    if (info.waiting_since == 0) info.waiting_since = ++wait_seq_;
    Persist(id, info);
    return false;
  }
  info.note.clear();
  info.waiting_since = 0;
  Persist(id, info);
  HERD_LOG_INFO("run {}: pinned to CPUs {} (memory nodes {}); shared pool now {}", id, FormatCpuList(a->cpus),
                FormatCpuList(a->mems), FormatCpuList(alloc_.SharedPool()));
  return true;
}

bool CpuManager::PromoteWaitingLocked(const std::set<std::string>& wanted) {
  std::vector<std::pair<uint64_t, std::string>> waiting;
  for (const auto& [id, info] : runs_) {
    if (info.waiting_since > 0 && info.wanted > 0 && alloc_.Find(id) == nullptr && wanted.contains(id)) {
      waiting.emplace_back(info.waiting_since, id);
    }
  }
  std::sort(waiting.begin(), waiting.end());
  bool any = false;
  for (const auto& [since, id] : waiting) {
    RunInfo& info = runs_[id];
    if (!AssignLocked(id, info)) continue;
    any = true;
    // A running task moves onto its cores now (the kernel migrates it).
    if (!info.group.empty() && driver_->Exists(info.group)) {
      if (absl::Status st = WriteRunLocked(id, info); !st.ok()) {
        HERD_LOG_WARN("run {}: cannot set its cpuset: {}", id, st.ToString());
      }
    }
  }
  return any;
}

absl::Status CpuManager::WriteRunLocked(const std::string& id, const RunInfo& info) {
  if (info.group.empty()) return absl::OkStatus();
  if (const CpuAssignment* a = alloc_.Find(id); a != nullptr) {
    // Its memory where its CPUs are (any memory node if theirs has none).
    CpuSet mems;
    for (int n : a->mems) {
      if (topo_.memory_nodes.contains(n)) mems.insert(n);
    }
    return driver_->SetCpuset(info.group, FormatCpuList(a->cpus), mems.empty() ? all_mems_ : FormatCpuList(mems));
  }
  return driver_->SetCpuset(info.group, FormatCpuList(alloc_.SharedPool()), all_mems_);
}

void CpuManager::ApplySharedPoolLocked() {
  const CpuSet pool = alloc_.SharedPool();
  std::set<std::string> exclusive;
  for (const auto& [id, info] : runs_) {
    if (alloc_.Find(id) != nullptr && !info.group.empty()) exclusive.insert(info.group);
  }
  // Every shared group, parents before their children: batch/ and all
  // under it, and what is under ls/ but the exclusive runs' groups.
  std::vector<std::string> groups = {batch_group_};
  std::function<void(const std::string&)> walk = [&](const std::string& parent) {
    for (const std::string& name : driver_->Children(parent)) {
      const std::string child = absl::StrCat(parent, "/", name);
      if (exclusive.contains(child)) continue;
      groups.push_back(child);
      walk(child);
    }
  };
  walk(batch_group_);
  walk(ls_group_);
  // v1 wants a parent's CPUs to hold its children's at every step: first
  // widen where the pool has CPUs a group lacks (parents first), then
  // narrow to the pool (children first). v2 has no such rule; the same
  // steps do no harm there.
  std::vector<CpuSet> now(groups.size());
  const bool several_nodes = topo_.memory_nodes.size() > 1;
  for (size_t i = 0; i < groups.size(); ++i) {
    absl::StatusOr<std::string> text = driver_->Cpuset(groups[i]);
    absl::StatusOr<CpuSet> cur = text.ok() ? ParseCpuList(*text) : text.status();
    if (!cur.ok()) {
      groups[i].clear();  // not a cpuset (made before pinning was on) or gone
      continue;
    }
    now[i] = *cur;
    if (Includes(now[i], pool)) continue;
    CpuSet wide = now[i];
    wide.insert(pool.begin(), pool.end());
    if (absl::Status st = driver_->SetCpuset(groups[i], FormatCpuList(wide), several_nodes ? all_mems_ : "");
        !st.ok()) {
      HERD_LOG_WARN("cpuset of {}: {}", groups[i], st.ToString());
      continue;
    }
    now[i] = std::move(wide);
  }
  for (size_t i = groups.size(); i-- > 0;) {
    if (groups[i].empty() || now[i] == pool) continue;
    if (absl::Status st = driver_->SetCpuset(groups[i], FormatCpuList(pool), several_nodes ? all_mems_ : "");
        !st.ok()) {
      HERD_LOG_WARN("cpuset of {}: {}", groups[i], st.ToString());
    }
  }
}

void CpuManager::Persist(const std::string& id, const RunInfo& info) const {
  if (info.dir.empty()) return;
  const std::string path = RunDir(info.dir).File(kRunDirFile);
  if (const CpuAssignment* a = alloc_.Find(id); a != nullptr) {
    if (absl::Status st = WriteFileAtomic(path, EncodeCpuAssignment(*a)); !st.ok()) {
      HERD_LOG_WARN("run {}: cannot record its CPUs: {}", id, st.ToString());
    }
  } else if (unlink(path.c_str()) != 0 && errno != ENOENT) {
    HERD_LOG_WARN("run {}: cannot remove {}: {}", id, path, strerror(errno));
  }
}

std::string CpuManager::CpusetOf(const std::string& run_id) const {
  absl::MutexLock l(&mu_);
  const CpuAssignment* a = alloc_.Find(run_id);
  return a == nullptr ? "" : FormatCpuList(a->cpus);
}

void CpuManager::Describe(const std::string& run_id, v1::RunStatus* status) const {
  absl::MutexLock l(&mu_);
  if (const CpuAssignment* a = alloc_.Find(run_id); a != nullptr) status->set_cpuset(FormatCpuList(a->cpus));
  auto it = runs_.find(run_id);
  if (it == runs_.end() || it->second.note.empty()) return;
  status->set_message(status->message().empty() ? it->second.note
                                                : absl::StrCat(status->message(), "; ", it->second.note));
}

std::string CpuManager::SharedPool() const {
  absl::MutexLock l(&mu_);
  return FormatCpuList(alloc_.SharedPool());
}

}  // namespace herd::agent
