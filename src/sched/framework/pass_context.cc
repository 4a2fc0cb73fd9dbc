#include "sched/framework/pass_context.h"

#include <algorithm>
#include <map>
#include <tuple>

#include "base/priority.h"
#include "cell/constraints.h"

namespace herd::sched {

PassContext::PassContext(const cell::CellState& state, const Options& options, int64_t now_ms)
    : state_(state), options_(options), now_ms_(now_ms) {
  views_.reserve(state.machines().size());
  double cap_cpu = 0, cap_mem = 0, req_cpu = 0, req_mem = 0;
  for (const cell::Machine* m : state.machines()) {
    MachineView v;
    v.machine = m;
    v.index = static_cast<int32_t>(views_.size());
    v.up = m->state() == v1::Machine::UP && !m->drained();  // drained: nothing new goes there
    v.free_prod = m->capacity() - m->allocated();
    v.free_nonprod = m->capacity() - m->reserved();
    v.prod_cpu = m->prod_cpu();
    v.nonprod_cpu = m->nonprod_cpu();
    v.min_priority = m->MinPriority();
    if (m->state() == v1::Machine::UP) {
      cap_cpu += static_cast<double>(m->capacity().cpu_millis);
      cap_mem += static_cast<double>(m->capacity().memory_bytes);
      req_cpu += static_cast<double>(m->allocated().cpu_millis);
      req_mem += static_cast<double>(m->allocated().memory_bytes);
    }
    views_.push_back(std::move(v));
  }
  // Domains: the machine, the spread domains, and every attribute a pending
  // job limits its tasks per. Fixed for the pass.
  domains_.push_back("machine");
  values_.emplace_back();
  for (const std::string& d : options.spread_domains) spread_.push_back(DomainIndex(d));
  const cell::Job* last = nullptr;
  std::map<std::tuple<int64_t, int64_t, std::vector<std::pair<std::string, int64_t>>>, int64_t> ext;
  int64_t ext_tasks = 0;
  for (const cell::Task* t : state.pending()) {
    req_cpu += static_cast<double>(t->resources().cpu_millis);
    req_mem += static_cast<double>(t->resources().memory_bytes);
    if (!t->resources().extended.empty()) {
      ++ext[{t->resources().cpu_millis, t->resources().memory_bytes, t->resources().extended}];
      ++ext_tasks;
    }
    if (t->job() == last) continue;
    last = t->job();
    for (const auto& [attr, n] : t->job()->spec.max_per_domain()) DomainIndex(attr);
  }
  if (cap_cpu > 0 && cap_mem > 0 && req_mem > 0 && req_cpu > 0) {
    shape_ = (req_cpu / cap_cpu) / (req_mem / cap_mem);
  }
  if (options.stranding_shape > 0) shape_ = options.stranding_shape;
  if (ext_tasks > 0) {
    std::vector<std::pair<int64_t, ResourceVector>> by_count;
    for (const auto& [k, n] : ext) {
      ResourceVector r;
      r.cpu_millis = std::get<0>(k);
      r.memory_bytes = std::get<1>(k);
      r.extended = std::get<2>(k);
      by_count.push_back({n, std::move(r)});
    }
    // Most common first; ties by the smaller CPU, for determinism.
    std::stable_sort(by_count.begin(), by_count.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
    if (by_count.size() > kMaxExtendedShapes) by_count.resize(kMaxExtendedShapes);
    int64_t kept = 0;
    for (const auto& [n, r] : by_count) kept += n;
    for (auto& [n, r] : by_count) {
      extended_shapes_.push_back({std::move(r), static_cast<double>(n) / static_cast<double>(kept)});
    }
  }
  for (MachineView& v : views_) v.domain.assign(domains_.size(), -1);
  for (size_t d = 0; d < domains_.size(); ++d) FillDomain(static_cast<int>(d));
}

int PassContext::FindDomain(absl::string_view attribute) const {
  for (size_t i = 0; i < domains_.size(); ++i) {
    if (domains_[i] == attribute) return static_cast<int>(i);
  }
  return -1;
}

int PassContext::DomainIndex(absl::string_view attribute) {
  int i = FindDomain(attribute);
  if (i >= 0) return i;
  domains_.emplace_back(attribute);
  values_.emplace_back();
  return static_cast<int>(domains_.size() - 1);
}

int32_t PassContext::InternValue(int domain, absl::string_view value) {
  auto& ids = values_[domain];
  auto it = ids.find(value);
  if (it != ids.end()) return it->second;
  int32_t id = static_cast<int32_t>(ids.size());
  ids.emplace(std::string(value), id);
  return id;
}

void PassContext::FillDomain(int domain) {
  for (MachineView& v : views_) {
    if (domain == 0) {
      v.domain[0] = v.index;
      continue;
    }
    auto it = v.machine->attributes().find(domains_[domain]);
    v.domain[domain] = it == v.machine->attributes().end() ? -1 : InternValue(domain, it->second);
  }
}

JobPlacements& PassContext::Placements(const cell::Job* job) const {
  auto [it, added] = jobs_.try_emplace(job);
  if (added) {
    for (const cell::Task& t : job->tasks) {
      if (t.state() != v1::Task::RUNNING || t.machine() == nullptr || evicted_.contains(&t)) continue;
      const MachineView& v = views_[t.machine()->order()];
      for (size_t d = 0; d < domains_.size(); ++d) {
        if (v.domain[d] >= 0) ++it->second.per_domain[DomainKey(static_cast<int>(d), v.domain[d])];
      }
    }
  }
  return it->second;
}

const JobPlacements* PassContext::FindPlacements(const cell::Job* job) const {
  auto it = jobs_.find(job);
  return it == jobs_.end() ? nullptr : &it->second;
}

int32_t PassContext::CountIn(const cell::Job* job, int domain, int32_t value) const {
  if (value < 0) return 0;
  const JobPlacements& p = Placements(job);
  auto it = p.per_domain.find(DomainKey(domain, value));
  return it == p.per_domain.end() ? 0 : it->second;
}

void PassContext::Count(const cell::Job* job, const MachineView& m, int delta) {
  JobPlacements& p = Placements(job);
  for (size_t d = 0; d < domains_.size(); ++d) {
    if (m.domain[d] < 0) continue;
    int32_t& n = p.per_domain[DomainKey(static_cast<int>(d), m.domain[d])];
    n += delta;
  }
  ++p.version;
}

}  // namespace herd::sched
