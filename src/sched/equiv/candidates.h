// Score caching within a pass (Borg §3.4): each equivalence class keeps its
// feasible machines in a heap, best score first, with what each score was
// computed against. A candidate is used as it is while it is fresh; a stale
// one (its machine changed since, or, for scores that depend on where the
// job's tasks are, the job placed a task) is checked and rescored before use,
// except that a small change of the machine's free CPU and memory (less than
// Options::small_change of its capacity) keeps the old score.
#pragma once

#include <cstdint>

namespace herd::sched {

struct Candidate {
  float score = 0;
  int32_t machine = 0;
  uint32_t version = 0;      // MachineView::version when scored (kFromCache: from an earlier pass)
  uint32_t job_version = 0;  // JobPlacements::version when scored
  uint32_t round = 0;        // the class's round when scored (score cache off)
  int64_t cpu_at = 0;        // free CPU and memory when scored
  int64_t mem_at = 0;

  // A version no MachineView has: candidates seeded from the ScoreCache are
  // checked before their first use.
  static constexpr uint32_t kFromCache = UINT32_MAX;
};

// std::push_heap keeps the greatest first: higher score, then lower machine
// (deterministic ties).
inline bool HeapLess(const Candidate& a, const Candidate& b) {
  if (a.score != b.score) return a.score < b.score;
  return a.machine > b.machine;
}

}  // namespace herd::sched
