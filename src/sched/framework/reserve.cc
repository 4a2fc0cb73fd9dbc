#include "sched/framework/reserve.h"

#include <algorithm>
#include <functional>
#include <utility>
#include <limits>
#include <map>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "base/priority.h"
#include "cell/constraints.h"
#include "sched/framework/pass_context.h"

namespace herd::sched {
namespace {

constexpr int64_t kMaxFit = 1 << 20;

std::string NeedKey(bool prod, const ResourceVector& limit, const ResourceVector& reservation) {
  std::string k = absl::StrCat(prod);
  for (const ResourceVector* r : {&limit, &reservation}) {
    absl::StrAppend(&k, ";", r->cpu_millis, ",", r->memory_bytes, ",", r->disk_bytes, ",", r->ports);
    for (const auto& [name, v] : r->extended) absl::StrAppend(&k, ",", name, "=", v);
  }
  return k;
}

}  // namespace

int64_t Reservations::FitCount(const ResourceVector& need, const ResourceVector& free, const Devices& devices) {
  int64_t n = kMaxFit;
  auto limit = [&n](int64_t have, int64_t want) {
    if (want > 0) n = std::min(n, have > 0 ? have / want : 0);
  };
  limit(free.cpu_millis, need.cpu_millis);
  limit(free.memory_bytes, need.memory_bytes);
  limit(free.disk_bytes, need.disk_bytes);
  limit(free.ports, need.ports);
  for (const auto& [name, v] : need.extended) {
    if (v <= 0) continue;
    const DeviceSet* d = IsDeviceResource(name) ? devices.Find(name) : nullptr;
    if (d == nullptr) {
      limit(free.Extended(name), v);
      continue;
    }
    if (const int64_t whole = WholeDevices(v); whole > 0) {
      n = std::min(n, d->FullyFree() / whole);
    } else {
      int64_t c = 0;
      for (int32_t f : d->free) c += f / v;
      n = std::min(n, c);
    }
  }
  return std::max<int64_t>(0, n);
}

void Reservations::Build(const cell::CellState& state, std::vector<MachineView>& views, HomesCache* cache) {
  double up = 0;
  for (const MachineView& v : views) up += v.up;
  if (up == 0) return;
  HomesCache local;
  if (cache == nullptr) cache = &local;
  if (cache->state != &state || cache->machines_revision != state.machines_revision() ||
      cache->machines != views.size()) {
    cache->state = &state;
    cache->machines_revision = state.machines_revision();
    cache->machines = views.size();
    cache->homes.clear();
  }
  struct Draft {
    Shape shape;
    std::vector<const cell::Job*> jobs;
  };
  std::vector<Draft> drafts;
  std::map<std::pair<int32_t, std::string>, int32_t> draft_of;  // (group, need) -> draft
  std::map<std::string, int32_t> group_of;  // hard constraints + extended needs -> group (-1: not scarce)
  std::map<std::vector<int32_t>, int32_t> group_of_homes;
  const cell::Job* last_job = nullptr;
  ResourceVector last_res;
  int32_t last = -1;
  for (const cell::Task* t : state.pending()) {
    if (t->in_alloc()) continue;  // goes to its alloc, on no machine of its choosing
    if (t->job() == last_job && t->resources() == last_res) {
      if (last >= 0) ++drafts[static_cast<size_t>(last)].shape.pending;
      continue;
    }
    last_job = t->job();
    last_res = t->resources();
    last = -1;
    std::string key = cell::HardConstraintKey(t->job()->spec);
    const bool hard = !key.empty();
    if (!hard && t->resources().extended.empty()) continue;
    for (const auto& [name, v] : t->resources().extended) absl::StrAppend(&key, "|", name, "=", v);
    auto [g, added] = group_of.try_emplace(key, -1);
    if (added) {
      auto [cached, fresh] = cache->homes.try_emplace(key);
      if (fresh) {
        for (const MachineView& m : views) {
          bool ok = true;
          for (const auto& [name, v] : t->resources().extended) ok = ok && m.machine->capacity().Extended(name) >= v;
          for (const v1::Constraint& c : t->job()->spec.constraints()) {
            if (!ok) break;
            if (!c.soft()) ok = cell::Matches(c, m.machine->attributes());
          }
          if (ok) cached->second.push_back(m.index);
        }
      }
      std::vector<int32_t> homes;
      for (int32_t m : cached->second) {
        if (views[static_cast<size_t>(m)].up) homes.push_back(m);
      }
      // Keys with the same machines (a GPU model, whatever share of a GPU)
      // are one group: they compete for the same capacity.
      if (!homes.empty() && static_cast<double>(homes.size()) <= kScarceShare * up) {
        auto [h, fresh] = group_of_homes.try_emplace(homes, static_cast<int32_t>(groups_.size()));
        if (fresh) groups_.push_back(Group{std::move(homes), {}});
        g->second = h->second;
      }
    }
    if (g->second < 0) continue;
    const bool prod = IsProd(t->priority());
    auto [d, fresh] = draft_of.try_emplace({g->second, NeedKey(prod, t->resources(), t->reservation())},
                                           static_cast<int32_t>(drafts.size()));
    if (fresh) drafts.push_back(Draft{Shape{g->second, t->resources(), t->reservation(), prod, 0}, {}});
    Draft& dr = drafts[static_cast<size_t>(d->second)];
    ++dr.shape.pending;
    if (dr.jobs.empty() || dr.jobs.back() != t->job()) dr.jobs.push_back(t->job());
    last = d->second;
  }
  if (drafts.empty()) return;
  std::vector<int64_t> group_tasks(groups_.size(), 0);
  for (const Draft& d : drafts) group_tasks[static_cast<size_t>(d.shape.group)] += d.shape.pending;
  // Hardest first within a group: the largest share of the group's mean machine.
  std::vector<ResourceVector> mean(groups_.size());
  for (size_t g = 0; g < groups_.size(); ++g) {
    for (int32_t m : groups_[g].homes) mean[g] += views[static_cast<size_t>(m)].machine->capacity();
  }
  auto hardness = [&](const Shape& s) {
    const ResourceVector& c = mean[static_cast<size_t>(s.group)];
    auto share = [](int64_t x, int64_t cap) { return cap > 0 ? static_cast<double>(x) / static_cast<double>(cap) : 0.0; };
    double h = std::max(share(s.limit.cpu_millis, c.cpu_millis), share(s.limit.memory_bytes, c.memory_bytes));
    for (const auto& [k, v] : s.limit.extended) h = std::max(h, share(v, c.Extended(k)));
    return h;
  };
  std::stable_sort(drafts.begin(), drafts.end(),
                   [&](const Draft& a, const Draft& b) { return hardness(a.shape) > hardness(b.shape); });
  for (Draft& d : drafts) {
    if (group_tasks[static_cast<size_t>(d.shape.group)] > kMaxGroupTasks) continue;
    const int32_t s = static_cast<int32_t>(shapes_.size());
    for (const cell::Job* j : d.jobs) job_shapes_[j].push_back(s);
    groups_[static_cast<size_t>(d.shape.group)].shapes.push_back(s);
    shapes_.push_back(std::move(d.shape));
  }
  if (shapes_.empty()) return;
  // Fewest machines first: the scarcest group plans first.
  groups_order_.clear();
  for (size_t g = 0; g < groups_.size(); ++g) {
    if (!groups_[g].shapes.empty()) groups_order_.push_back(static_cast<int32_t>(g));
  }
  std::stable_sort(groups_order_.begin(), groups_order_.end(), [&](int32_t a, int32_t b) {
    return groups_[static_cast<size_t>(a)].homes.size() < groups_[static_cast<size_t>(b)].homes.size();
  });
  plan_.assign(views.size(), {});
  for (int32_t g : groups_order_) {
    // Scores cached in earlier passes may hold another pass's plan.
    for (int32_t m : groups_[static_cast<size_t>(g)].homes) Bump(views[static_cast<size_t>(m)]);
  }
  Replan(views);
}

void Reservations::Bump(MachineView& m) {
  ++m.version;
  m.rescore_before = m.version;
}

int32_t Reservations::ShapeOf(const cell::Job* job, bool prod, const ResourceVector& need) const {
  auto it = job_shapes_.find(job);
  if (it == job_shapes_.end()) return -1;
  for (int32_t s : it->second) {
    const Shape& sh = shapes_[static_cast<size_t>(s)];
    if (sh.prod == prod && sh.need() == need) return s;
  }
  return -1;
}

void Reservations::Replan(std::vector<MachineView>& views) {
  ++replans_;
  std::vector<std::pair<int32_t, std::vector<std::pair<int32_t, int64_t>>>> old;
  old.reserve(planned_machines_.size());
  for (int32_t m : planned_machines_) old.push_back({m, std::move(plan_[static_cast<size_t>(m)])});
  for (int32_t m : planned_machines_) plan_[static_cast<size_t>(m)].clear();
  planned_machines_.clear();
  // What the plan has taken so far, per machine (only machines it touched).
  struct Scratch {
    ResourceVector free_prod, free_nonprod;
    Devices devices;
  };
  absl::flat_hash_map<int32_t, Scratch> scratch;
  auto get = [&](int32_t m) -> const Scratch* {
    auto it = scratch.find(m);
    return it == scratch.end() ? nullptr : &it->second;
  };
  for (int32_t g : groups_order_) {
    const Group& gr = groups_[static_cast<size_t>(g)];
    for (int32_t s : gr.shapes) {
      const Shape& sh = shapes_[static_cast<size_t>(s)];
      int64_t left = sh.pending;
      if (left <= 0) continue;
      // Best fit: the machine left fullest (mean CPU and memory share left
      // after one task), the first home on ties. Only a machine the plan
      // fills changes, so each home is ranked once per shape and again only
      // after the plan placed on it -- a heap, not a scan of every home per
      // placement (that scan was half of an online pass on an evenly
      // filled cell: thousands of homes, one or two tasks fitting on each).
      auto rank = [&](int32_t m, int64_t* fit) {
        const MachineView& v = views[static_cast<size_t>(m)];
        const Scratch* sc = get(m);
        const ResourceVector& fp = sc != nullptr ? sc->free_prod : v.free_prod;
        const ResourceVector& fn = sc != nullptr ? sc->free_nonprod : v.free_nonprod;
        const ResourceVector& free = sh.prod ? fp : fn;
        *fit = FitCount(sh.need(), free, sc != nullptr ? sc->devices : v.devices);
        const ResourceVector& cap = v.machine->capacity();
        auto rest = [](int64_t f, int64_t need, int64_t c) {
          return c > 0 ? static_cast<double>(f - need) / static_cast<double>(c) : 0.0;
        };
        return rest(free.cpu_millis, sh.need().cpu_millis, cap.cpu_millis) +
               rest(free.memory_bytes, sh.need().memory_bytes, cap.memory_bytes);
      };
      using Ranked = std::pair<double, size_t>;  // (share left, position in homes)
      std::vector<Ranked> heap;
      for (size_t i = 0; i < gr.homes.size(); ++i) {
        int64_t fit = 0;
        const double l = rank(gr.homes[i], &fit);
        if (fit > 0) heap.push_back({l, i});
      }
      std::make_heap(heap.begin(), heap.end(), std::greater<>());
      while (left > 0 && !heap.empty()) {
        std::pop_heap(heap.begin(), heap.end(), std::greater<>());
        const size_t pos = heap.back().second;
        heap.pop_back();
        const int32_t best = gr.homes[pos];
        int64_t best_fit = 0;
        rank(best, &best_fit);
        const MachineView& v = views[static_cast<size_t>(best)];
        auto [it, fresh] = scratch.try_emplace(best);
        if (fresh) it->second = Scratch{v.free_prod, v.free_nonprod, v.devices};
        Scratch& sc = it->second;
        // Filling the fullest machine leaves it fullest: place as many as fit.
        int64_t n = std::min(left, best_fit);
        int64_t placed = 0;
        for (; placed < n; ++placed) {
          if (FitCount(sh.need(), sh.prod ? sc.free_prod : sc.free_nonprod, sc.devices) == 0) break;
          sc.free_prod -= sh.limit;
          sc.free_nonprod -= sh.reservation;
          if (!sc.devices.empty()) sc.devices.Take(sh.limit);
        }
        if (placed == 0) break;
        auto& p = plan_[static_cast<size_t>(best)];
        if (p.empty()) planned_machines_.push_back(best);
        if (!p.empty() && p.back().first == s) {
          p.back().second += placed;
        } else {
          p.push_back({s, placed});
        }
        left -= placed;
        if (left > 0) {
          int64_t fit = 0;
          const double l = rank(best, &fit);
          if (fit > 0) {
            heap.push_back({l, pos});
            std::push_heap(heap.begin(), heap.end(), std::greater<>());
          }
        }
      }
    }
  }
  // Machines whose plan changed: their cached scores are stale.
  for (auto& [m, p] : old) {
    if (plan_[static_cast<size_t>(m)] != p) Bump(views[static_cast<size_t>(m)]);
  }
  absl::flat_hash_set<int32_t> had;
  for (const auto& [m, p] : old) had.insert(m);
  for (int32_t m : planned_machines_) {
    if (!had.contains(m)) Bump(views[static_cast<size_t>(m)]);
  }
}

bool Reservations::PlanFits(const MachineView& m, const ResourceVector* limit, const ResourceVector* reservation,
                            int32_t own_shape) const {
  ResourceVector fp = m.free_prod, fn = m.free_nonprod;
  Devices devices = m.devices;
  if (limit != nullptr) {
    fp -= *limit;
    fn -= *reservation;
    if (!devices.empty() && !devices.Take(*limit)) return false;
  }
  for (const auto& [s, n] : plan_[static_cast<size_t>(m.index)]) {
    const Shape& sh = shapes_[static_cast<size_t>(s)];
    // The task placed is one of those planned for its shape.
    const int64_t k = s == own_shape ? n - 1 : n;
    for (int64_t i = 0; i < k; ++i) {
      if (FitCount(sh.need(), sh.prod ? fp : fn, devices) == 0) return false;
      fp -= sh.limit;
      fn -= sh.reservation;
      if (!devices.empty()) devices.Take(sh.limit);
    }
  }
  return true;
}

void Reservations::Placed(const cell::Task* t, bool prod, const ResourceVector& need, MachineView& m,
                          std::vector<MachineView>& views) {
  const int32_t own = ShapeOf(t->job(), prod, need);
  if (own >= 0) {
    --shapes_[static_cast<size_t>(own)].pending;
    // It consumes one planned task of its shape: here if one was planned here, else anywhere.
    auto consume = [&](int32_t machine) {
      auto& p = plan_[static_cast<size_t>(machine)];
      for (size_t i = 0; i < p.size(); ++i) {
        if (p[i].first != own) continue;
        if (--p[i].second == 0) p.erase(p.begin() + static_cast<ptrdiff_t>(i));
        Bump(views[static_cast<size_t>(machine)]);
        return true;
      }
      return false;
    };
    if (!consume(m.index)) {
      for (int32_t pm : planned_machines_) {
        if (consume(pm)) break;
      }
    }
  }
  if (!plan_[static_cast<size_t>(m.index)].empty() && !PlanFits(m, nullptr, nullptr, -1)) Replan(views);
}

bool Reservations::Breaks(const TaskClass& cls, const MachineView& m) const {
  if (plan_.empty()) return false;
  const auto& here = plan_[static_cast<size_t>(m.index)];
  if (here.empty()) return false;
  const int32_t own = ShapeOf(cls.job, cls.prod, cls.need());
  return !PlanFits(m, &cls.limit, &cls.reservation, own);
}

}  // namespace herd::sched
