#include "sched/plugins/score/scores.h"

#include <algorithm>

namespace herd::sched {

double UtilisationAfter(const TaskRequest& req, const MachineView& m) {
  const ResourceVector& cap = m.machine->capacity;
  auto frac = [](int64_t used, int64_t cap) {
    if (cap <= 0) return 1.0;
    return std::clamp(static_cast<double>(used) / static_cast<double>(cap), 0.0, 1.0);
  };
  double cpu = frac(cap.cpu_millis - m.free.cpu_millis + req.resources.cpu_millis, cap.cpu_millis);
  double mem = frac(cap.memory_bytes - m.free.memory_bytes + req.resources.memory_bytes, cap.memory_bytes);
  return (cpu + mem) / 2;
}

double BestFitScore::Score(const TaskRequest& req, const MachineView& m) const {
  return 100.0 * UtilisationAfter(req, m);
}

double WorstFitScore::Score(const TaskRequest& req, const MachineView& m) const {
  return 100.0 * (1.0 - UtilisationAfter(req, m));
}

}  // namespace herd::sched
