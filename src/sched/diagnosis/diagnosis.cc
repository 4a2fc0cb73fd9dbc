#include "sched/diagnosis/diagnosis.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace herd::sched {

void Diagnosis::Add(const FilterResult& r) {
  std::string key(ReasonText(r.code));
  if (!r.detail.empty()) absl::StrAppend(&key, " ", r.detail);
  ++reasons[key];
}

std::string Diagnosis::ToString() const {
  std::vector<std::pair<std::string, int64_t>> v(reasons.begin(), reasons.end());
  std::stable_sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  std::string out = absl::StrCat(feasible, "/", machines, " machines fit");
  if (!v.empty()) {
    absl::StrAppend(&out, ": ", absl::StrJoin(v, ", ", [](std::string* o, const auto& p) {
                      absl::StrAppend(o, p.second, " ", p.first);
                    }));
  }
  if (preemption_tried) absl::StrAppend(&out, "; preempting lower-priority tasks would not make room");
  return out;
}

}  // namespace herd::sched
