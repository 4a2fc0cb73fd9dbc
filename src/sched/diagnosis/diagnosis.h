// Why a class of tasks is pending: how many machines failed which check, in
// the Kubernetes style -- "0/12500 machines fit: 9000 insufficient memory,
// 3400 constraint arch == arm64, 100 insufficient ports" -- and what change to
// the request would fit ("memory <= 6.2Gi fits on 1840 machines").
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "herd/v1/api.pb.h"
#include "sched/framework/plugin.h"
#include "sched/framework/profile.h"

namespace herd::sched {

struct Diagnosis {
  int64_t machines = 0;  // machines considered
  int64_t feasible = 0;  // machines that fit (0 when the class is pending)
  bool preemption_tried = false;
  std::map<std::string, int64_t> reasons;  // "insufficient memory" -> count
  std::vector<std::string> suggestions;

  void Add(const FilterResult& r);
  std::string ToString() const;
  void ToProto(v1::PendingDiagnosis* out) const;
};

// Runs every filter over every machine for `cls`: the first failure of each
// machine goes into the histogram; machines that fail exactly one check
// yield the suggestions.
Diagnosis Diagnose(const PassContext& ctx, const Profile& profile, const TaskClass& cls);

}  // namespace herd::sched
