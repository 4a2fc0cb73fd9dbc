// The scheduler's extension points (docs/design.md §6, STYLE §1, §2 and §7.3).
//
// A pass takes pending tasks in queue order. Tasks with identical needs form
// an equivalence class (TaskClass); for each class the Filter plugins run over
// candidate machines, cheapest first, and the Score plugins rank the feasible
// ones; the weighted sum picks the machine. "Does not fit" is a value
// (FilterResult), not an error: reasons are aggregated into a Diagnosis.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace herd::sched {

struct TaskClass;
struct MachineView;
struct Preemption;
class PassContext;

// Why a machine was filtered out. Resource shortfalls are kept apart from
// the rest because preemption can cure them.
enum class ReasonCode : uint8_t {
  kOk = 0,
  kMachineDown,
  kCrashedHere,
  kConstraint,
  kDifferentMachines,
  kDomainLimit,
  kInterference,
  kInsufficientCpu,
  kInsufficientMemory,
  kInsufficientDisk,
  kInsufficientPorts,
  kInsufficientExtended,
  kCount,
};

absl::string_view ReasonText(ReasonCode code);  // "insufficient memory"
inline bool IsResourceShortfall(ReasonCode c) {
  return c >= ReasonCode::kInsufficientCpu && c <= ReasonCode::kInsufficientExtended;
}

struct FilterResult {
  ReasonCode code = ReasonCode::kOk;
  // e.g. the constraint "arch == arm64" or the extended resource "gpu";
  // points into the TaskClass or the cell, stable for the pass.
  absl::string_view detail;
  bool ok() const { return code == ReasonCode::kOk; }
  static FilterResult Ok() { return {}; }
};

class FilterPlugin {
 public:
  virtual ~FilterPlugin() = default;
  virtual absl::string_view Name() const = 0;
  // A static filter looks only at the machine's state and attributes and at
  // the class -- never at free resources or other placements -- so its
  // verdict holds until the machine or the class changes and is computed once
  // per (class, machine).
  virtual bool IsStatic() const = 0;
  virtual FilterResult Filter(const PassContext& ctx, const TaskClass& cls, const MachineView& m) const = 0;
};

class ScorePlugin {
 public:
  virtual ~ScorePlugin() = default;
  virtual absl::string_view Name() const = 0;
  // Goodness of placing one task of `cls` on the feasible machine `m`, in
  // [0, 100]. `p` is non-null when the placement needs these victims evicted.
  virtual double Score(const PassContext& ctx, const TaskClass& cls, const MachineView& m,
                       const Preemption* p) const = 0;
  // True if the score changes as the class's own job places tasks (spread):
  // such scores go stale after each placement of the job.
  virtual bool DependsOnJobPlacements() const { return false; }
};

}  // namespace herd::sched
