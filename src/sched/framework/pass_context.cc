#include "sched/framework/pass_context.h"

#include <algorithm>
#include <map>
#include <tuple>

#include "base/framework_labels.h"
#include "absl/strings/str_cat.h"
#include "base/priority.h"
#include "cell/constraints.h"

namespace herd::sched {

PassContext::PassContext(const cell::CellState& state, const Options& options, int64_t now_ms)
    : state_(state), options_(options), now_ms_(now_ms) {
  views_.reserve(state.machines().size());
  double cap_cpu = 0, cap_mem = 0, req_cpu = 0, req_mem = 0;
  double run_prod_cpu = 0, run_nonprod_cpu = 0, pend_prod_cpu = 0, pend_nonprod_cpu = 0;
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
    v.devices = Devices::ForCapacity(m->capacity());
    if (!v.devices.empty()) {
      std::vector<ResourceVector> on;
      for (const cell::Task* t : m->tasks()) {
        // A task in an alloc uses the alloc's devices, not more of the machine's.
        if (!t->resources().extended.empty() && !t->in_alloc()) on.push_back(t->resources());
      }
      v.devices.PlaceAll(std::move(on));
      max_device_capacity_ = std::max(max_device_capacity_, v.devices.Capacity());
    }
    run_prod_cpu += static_cast<double>(m->prod_cpu());
    run_nonprod_cpu += static_cast<double>(m->nonprod_cpu());
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
  // (cpu, memory, extended, hard constraints as text) -> (tasks, a job with them)
  using Shape = std::tuple<int64_t, int64_t, std::vector<std::pair<std::string, int64_t>>, std::string>;
  std::map<Shape, std::pair<int64_t, const cell::Job*>> shapes;
  int64_t ext_tasks = 0;
  const bool devices = max_device_capacity_ > 0;
  absl::flat_hash_map<const cell::Job*, std::string> hard_text;  // a job's hard constraints, as text
  auto count_shape = [&](const cell::Task* t) {
    const ResourceVector& r = t->resources();
    ext_tasks += !r.extended.empty();
    if (!devices) return;
    auto [it, added] = hard_text.try_emplace(t->job());
    if (added) {
      for (const v1::Constraint& c : t->job()->spec.constraints()) {
        if (!c.soft()) absl::StrAppend(&it->second, cell::Describe(c), ";");
      }
    }
    auto& [n, job] = shapes[{r.cpu_millis, r.memory_bytes, r.extended, it->second}];
    ++n;
    job = t->job();
  };
  for (const cell::Task* t : state.pending()) {
    if (t->in_alloc()) continue;  // its alloc holds its resources
    if (IsFrameworkTask(t->job()->spec.labels())) continue;  // its framework places it
    req_cpu += static_cast<double>(t->resources().cpu_millis);
    req_mem += static_cast<double>(t->resources().memory_bytes);
    (IsProd(t->priority()) ? pend_prod_cpu : pend_nonprod_cpu) += static_cast<double>(t->resources().cpu_millis);
    count_shape(t);
    if (t->job() == last) continue;
    last = t->job();
    for (const auto& [attr, n] : t->job()->spec.max_per_domain()) DomainIndex(attr);
  }
  if (cap_cpu > 0 && cap_mem > 0 && req_mem > 0 && req_cpu > 0) {
    shape_ = (req_cpu / cap_cpu) / (req_mem / cap_mem);
  }
  if (options.stranding_shape > 0) shape_ = options.stranding_shape;
  const double all_cpu = run_prod_cpu + run_nonprod_cpu + pend_prod_cpu + pend_nonprod_cpu;
  if (all_cpu > 0) nonprod_cpu_share_ = (run_nonprod_cpu + pend_nonprod_cpu) / all_cpu;
  if (devices) {
    // The running tasks are the rest of the workload (only on cells with
    // devices: this walks every task once per pass).
    // Every machine's tasks up to kShapeSample of them; past that, every
    // k-th machine's (the shapes' shares, not their counts, matter).
    size_t running = 0;
    for (const MachineView& v : views_) running += v.machine->tasks().size();
    const size_t stride = std::max<size_t>(1, (running + kShapeSample - 1) / kShapeSample);
    for (size_t i = 0; i < views_.size(); i += stride) {
      for (const cell::Task* t : views_[i].machine->tasks()) count_shape(t);
    }
  }
  if (devices && ext_tasks > 0) {
    // Machines each set of hard constraints allows (up ones), counted once per set.
    std::map<std::string, int64_t> may;
    std::vector<std::pair<double, ExtendedShape>> weighed;
    for (const auto& [k, v] : shapes) {
      ExtendedShape e;
      e.need.cpu_millis = std::get<0>(k);
      e.need.memory_bytes = std::get<1>(k);
      e.need.extended = std::get<2>(k);
      for (const v1::Constraint& c : v.second->spec.constraints()) {
        if (!c.soft()) e.hard.push_back(&c);
      }
      auto [it, added] = may.try_emplace(std::get<3>(k), 0);
      if (added) {
        for (const MachineView& m : views_) {
          bool ok = m.up;
          for (const v1::Constraint* c : e.hard) ok = ok && cell::Matches(*c, m.machine->attributes());
          it->second += ok;
        }
      }
      if (it->second == 0) continue;
      weighed.push_back({static_cast<double>(v.first) * static_cast<double>(views_.size()) /
                             static_cast<double>(it->second),
                         std::move(e)});
    }
    // Heaviest first; ties in the map's order (smaller CPU first), for determinism.
    std::stable_sort(weighed.begin(), weighed.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
    if (weighed.size() > kMaxExtendedShapes) weighed.resize(kMaxExtendedShapes);
    double total = 0;
    for (const auto& [w, e] : weighed) total += w;
    for (auto& [w, e] : weighed) {
      e.share = w / total;
      extended_shapes_.push_back(std::move(e));
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

Devices PassContext::DevicesWithout(const MachineView& m, const std::vector<const cell::Task*>& victims) const {
  Devices d = Devices::ForCapacity(m.machine->capacity());
  std::vector<ResourceVector> on;
  auto gone = [&](const cell::Task* t) {
    return evicted_.contains(t) || std::find(victims.begin(), victims.end(), t) != victims.end();
  };
  for (const cell::Task* t : m.machine->tasks()) {
    if (!t->resources().extended.empty() && !t->in_alloc() && !gone(t)) on.push_back(t->resources());
  }
  d.PlaceAll(std::move(on));
  for (const cell::Task* t : m.placed) d.Take(t->resources());
  return d;
}

}  // namespace herd::sched
