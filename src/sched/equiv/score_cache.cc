#include "sched/equiv/score_cache.h"

#include "base/priority.h"

namespace herd::sched {

const Diagnosis* ScoreCache::StillFailing(const Key& key, const cell::CellState& state, int32_t priority,
                                          bool may_preempt, uint64_t pass) {
  auto it = failed_.find(key);
  if (it == failed_.end()) return nullptr;
  const int64_t at = it->second.revision;
  bool valid = state.freed_revision() <= at;
  if (valid && may_preempt) {
    for (int32_t p = 0; p < priority && valid; ++p) {
      if (MayPreempt(priority, p) && state.placed_revision(p) > at) valid = false;
    }
  }
  if (!valid) {
    failed_.erase(it);
    return nullptr;
  }
  it->second.pass = pass;
  return &it->second.why;
}

std::vector<ScoreCache::Entry> ScoreCache::Candidates(const Key& key, const std::vector<MachineView>& views) const {
  std::vector<Entry> out;
  auto it = kept_.find(key);
  if (it == kept_.end() || it->second.machines != views.size()) return out;
  for (const Entry& e : it->second.entries) {
    if (views[e.machine].machine->state_revision() == e.machine_revision) out.push_back(e);
  }
  return out;
}

void ScoreCache::Failed(const Key& key, int64_t revision, const Diagnosis& why, uint64_t pass) {
  Failure& f = failed_[key];
  if (f.pass != pass || f.revision == 0) {
    f.revision = revision;
    f.why = why;
  }
  f.pass = pass;
}

void ScoreCache::Keep(const Key& key, std::vector<Entry> entries, size_t machines, uint64_t pass) {
  Kept& k = kept_[key];
  total_entries_ -= k.entries.size();
  k.entries = std::move(entries);
  k.machines = machines;
  k.pass = pass;
  total_entries_ += k.entries.size();
}

void ScoreCache::Expire(uint64_t pass) {
  for (auto it = failed_.begin(); it != failed_.end();) {
    if (it->second.pass + kForgetAfterPasses < pass) {
      failed_.erase(it++);
    } else {
      ++it;
    }
  }
  for (auto it = kept_.begin(); it != kept_.end();) {
    if (it->second.pass + kForgetAfterPasses < pass || (total_entries_ > kMaxEntries && it->second.pass < pass)) {
      total_entries_ -= it->second.entries.size();
      kept_.erase(it++);
    } else {
      ++it;
    }
  }
}

}  // namespace herd::sched
