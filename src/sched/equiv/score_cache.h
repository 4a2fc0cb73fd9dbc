// What the scheduler remembers of a class from one pass to the next, so an
// online pass over a cell resumes where the last one stopped instead of
// rescoring (Borg §3.4's score caching, across passes):
//
//  - candidates: the feasible machines a still-pending class had, with their
//    scores. Reused only while the cell's machine list is the same and only
//    for machines whose state revision has not changed (a machine whose
//    state or attributes changed is scanned afresh); even then they are
//    checked before use (Candidate::kFromCache).
//  - failures: classes that found no machine, and at which cell revision. A
//    class that could not fit at revision R still cannot unless capacity was
//    freed since, or (if it may preempt) a lower-priority task was placed
//    since (CellState::freed_revision, placed_revision), so it is skipped
//    with the same diagnosis: what makes an online pass over a backlog cheap.
//
// Classes are keyed by job, its submit revision (a resubmitted job is new),
// its version (an updated job may have new constraints) and resources. Entries not used for kForgetAfterPasses passes are dropped,
// and the oldest go first when the candidates pass kMaxEntries.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "base/resources.h"
#include "cell/cell_state.h"
#include "sched/diagnosis/diagnosis.h"
#include "sched/framework/pass_context.h"

namespace herd::sched {

class ScoreCache {
 public:
  struct Key {
    std::string job;
    int64_t submit_revision = 0;
    int64_t version = 0;
    ResourceVector resources;
    bool operator==(const Key& o) const {
      return job == o.job && submit_revision == o.submit_revision && version == o.version &&
             resources == o.resources;
    }
    template <typename H>
    friend H AbslHashValue(H h, const Key& k) {
      return H::combine(std::move(h), k.job, k.submit_revision, k.version, k.resources.cpu_millis,
                        k.resources.memory_bytes);
    }
  };
  static Key KeyOf(const TaskClass& c) { return Key{c.job->id, c.job->submit_revision, c.job->version, c.limit}; }

  struct Entry {
    int32_t machine = 0;  // index into the pass's machine views
    float score = 0;
    int64_t machine_revision = 0;  // cell::Machine::state_revision when scored
    int64_t cpu_at = 0, mem_at = 0;
  };

  static constexpr uint64_t kForgetAfterPasses = 8;
  static constexpr size_t kMaxEntries = 4'000'000;

  // The diagnosis of a class that could not fit and still cannot, counting
  // it as seen in `pass`; nullptr if it may fit now (then forgotten).
  const Diagnosis* StillFailing(const Key& key, const cell::CellState& state, int32_t priority, bool may_preempt,
                                uint64_t pass);
  // The kept candidates of a class whose machines have not changed since.
  // Empty if there are none or the cell's machine list changed.
  std::vector<Entry> Candidates(const Key& key, const std::vector<MachineView>& views) const;

  // At the end of a pass, for each shared class: it found no machine (kept
  // with the cell revision of its first failure), or it did (its failure is
  // forgotten), and its candidates if it is still pending.
  void Failed(const Key& key, int64_t revision, const Diagnosis& why, uint64_t pass);
  void Fits(const Key& key) { failed_.erase(key); }
  void Keep(const Key& key, std::vector<Entry> entries, size_t machines, uint64_t pass);
  // Drops what was not used lately (and the oldest when over kMaxEntries).
  void Expire(uint64_t pass);

  // Forgets the failures: when a pass's proposals were rejected, capacity
  // that pass counted as taken is still free.
  void ForgetFailures() { failed_.clear(); }

  size_t candidate_count() const { return total_entries_; }
  size_t failed_count() const { return failed_.size(); }

 private:
  struct Kept {
    std::vector<Entry> entries;
    size_t machines = 0;  // the cell's machine count when kept (entries are indexes)
    uint64_t pass = 0;
  };
  struct Failure {
    int64_t revision = 0;
    Diagnosis why;
    uint64_t pass = 0;
  };
  absl::flat_hash_map<Key, Kept> kept_;
  size_t total_entries_ = 0;
  absl::flat_hash_map<Key, Failure> failed_;
};

}  // namespace herd::sched
