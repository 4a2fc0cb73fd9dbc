#include "master/core/admission/quota.h"

#include <map>

#include "absl/strings/str_cat.h"
#include "base/priority.h"
#include "cell/task_template.h"

namespace herd::master {

std::vector<std::string> LimitedDimensions(const v1::Quota& q) {
  if (!q.limited().empty()) return {q.limited().begin(), q.limited().end()};
  std::vector<std::string> dims = {"cpu", "memory", "disk", "ports"};
  for (const auto& [k, v] : q.limit().extended()) dims.push_back(k);
  return dims;
}

absl::Status CheckQuota(const cell::CellState& state, const std::vector<v1::JobSpec>& jobs,
                        const std::vector<const cell::Job*>& replacing) {
  // What the request asks, per (user, band), and which jobs ask it.
  std::map<std::pair<std::string, Band>, ResourceVector> asks;
  std::map<std::pair<std::string, Band>, std::string> example;
  for (const v1::JobSpec& spec : jobs) {
    if (spec.priority() == 0) continue;  // priority 0: unlimited (Borg §2.5)
    if (!spec.alloc().empty()) continue;  // its alloc set is charged
    auto key = std::make_pair(spec.user(), BandOf(spec.priority()));
    for (int32_t i = 0; i < spec.task_count(); ++i) asks[key] += cell::TaskResources(spec, i);
    if (!example.count(key)) {
      ResourceVector one = cell::TaskResources(spec, 0);
      example[key] = absl::StrCat("job ", spec.user(), "/", spec.name(), ": ", spec.task_count(), " task(s) of ",
                                  one.ToString());
    }
  }
  std::map<std::pair<std::string, Band>, ResourceVector> released;
  for (const cell::Job* job : replacing) {
    for (const cell::Task& t : job->tasks) {
      if (t.state() != v1::Task::DEAD && !t.in_alloc()) released[{job->spec.user(), BandOf(t.priority())}] += t.resources();
    }
  }
  for (const auto& [key, ask] : asks) {
    const auto& [user, band] = key;
    const ResourceVector& back = released[key];
    const v1::Quota* q = state.FindQuota(user, band);
    if (q == nullptr) continue;
    ResourceVector limit = ResourceVector::FromProto(q->limit());
    ResourceVector used = state.Usage(user, band);
    for (const std::string& dim : LimitedDimensions(*q)) {
      int64_t want = ask.Get(dim) - back.Get(dim);
      if (want <= 0) continue;
      int64_t left = std::max<int64_t>(0, limit.Get(dim) - used.Get(dim));
      if (want > left) {
        return absl::ResourceExhaustedError(absl::StrCat(
            "over quota: user ", user, " asks ", FormatDimension(dim, want), " ", dim, " in band ",
            BandName(band), ", ", FormatDimension(dim, left), " left of ", FormatDimension(dim, limit.Get(dim)),
            " (", example[key], ")"));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace herd::master
