#include "master/core/why_store.h"

namespace herd::master {

void WhyStore::Record(const absl::flat_hash_set<std::string>& jobs,
                      const std::vector<v1::PendingDiagnosis>& diagnoses) {
  absl::MutexLock l(&mu_);
  for (const std::string& job : jobs) by_job_.erase(job);
  for (const v1::PendingDiagnosis& d : diagnoses) by_job_[d.job()].push_back(d);
}

std::vector<v1::PendingDiagnosis> WhyStore::For(const std::string& job,
                                                const std::map<int32_t, int64_t>& pending) const {
  std::vector<v1::PendingDiagnosis> out;
  absl::MutexLock l(&mu_);
  auto it = by_job_.find(job);
  if (it == by_job_.end()) return out;
  for (const v1::PendingDiagnosis& d : it->second) {
    v1::PendingDiagnosis kept = d;
    kept.clear_indexes();
    for (int32_t index : d.indexes()) {
      auto p = pending.find(index);
      if (p == pending.end()) continue;                          // no longer pending
      if (d.revision() > 0 && p->second > d.revision()) continue;  // pending again since
      kept.add_indexes(index);
    }
    if (!kept.indexes().empty()) out.push_back(std::move(kept));
  }
  return out;
}

void WhyStore::Retain(const std::function<bool(const std::string&)>& keep) {
  absl::MutexLock l(&mu_);
  for (auto it = by_job_.begin(); it != by_job_.end();) {
    it = keep(it->first) ? std::next(it) : by_job_.erase(it);
  }
}

std::vector<std::string> WhyStore::Jobs() const {
  absl::MutexLock l(&mu_);
  std::vector<std::string> out;
  out.reserve(by_job_.size());
  for (const auto& [job, d] : by_job_) out.push_back(job);
  return out;
}

size_t WhyStore::size() const {
  absl::MutexLock l(&mu_);
  return by_job_.size();
}

}  // namespace herd::master
