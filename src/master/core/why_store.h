// WhyStore: why tasks are pending, as the schedulers last said -- the
// PendingDiagnosis entries that come with every proposal (Propose RPC, or the
// in-process scheduler). Read by `herd why` (MasterCore::Why) and GetJob's
// why_pending (`herd status`). Latest per job, from whichever scheduler: a
// pass that looked at a job (proposed a placement for it or diagnosed it)
// replaces everything known about that job. Thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "herd/v1/api.pb.h"

namespace herd::master {

class WhyStore {
 public:
  // A pass looked at `jobs`; their entries become those of `diagnoses` (each
  // of whose jobs must be in `jobs`), possibly none.
  void Record(const absl::flat_hash_set<std::string>& jobs, const std::vector<v1::PendingDiagnosis>& diagnoses);

  // The entries for `job`, keeping only the tasks that are still PENDING
  // and have not changed since the pass looked at them: `pending` maps each
  // pending task's index to its state revision, and an index is dropped if
  // its task changed after the entry's revision (it became pending again
  // since: the diagnosis is about an older wait). Entries left without an
  // index are dropped.
  std::vector<v1::PendingDiagnosis> For(const std::string& job, const std::map<int32_t, int64_t>& pending) const;

  // Forgets the jobs for which keep(job) is false.
  void Retain(const std::function<bool(const std::string&)>& keep);
  std::vector<std::string> Jobs() const;
  size_t size() const;

 private:
  mutable absl::Mutex mu_;
  std::map<std::string, std::vector<v1::PendingDiagnosis>> by_job_ ABSL_GUARDED_BY(mu_);
};

}  // namespace herd::master
