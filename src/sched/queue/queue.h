// The pending queue's order for one pass: priority from high to low and,
// within one priority, across users either round-robin (Borg §3.2: a big job
// does not block the line; the user who goes first rotates with `turn`) or by
// Dominant Resource Fairness (Mesos: the user whose largest share of any
// resource in the task's band is smallest goes next). Within one user, tasks
// come in submission order or, with TaskOrder::kLargest, hardest first
// (first-fit-decreasing): by the task's dominant share of a typical machine
// times its scarcity (machines in the cell / machines its hard constraints and
// extended resources allow); equal ones keep submission order.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "base/resources.h"
#include "cell/cell_state.h"
#include "sched/framework/options.h"

namespace herd::sched {

class PendingQueue {
 public:
  PendingQueue(const cell::CellState& state, QueueOrder order, uint64_t turn,
               TaskOrder task_order = TaskOrder::kSubmission);

  // The next task to try, or nullptr when the queue is done.
  const cell::Task* Next();
  // The task last returned by Next() was placed, holding `r` (DRF counts it
  // in its user's share).
  void Placed(const cell::Task* t, const ResourceVector& r);

 private:
  struct UserQueue {
    std::string user;
    std::vector<const cell::Task*> tasks;
    size_t next = 0;
    ResourceVector alloc;  // DRF: what the user holds in this band
    double share = 0;      // DRF: dominant share
    bool done() const { return next >= tasks.size(); }
  };
  void LoadGroup();  // the next priority's tasks, by user
  double DominantShare(const ResourceVector& alloc) const;
  // TaskOrder::kLargest: the cell's typical machine, and how hard `t` is to place.
  void MeasureCell();
  double Difficulty(const cell::Task* t);
  void SortHardestFirst(std::vector<const cell::Task*>& tasks);

  const cell::CellState& state_;
  const QueueOrder order_;
  const uint64_t turn_;
  const TaskOrder task_order_;
  absl::btree_set<cell::Task*, cell::PendingOrder>::const_iterator it_, end_;
  std::vector<UserQueue> group_;
  size_t cursor_ = 0;
  size_t left_ = 0;
  UserQueue* last_ = nullptr;
  // DRF: the cell's capacity, and what each (user, band) holds.
  ResourceVector capacity_;
  std::map<std::pair<std::string, int>, ResourceVector> held_;
  // kLargest: mean capacity of the up machines (extended resources: of those
  // that have them), and machines per set of hard constraints + extended needs.
  double up_machines_ = 0, mean_cpu_ = 0, mean_mem_ = 0;
  std::map<std::string, double> mean_ext_;
  std::map<std::string, int64_t> homes_;
};

// The whole queue order at once (tests, tools): every pending task as Next()
// would return it if nothing were placed.
std::vector<const cell::Task*> OrderPending(const cell::CellState& state, uint64_t turn = 0,
                                            QueueOrder order = QueueOrder::kRoundRobin,
                                            TaskOrder task_order = TaskOrder::kSubmission);

}  // namespace herd::sched
