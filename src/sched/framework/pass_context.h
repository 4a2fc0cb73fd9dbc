// What one scheduling pass works with: the machines as this pass sees them
// (MachineView: the cell's machine plus what the pass already placed on it or
// evicted from it), the equivalence classes being placed (TaskClass), and
// where each job's tasks are, per failure domain (for spreading and limits).
#pragma once

#include <climits>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "base/resources.h"
#include "cell/cell_state.h"
#include "sched/framework/devices.h"
#include "sched/framework/options.h"
#include "sched/framework/reserve.h"

namespace herd::sched {

// One equivalence class (sched/equiv/classes.h): tasks of one job with the
// same resources (and, for tasks with their own avoid list, a class of one).
struct TaskClass {
  const cell::Job* job = nullptr;
  const cell::Task* only_task = nullptr;  // set for a class of one task
  ResourceVector limit;                   // what production placements count
  ResourceVector reservation;             // what non-production placements count
  int32_t priority = 0;
  bool prod = false;
  std::vector<const v1::Constraint*> hard;
  std::vector<std::string> hard_text;  // Describe() of each hard constraint
  std::vector<const v1::Constraint*> soft;
  int64_t soft_weight_total = 0;
  int32_t max_per_machine = 0;                     // 0 = no limit
  std::vector<std::pair<int, int32_t>> domain_max;  // (domain index, max per value)
  std::vector<std::string> packages;                // sha256 of the task's packages
  int64_t pending = 0;                              // tasks of the class in this pass's queue

  // What this class's placement subtracts from a machine's free vector.
  const ResourceVector& need() const { return prod ? limit : reservation; }
};

struct MachineView {
  const cell::Machine* machine = nullptr;
  int32_t index = 0;
  bool up = false;  // machine->state == UP, kept here to save a cache miss per check
  ResourceVector free_prod;     // capacity - others' limits
  ResourceVector free_nonprod;  // capacity - others' reservations
  int64_t prod_cpu = 0, nonprod_cpu = 0;  // CPU held by prod / non-prod tasks
  int32_t min_priority = INT32_MAX;       // lowest priority running here
  uint32_t version = 0;                   // bumps whenever this pass changes it
  // Candidates scored at an earlier version (or in an earlier pass) are
  // rescored even if the machine changed little: a reservation changed.
  uint32_t rescore_before = 0;
  std::vector<int32_t> domain;            // value id per PassContext domain (-1: none)
  // Per-device free capacity (GPUs...), empty on machines without devices;
  // and, there only, the tasks this pass placed here (to rebuild the devices
  // after a preemption).
  Devices devices;
  std::vector<const cell::Task*> placed;

  const ResourceVector& FreeFor(const TaskClass& c) const { return c.prod ? free_prod : free_nonprod; }
};

// Where a job's tasks are (running in the cell + placed in this pass).
struct JobPlacements {
  absl::flat_hash_map<uint64_t, int32_t> per_domain;  // (domain << 32 | value) -> tasks
  uint32_t version = 0;                                // bumps on each placement
};

class PassContext {
 public:
  PassContext(const cell::CellState& state, const Options& options, int64_t now_ms);

  const cell::CellState& state() const { return state_; }
  const Options& options() const { return options_; }
  int64_t now_ms() const { return now_ms_; }

  std::vector<MachineView>& views() { return views_; }
  const std::vector<MachineView>& views() const { return views_; }

  // Failure domains: index 0 is the machine itself; then the spread domains
  // and every attribute a job limits tasks per (max_per_domain).
  int DomainIndex(absl::string_view attribute);  // adds it if new
  int FindDomain(absl::string_view attribute) const;  // -1 if unknown
  size_t domain_count() const { return domains_.size(); }
  const std::vector<int>& spread_domains() const { return spread_; }

  // Where `job`'s tasks are (built on first use, also from const code: it
  // is a cache of what the cell and this pass already say).
  JobPlacements& Placements(const cell::Job* job) const;
  // Nullptr if not built yet (then nothing was placed for it in this pass).
  const JobPlacements* FindPlacements(const cell::Job* job) const;
  int32_t CountIn(const cell::Job* job, int domain, int32_t value) const;

  // Records a placement (or, count = -1, an eviction) of `job` on `m`.
  void Count(const cell::Job* job, const MachineView& m, int delta);

  // Cell-wide CPU per byte of memory requested (for the hybrid policy's
  // notion of a typical task shape), normalised by capacity.
  double shape_cpu_per_mem() const { return shape_; }

  // Non-production work's share of the CPU the cell's work asks for (running
  // tasks' limits and pending tasks' requests).
  double nonprod_cpu_share() const { return nonprod_cpu_share_; }
  // Whether the hybrid policy packs `c` rather than spreading it: on a cell
  // whose tasks ask for devices (GPUs), every class; else production classes
  // while non-production work is under Options::hybrid_pack_below of the
  // CPU asked for.
  bool HybridPacks(const TaskClass& c) const {
    return !extended_shapes_.empty() || (c.prod && nonprod_cpu_share_ < options_.hybrid_pack_below);
  }

  // When the cell has devices (GPUs...) and some task asks for them: the
  // most common task shapes of the workload (running and pending tasks,
  // those without devices included), with their share of its tasks -- the
  // "typical tasks" whose expected fragmentation of the devices FGD keeps
  // low. Empty otherwise.
  // Shapes are told apart by their hard constraints too (a GPU model), and
  // weighed by scarcity: share x machines / machines the shape may use, so
  // a shape only a few machines can take counts for as much on each of them
  // as a common one does across the cell (weights sum to 1).
  struct ExtendedShape {
    ResourceVector need;
    std::vector<const v1::Constraint*> hard;
    double share = 0;
  };
  const std::vector<ExtendedShape>& extended_shapes() const { return extended_shapes_; }
  static constexpr size_t kMaxExtendedShapes = 32;
  static constexpr size_t kShapeSample = 20'000;  // running tasks looked at, at most (about)
  // The largest device capacity of a machine (milli-units; 0: no devices).
  int64_t max_device_capacity() const { return max_device_capacity_; }

  // The devices of `m` as they are when `victims` leave it (placed tasks of
  // this pass stay): for preemption.
  Devices DevicesWithout(const MachineView& m, const std::vector<const cell::Task*>& victims) const;


  absl::flat_hash_set<const cell::Task*>& evicted() { return evicted_; }

  // Slots kept for scarce pending shapes (the reserve score weighs > 0; reserve.h).
  Reservations& reservations() { return reservations_; }
  const Reservations& reservations() const { return reservations_; }

 private:
  int32_t InternValue(int domain, absl::string_view value);
  void FillDomain(int domain);

  const cell::CellState& state_;
  const Options& options_;
  const int64_t now_ms_;
  std::vector<MachineView> views_;
  std::vector<std::string> domains_;
  std::vector<absl::flat_hash_map<std::string, int32_t>> values_;
  std::vector<int> spread_;
  mutable absl::flat_hash_map<const cell::Job*, JobPlacements> jobs_;
  absl::flat_hash_set<const cell::Task*> evicted_;
  Reservations reservations_;
  double shape_ = 1.0;
  double nonprod_cpu_share_ = 0;
  std::vector<ExtendedShape> extended_shapes_;
  int64_t max_device_capacity_ = 0;
};

inline uint64_t DomainKey(int domain, int32_t value) {
  return (static_cast<uint64_t>(domain) << 32) | static_cast<uint32_t>(value);
}

}  // namespace herd::sched
