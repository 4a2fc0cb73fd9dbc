// Why a task is pending: how many machines failed which check, in the
// Kubernetes style -- "0/12 machines fit: 9 insufficient memory, 3
// constraint arch == arm64".
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "sched/framework/plugin.h"

namespace herd::sched {

struct Diagnosis {
  int64_t machines = 0;  // machines considered
  int64_t feasible = 0;  // machines that fit (0 when the task is pending)
  bool preemption_tried = false;
  std::map<std::string, int64_t> reasons;  // "insufficient memory" -> count

  void Add(const FilterResult& r);
  std::string ToString() const;
};

}  // namespace herd::sched
