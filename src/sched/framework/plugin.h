// The scheduler's extension points (DESIGN §2.4, STYLE §2 and §7.3).
//
// A pass takes pending tasks in queue order and, for each, runs the Filter
// plugins (cheapest first) over candidate machines, then the Score plugins
// over the feasible ones; the weighted sum picks the machine. If no machine
// fits as it is, preemption looks for room held by lower-priority tasks.
// "Does not fit" is a value (FilterResult), not an error: the reasons are
// aggregated into a Diagnosis histogram for why-pending.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "base/resources.h"
#include "cell/cell_state.h"

namespace herd::sched {

// Why a machine was filtered out. Resource shortfalls are kept apart from
// the rest because preemption can cure them.
enum class ReasonCode : uint8_t {
  kOk = 0,
  kMachineDown,
  kConstraint,
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
  std::string detail;  // e.g. the constraint, "arch == arm64"
  bool ok() const { return code == ReasonCode::kOk; }
  static FilterResult Ok() { return {}; }
};

// What is being placed: one pending task (later: one equivalence class).
struct TaskRequest {
  const cell::Task* task = nullptr;
  const cell::Job* job = nullptr;
  int32_t priority = 0;
  ResourceVector resources;
};

// A machine as the current pass sees it: the cell's machine plus what this
// pass already placed on it or evicted from it.
struct MachineView {
  const cell::Machine* machine = nullptr;
  ResourceVector free;  // capacity - allocated - placed this pass + evicted this pass
};

class FilterPlugin {
 public:
  virtual ~FilterPlugin() = default;
  virtual absl::string_view Name() const = 0;
  // Whether `req` may run on `m` as it is (resources counted against `m.free`).
  virtual FilterResult Filter(const TaskRequest& req, const MachineView& m) const = 0;
};

class ScorePlugin {
 public:
  virtual ~ScorePlugin() = default;
  virtual absl::string_view Name() const = 0;
  // Goodness of placing `req` on the feasible machine `m`, in [0, 100].
  virtual double Score(const TaskRequest& req, const MachineView& m) const = 0;
};

}  // namespace herd::sched
