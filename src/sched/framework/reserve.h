// Reservations for scarce pending work (issue #13, gpuspec20): tasks that
// only a few machines can take (hard constraints such as a GPU model, or
// extended resources few machines have) lose those machines when earlier
// tasks of the pass -- often of a higher priority, so queued first -- that
// could run anywhere fill them.
//
// So the pass keeps a *plan* for the scarce pending work, exactly: every
// pending task whose machines (hard constraints + extended resources) are at
// most half of the cell's up machines belongs to the group of tasks with the
// same machines; the groups, fewest machines first, are packed onto their
// machines as the pass sees them (best fit, hardest shape first), each onto
// what the earlier groups left. The `reserve` score steers every task away
// from a placement that would leave a machine unable to hold the tasks
// planned there (a task of a planned shape may take the place of one of its
// own). The plan is repaired as the pass goes: a task of a planned shape
// consumes one planned task of its shape (on its machine if one was planned
// there, else anywhere), and a machine whose plan no longer fits (something
// else went there after all) makes the whole plan be made again.
//
// It is a score, not a filter: a task that has nowhere else to go still goes
// there (and the plan moves), so no task stays pending for the sake of
// another, priorities keep their meaning, and nothing is preempted for it.
// It plans only for what is pending in this pass (not for work yet to come).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "base/resources.h"
#include "cell/cell_state.h"
#include "sched/framework/devices.h"

namespace herd::sched {

struct MachineView;
struct TaskClass;

// Each group key's machines (hard constraints and extended capacity; up or
// not), kept across passes while no machine was registered: matching
// constraints on every machine is what a pass would otherwise pay most for.
struct HomesCache {
  const cell::CellState* state = nullptr;
  int64_t machines_revision = -1;
  size_t machines = 0;
  absl::flat_hash_map<std::string, std::vector<int32_t>> homes;
};

class Reservations {
 public:
  // A group counts as scarce when at most this share of the up machines may take it
  // (0.25 left out openb's T4 pods, 26% of the nodes: gpuspec20 did not fit).
  static constexpr double kScarceShare = 0.5;
  // Planning is skipped for groups with more pending tasks than this (cost).
  static constexpr int64_t kMaxGroupTasks = 4096;

  // From the pass's pending tasks; empty unless some group is scarce.
  void Build(const cell::CellState& state, std::vector<MachineView>& views, HomesCache* cache = nullptr);
  bool empty() const { return shapes_.empty(); }

  // After `t` was placed on `m` (m already holds it): repairs the plan.
  void Placed(const cell::Task* t, bool prod, const ResourceVector& need, MachineView& m,
              std::vector<MachineView>& views);

  // Would placing one task of `cls` on `m` leave the tasks planned there
  // (but one of its own shape) without room?
  bool Breaks(const TaskClass& cls, const MachineView& m) const;

  // How many tasks needing `need` fit into `free` and `devices`.
  static int64_t FitCount(const ResourceVector& need, const ResourceVector& free, const Devices& devices);

  struct Shape {
    int32_t group = 0;
    ResourceVector limit, reservation;
    bool prod = false;
    int64_t pending = 0;  // tasks of the shape not yet placed in this pass
    const ResourceVector& need() const { return prod ? limit : reservation; }
  };
  const std::vector<Shape>& shapes() const { return shapes_; }
  // Planned tasks per machine: (shape, count).
  const std::vector<std::pair<int32_t, int64_t>>& PlannedOn(int32_t machine) const {
    return plan_[static_cast<size_t>(machine)];
  }
  int64_t replans() const { return replans_; }

 private:
  struct Group {
    std::vector<int32_t> homes;  // machine indexes
    std::vector<int32_t> shapes;  // hardest first
  };
  int32_t ShapeOf(const cell::Job* job, bool prod, const ResourceVector& need) const;
  // Makes the whole plan again; bumps the machines whose plan changed.
  void Replan(std::vector<MachineView>& views);
  // Does `m`'s plan fit after a task (its limit and reservation; devices
  // from the limit) is placed there? A task of shape `own_shape` takes the
  // place of one planned for its shape.
  bool PlanFits(const MachineView& m, const ResourceVector* limit, const ResourceVector* reservation,
                int32_t own_shape) const;
  static void Bump(MachineView& m);

  std::vector<Group> groups_;
  std::vector<Shape> shapes_;
  absl::flat_hash_map<const cell::Job*, std::vector<int32_t>> job_shapes_;
  std::vector<std::vector<std::pair<int32_t, int64_t>>> plan_;  // per machine
  std::vector<int32_t> planned_machines_;                         // machines with a plan (some may be empty again)
  std::vector<int32_t> groups_order_;                             // groups with shapes, fewest machines first
  int64_t replans_ = 0;
};

}  // namespace herd::sched
