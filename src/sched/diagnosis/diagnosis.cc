#include "sched/diagnosis/diagnosis.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/resources.h"
#include "sched/framework/pass_context.h"

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

void Diagnosis::ToProto(v1::PendingDiagnosis* out) const {
  out->set_machines(machines);
  out->set_feasible(feasible);
  out->set_preemption_tried(preemption_tried);
  for (const auto& [k, v] : reasons) (*out->mutable_reasons())[k] = v;
  for (const auto& s : suggestions) out->add_suggestions(s);
  out->set_text(ToString());
}

namespace {

constexpr const char* kDims[] = {"cpu", "memory", "disk", "ports"};

}  // namespace

Diagnosis Diagnose(const PassContext& ctx, const Profile& profile, const TaskClass& cls) {
  Diagnosis d;
  // For machines that fail only on resources, in only one dimension: that
  // dimension's free amount. For machines failing only one constraint: count.
  std::map<std::string, std::vector<int64_t>> only_dim;
  std::map<std::string, int64_t> only_constraint;
  const ResourceVector& need = cls.need();
  for (const MachineView& m : ctx.views()) {
    ++d.machines;
    FilterResult first;
    int failures = 0;
    FilterResult only;
    for (const auto& f : profile.filters) {
      FilterResult r = f->Filter(ctx, cls, m);
      if (r.ok()) continue;
      if (first.ok()) first = r;
      only = r;
      ++failures;
    }
    if (first.ok()) {
      ++d.feasible;
      continue;
    }
    d.Add(first);
    if (failures != 1) continue;
    if (IsResourceShortfall(only.code)) {
      const ResourceVector& free = m.FreeFor(cls);
      std::vector<std::string> short_dims;
      for (const char* dim : kDims) {
        if (need.Get(dim) > free.Get(dim)) short_dims.push_back(dim);
      }
      for (const auto& [k, v] : need.extended) {
        if (v > free.Extended(k)) short_dims.push_back(k);
      }
      if (short_dims.size() == 1) only_dim[short_dims[0]].push_back(std::max<int64_t>(0, free.Get(short_dims[0])));
    } else if (only.code == ReasonCode::kConstraint) {
      ++only_constraint[std::string(only.detail)];
    }
  }
  // Suggestions, most machines first.
  std::vector<std::pair<int64_t, std::string>> sugg;
  const int64_t want = std::max<int64_t>(1, cls.pending);
  for (auto& [dim, frees] : only_dim) {
    std::sort(frees.begin(), frees.end(), std::greater<int64_t>());
    size_t k = static_cast<size_t>(std::min<int64_t>(want, static_cast<int64_t>(frees.size()))) - 1;
    int64_t v = frees[k];
    if (v <= 0) continue;
    int64_t n = std::count_if(frees.begin(), frees.end(), [v](int64_t f) { return f >= v; });
    sugg.push_back({n, absl::StrCat(dim, " <= ", FormatDimension(dim, v), " (asks ", FormatDimension(dim, need.Get(dim)),
                                    ") fits on ", n, " machine", n == 1 ? "" : "s")});
  }
  for (const auto& [c, n] : only_constraint) {
    sugg.push_back({n, absl::StrCat("without constraint ", c, ": ", n, " more machine", n == 1 ? "" : "s", " fit")});
  }
  std::stable_sort(sugg.begin(), sugg.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  for (size_t i = 0; i < sugg.size() && i < 3; ++i) d.suggestions.push_back(sugg[i].second);
  return d;
}

}  // namespace herd::sched
