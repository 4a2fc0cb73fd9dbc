// Scheduler: one pass over the pending queue of a (cached) CellState,
// proposing placements. Pure: no I/O, no clock, no gRPC -- the master's
// scheduler loop, `herd scheduler`, the benchmarks and the simulator all
// drive it.
//
// Scale (Borg §3.4), each switchable in Options for comparison:
//  - equivalence classes: tasks of a job with the same resources share one
//    feasibility and scoring computation;
//  - score caching: a class keeps its feasible machines in a heap with their
//    scores, recomputed only when the machine (or, for spreading, the job's
//    placements) changed, ignoring small resource changes; across passes the
//    candidates of classes still pending are kept;
//  - relaxed randomization: machines are examined in random order until
//    `enough_feasible` fit, and more only when those fill up.
//
// Proposals carry the task's state revision and the cell revision they were
// computed from; the master commits those still valid and rejects the rest,
// which come back in a later pass (optimistic concurrency).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cell/cell_state.h"
#include "herd/v1/mutation.pb.h"
#include "sched/diagnosis/diagnosis.h"
#include "sched/framework/options.h"
#include "sched/framework/profile.h"

namespace herd::sched {

// The tasks of one equivalence class left pending, and why.
struct PendingClass {
  std::string job;
  std::vector<int32_t> indexes;
  Diagnosis why;
};

struct PassResult {
  int64_t based_on_revision = 0;
  std::vector<v1::TaskScheduled> proposals;
  std::vector<PendingClass> pending;
  int64_t unplaced = 0;            // tasks left pending
  int64_t tasks_considered = 0;
  int64_t classes = 0;             // equivalence classes formed
  int64_t classes_skipped = 0;     // known not to fit since an earlier pass (nothing freed since)
  int64_t machines_evaluated = 0;  // (class, machine) feasibility checks
  int64_t scores_computed = 0;
  int64_t preemptions = 0;         // victims proposed
  int64_t reserved_shapes = 0;     // scarce pending shapes planned for (framework/reserve.h)
  int64_t replans = 0;             // times their plan was made
  bool stopped_early = false;      // max_unplaced was exceeded
};

class ScoreCache;
struct HomesCache;

class Scheduler {
 public:
  explicit Scheduler(Options options = {});
  ~Scheduler();
  Scheduler(Scheduler&&) noexcept;
  Scheduler& operator=(Scheduler&&) noexcept;

  // Runs one pass. `now_ms` is the wall time the pass considers current (for
  // expiring crash-avoid entries); the scheduler reads no clock itself.
  PassResult RunPass(const cell::CellState& state, int64_t now_ms = 0);

  const Options& options() const { return options_; }
  const Profile& profile() const { return profile_; }

  // Forgets which classes were known not to fit. Call it when proposals of a
  // pass were rejected: capacity that pass counted as taken is still free.
  void ForgetFailures();

 private:
  friend class PassRunner;
  Options options_;
  Profile profile_;
  uint64_t passes_ = 0;
  std::unique_ptr<ScoreCache> cache_;
  std::unique_ptr<HomesCache> homes_;
};

}  // namespace herd::sched
