// Scheduler: one pass over the pending queue of a (cached) CellState,
// proposing placements. Pure: no I/O, no clock, no gRPC -- the master's
// scheduler loop, `herd scheduler` and the simulator all drive it.
//
// Proposals carry the task's state revision and the cell revision they were
// computed from; the master commits those still valid and rejects the rest,
// which come back in a later pass (optimistic concurrency, Borg §3.4).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cell/cell_state.h"
#include "herd/v1/mutation.pb.h"
#include "sched/diagnosis/diagnosis.h"
#include "sched/framework/profile.h"

namespace herd::sched {

struct Options {
  PackingPolicy policy = PackingPolicy::kBestFit;
  bool preemption = true;
  // Stop after this many tasks considered in one pass (0 = no limit), so a
  // huge backlog does not make one pass arbitrarily long.
  int64_t max_tasks_per_pass = 0;
  std::string name = "scheduler";
};

struct Unplaced {
  std::string job;
  int32_t index = 0;
  Diagnosis why;
};

struct PassResult {
  int64_t based_on_revision = 0;
  std::vector<v1::TaskScheduled> proposals;
  std::vector<Unplaced> unplaced;
  int64_t tasks_considered = 0;
  int64_t machines_evaluated = 0;  // filter runs over (task, machine) pairs
  int64_t preemptions = 0;         // victims proposed
};

class Scheduler {
 public:
  explicit Scheduler(Options options = {});
  PassResult RunPass(const cell::CellState& state);
  const Options& options() const { return options_; }

 private:
  Options options_;
  Profile profile_;
  uint64_t turn_ = 0;
};

}  // namespace herd::sched
