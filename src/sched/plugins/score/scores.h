// The built-in score plugins. Each returns 0-100; the profile weighs them.
#pragma once

#include "sched/framework/devices.h"
#include "sched/framework/options.h"
#include "base/resources.h"
#include "sched/framework/plugin.h"

namespace herd::sched {

// Packing by policy:
//  worst fit -- E-PVM (Amir et al.): a convex cost per resource,
//    (A^u - 1)/(A - 1) for utilisation u; prefers the machine whose cost rises
//    least, which spreads load and leaves headroom (and fragments);
//  best fit  -- the machine left fullest (mean CPU and memory utilisation);
//  hybrid    -- E-PVM's cost plus the capacity the placement would strand:
//    free CPU that a task of the cell's typical CPU:memory shape could not use
//    for lack of memory, or the reverse (Borg §3.2: "reduce the amount of
//    stranded resources"). See docs/scheduler.md for how the three compare;
//  hybrid on a cell with devices (GPUs), and for production work where it
//    is (nearly) the whole workload -- scores as pack does
//    (PassContext::HybridPacks);
//  k8s       -- kube-scheduler's default: least allocated + balanced;
//  pack      -- best fit over every resource the machine has plus the
//    stranding term plus, for extended resources (GPUs), the growth of the
//    expected fragmentation for the pending tasks' shapes (FGD).
class PackingScore final : public ScorePlugin {
 public:
  explicit PackingScore(PackingPolicy policy) : policy_(policy) {}
  absl::string_view Name() const override { return PackingPolicyName(policy_); }
  double Score(const PassContext& ctx, const TaskClass& cls, const MachineView& m, const Preemption* p) const override;

  // Utilisation of CPU and memory after placing `need` into `free`.
  static void Utilisation(const MachineView& m, const ResourceVector& free, const ResourceVector& need, double* cpu,
                          double* mem);
  // Stranded capacity (as a fraction of the machine, CPU + memory) when a
  // machine has these free fractions and tasks have `shape` CPU per memory.
  static double Stranded(double free_cpu, double free_mem, double shape);
  // FGD's expected fragmentation of a machine's free devices (milli-units,
  // e.g. milli-GPUs) for the pass's typical task shapes
  // (PassContext::extended_shapes), given its other free resources.
  static double Fragmentation(const PassContext& ctx, const MachineView& m, const ResourceVector& free,
                              const Devices& devices);
  // How much placing `need` (from `free`) on `m` grows it (< 0: it shrinks).
  static double FragmentationGrowth(const PassContext& ctx, const MachineView& m, const ResourceVector& free,
                                    const ResourceVector& need);
  // The pack policy's score (0-100), also hybrid's on a cell with devices.
  static double Pack(const PassContext& ctx, const MachineView& m, const ResourceVector& free,
                     const ResourceVector& need, double uc, double um);
  // The pack policy's weights, relative to best fit's mean utilisation (0-1).
  static constexpr double kPackStrandWeight = 0.5;
  static constexpr double kPackFragWeight = 1.0;

 private:
  PackingPolicy policy_;
};

// Spreads a job across failure domains: the machine itself and each spread
// domain (rack, power...); fewer of the job's tasks already in the machine's
// domain is better.
class SpreadScore final : public ScorePlugin {
 public:
  absl::string_view Name() const override { return "spread"; }
  double Score(const PassContext& ctx, const TaskClass& cls, const MachineView& m, const Preemption* p) const override;
  bool DependsOnJobPlacements() const override { return true; }
};

// Fewer and lower-priority victims are better; no preemption scores 100.
class PreemptCostScore final : public ScorePlugin {
 public:
  absl::string_view Name() const override { return "preempt-cost"; }
  double Score(const PassContext& ctx, const TaskClass& cls, const MachineView& m, const Preemption* p) const override;
};

// Machines that already cache the task's packages start it sooner.
class LocalityScore final : public ScorePlugin {
 public:
  absl::string_view Name() const override { return "locality"; }
  double Score(const PassContext& ctx, const TaskClass& cls, const MachineView& m, const Preemption* p) const override;
};

// Mixes high and low priority on a machine, so production work can expand
// into batch's room in a load spike (Borg §3.2): prefers machines where the
// other kind holds more of the CPU (as a share of the machine's CPU, so an
// empty machine scores as one holding only the same kind: 0).
class PriorityMixScore final : public ScorePlugin {
 public:
  absl::string_view Name() const override { return "priority-mix"; }
  double Score(const PassContext& ctx, const TaskClass& cls, const MachineView& m, const Preemption* p) const override;
};

// Reservations for scarce pending work (framework/reserve.h): 0 when the
// placement would take a slot that a tight scarce shape other than the
// class's own still needs in this pass, else 100.
class ReserveScore final : public ScorePlugin {
 public:
  absl::string_view Name() const override { return "reserve"; }
  double Score(const PassContext& ctx, const TaskClass& cls, const MachineView& m, const Preemption* p) const override;
};

// Soft constraints with weights (Torca's Rank): the share of the weight of
// the soft constraints the machine meets.
class SoftConstraintScore final : public ScorePlugin {
 public:
  absl::string_view Name() const override { return "soft-constraints"; }
  double Score(const PassContext& ctx, const TaskClass& cls, const MachineView& m, const Preemption* p) const override;
};

}  // namespace herd::sched
