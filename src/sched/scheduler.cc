#include "sched/scheduler.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <optional>
#include <map>
#include <set>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "base/priority.h"
#include "base/rng.h"
#include "sched/diagnosis/diagnosis.h"
#include "sched/equiv/candidates.h"
#include "sched/equiv/classes.h"
#include "sched/equiv/score_cache.h"
#include "sched/framework/pass_context.h"
#include "sched/preempt/preempt.h"
#include "sched/queue/queue.h"

namespace herd::sched {
namespace {

struct ClassState {
  TaskClass cls;
  std::vector<Candidate> heap;
  std::vector<bool> in_heap;  // machines already candidates (seeded from the cache)
  size_t scan_start = 0;
  size_t scan_next = 0;
  bool scan_done = false;
  bool failed = false;
  bool preemption_tried = false;
  size_t enough = 48;  // feasible machines sought per scan (Options::enough_feasible)
  uint32_t round = 0;
  std::vector<int32_t> short_of;  // machines that failed only for resources
  std::vector<int32_t> unplaced;
  Diagnosis why;
};

// An alloc as this pass sees it: where it runs (-1: not running) and what
// it has left once this pass's placements are in.
struct AllocSlot {
  int32_t machine = -1;
  ResourceVector free;
  std::string name;  // "user/set/i"
  std::string why;   // why nothing can be placed in it (machine == -1)
};

// Tasks of one job left pending because of their allocs.
struct AllocPending {
  std::vector<int32_t> indexes;
  Diagnosis why;
};

}  // namespace

class PassRunner {
 public:
  PassRunner(Scheduler& s, const cell::CellState& state, int64_t now_ms, PassResult& out)
      : s_(s), opt_(s.options_), profile_(s.profile_), ctx_(state, s.options_, now_ms), out_(out),
        rng_(s.options_.seed * 1'000'003 + s.passes_) {}

  void Run();

 private:
  ClassState& ClassFor(const cell::Task* t);
  void SeedFromCache(ClassState& cs);
  bool StillFails(ClassState& cs);
  void SaveToCache();
  FilterResult EvalStatic(const ClassState& cs, const MachineView& m);
  FilterResult EvalDynamic(const ClassState& cs, const MachineView& m);
  double Score(const ClassState& cs, const MachineView& m, const Preemption* p);
  uint32_t JobVersion(const ClassState& cs) const;
  void Push(ClassState& cs, const MachineView& m, float score);
  // Examines machines in the pass's order until `enough` more feasible ones
  // joined the class's candidates (all machines without relaxed randomization).
  void Scan(ClassState& cs, size_t enough);
  // Checks machine `idx` for the class; if it fits, scores it into the heap.
  bool Consider(ClassState& cs, int32_t idx);
  // Fullest candidates: the machines the pass has packed most, examined by
  // each new class beside its random sample (Options::fullest_candidates).
  float Fullness(const MachineView& m) const;
  void UpdateFullness(const MachineView& m);
  void SeedFullest(ClassState& cs);
  std::optional<int32_t> Pick(ClassState& cs);
  std::optional<int32_t> PickPreempting(ClassState& cs, Preemption* chosen);
  void Commit(ClassState& cs, const cell::Task* t, int32_t machine, const Preemption* p);
  // A task in an alloc (JobSpec.alloc) goes where its alloc is, if the alloc
  // has room left; no choice of machine, no preemption (Borg §2.4).
  void PlaceInAlloc(const cell::Task* t);
  // A proposal to place `t` on `m`, to be committed by the master.
  v1::TaskScheduled Proposal(const cell::Task* t, const MachineView& m) const;
  AllocSlot& SlotOf(const std::string& set, int32_t index);

  Scheduler& s_;
  const Options& opt_;

  const Profile& profile_;
  PassContext ctx_;
  PassResult& out_;
  Rng rng_;
  std::vector<int32_t> order_;  // machine examination order
  std::set<std::pair<float, int32_t>> fullest_;  // (-fullness, machine): fullest first
  std::vector<float> fullness_;                  // per machine, its key in fullest_
  absl::flat_hash_map<ClassKey, std::unique_ptr<ClassState>> classes_;
  std::vector<ClassState*> class_list_;  // creation order (deterministic)
  ClassState* last_class_ = nullptr;
  absl::flat_hash_map<std::pair<std::string, int32_t>, AllocSlot> allocs_;
  std::map<std::string, AllocPending> alloc_pending_;  // by job id
};

ClassState& PassRunner::ClassFor(const cell::Task* t) {
  const bool shared = SharesClass(t, opt_.equivalence_classes);
  // The queue yields a job's tasks together: reuse the last class if it fits.
  if (shared && last_class_ != nullptr && last_class_->cls.job == t->job() && last_class_->cls.only_task == nullptr &&
      last_class_->cls.limit == t->resources()) {
    return *last_class_;
  }
  auto [it, added] = classes_.try_emplace(ClassKeyOf(t, shared));
  if (added) {
    it->second = std::make_unique<ClassState>();
    ClassState& cs = *it->second;
    cs.cls = MakeClass(ctx_, t, shared);
    const size_t n = ctx_.views().size();
    cs.scan_start = opt_.relaxed_randomization && n > 0 ? rng_.Uniform(n) : 0;
    class_list_.push_back(&cs);
    ++out_.classes;
    cs.enough = static_cast<size_t>(std::max(1, opt_.enough_feasible));
    if (opt_.policy == PackingPolicy::kHybrid && cs.cls.prod && ctx_.extended_shapes().empty() &&
        ctx_.HybridPacks(cs.cls)) {
      // Hybrid packs this class: best fit wants the tightest machine, which
      // a small random sample of a large cell rarely holds (issue #13).
      cs.enough = opt_.hybrid_pack_sample <= 0 ? n : std::max(cs.enough, static_cast<size_t>(opt_.hybrid_pack_sample));
    }
    if (opt_.score_cache && shared) {
      if (!StillFails(cs)) SeedFromCache(cs);
    }
    if (!cs.failed && cs.heap.empty() && !fullest_.empty()) SeedFullest(cs);
  }
  last_class_ = it->second.get();
  return *it->second;
}

FilterResult PassRunner::EvalStatic(const ClassState& cs, const MachineView& m) {
  for (const auto& f : profile_.filters) {
    if (!f->IsStatic()) continue;
    FilterResult r = f->Filter(ctx_, cs.cls, m);
    if (!r.ok()) return r;
  }
  return FilterResult::Ok();
}

FilterResult PassRunner::EvalDynamic(const ClassState& cs, const MachineView& m) {
  for (const auto& f : profile_.filters) {
    if (f->IsStatic()) continue;
    FilterResult r = f->Filter(ctx_, cs.cls, m);
    if (!r.ok()) return r;
  }
  return FilterResult::Ok();
}

double PassRunner::Score(const ClassState& cs, const MachineView& m, const Preemption* p) {
  ++out_.scores_computed;
  double sum = 0;
  for (const auto& s : profile_.scores) sum += s.weight * s.plugin->Score(ctx_, cs.cls, m, p);
  return profile_.total_weight > 0 ? sum / profile_.total_weight : 0;
}

uint32_t PassRunner::JobVersion(const ClassState& cs) const {
  // Candidates go stale when the job places a task if a score (spread) or a
  // filter (limits per failure domain) depends on where the job's tasks are.
  if (!profile_.scores_depend_on_job && cs.cls.domain_max.empty()) return 0;
  const JobPlacements* p = ctx_.FindPlacements(cs.cls.job);
  return p == nullptr ? 0 : p->version;
}

void PassRunner::Push(ClassState& cs, const MachineView& m, float score) {
  const ResourceVector& free = m.FreeFor(cs.cls);
  cs.heap.push_back(Candidate{score, m.index, m.version, JobVersion(cs), cs.round, free.cpu_millis, free.memory_bytes});
  std::push_heap(cs.heap.begin(), cs.heap.end(), HeapLess);
}

bool PassRunner::StillFails(ClassState& cs) {
  const Diagnosis* why =
      s_.cache_->StillFailing(ScoreCache::KeyOf(cs.cls), ctx_.state(), cs.cls.priority, opt_.preemption, s_.passes_);
  if (why == nullptr) return false;
  cs.failed = true;
  cs.why = *why;
  ++out_.classes_skipped;
  return true;
}

void PassRunner::SeedFromCache(ClassState& cs) {
  std::vector<ScoreCache::Entry> kept = s_.cache_->Candidates(ScoreCache::KeyOf(cs.cls), ctx_.views());
  if (kept.empty()) return;
  cs.in_heap.assign(ctx_.views().size(), false);
  // Stale by version, so each is re-checked before use; its score is kept
  // if the machine changed only a little (and nothing depends on the job).
  const uint32_t jv = profile_.scores_depend_on_job ? UINT32_MAX : 0;
  for (const ScoreCache::Entry& e : kept) {
    cs.heap.push_back(Candidate{e.score, e.machine, Candidate::kFromCache, jv, 0, e.cpu_at, e.mem_at});
    cs.in_heap[e.machine] = true;
  }
  std::make_heap(cs.heap.begin(), cs.heap.end(), HeapLess);
}

void PassRunner::SaveToCache() {
  ScoreCache& cache = *s_.cache_;
  const uint64_t pass = s_.passes_;
  for (ClassState* cs : class_list_) {
    if (cs->cls.only_task != nullptr) continue;
    const ScoreCache::Key key = ScoreCache::KeyOf(cs->cls);
    if (cs->failed) {
      cache.Failed(key, ctx_.state().revision(), cs->why, pass);
      continue;
    }
    cache.Fits(key);
    if (cs->heap.empty()) continue;
    std::vector<ScoreCache::Entry> entries;
    entries.reserve(cs->heap.size());
    for (const Candidate& c : cs->heap) {
      entries.push_back({c.machine, c.score, ctx_.views()[c.machine].machine->state_revision(), c.cpu_at, c.mem_at});
    }
    cache.Keep(key, std::move(entries), ctx_.views().size(), pass);
  }
  cache.Expire(pass);
}

void PassRunner::Scan(ClassState& cs, size_t enough) {
  const size_t n = ctx_.views().size();
  if (!opt_.relaxed_randomization) enough = n;
  size_t found = 0;
  while (cs.scan_next < n && found < enough) {
    size_t pos = opt_.relaxed_randomization ? (cs.scan_start + cs.scan_next) % n : cs.scan_next;
    ++cs.scan_next;
    const int32_t idx = opt_.relaxed_randomization ? order_[pos] : static_cast<int32_t>(pos);
    if (!cs.in_heap.empty() && cs.in_heap[idx]) continue;
    found += Consider(cs, idx);
  }
  if (cs.scan_next >= n) cs.scan_done = true;
}

bool PassRunner::Consider(ClassState& cs, int32_t idx) {
  ++out_.machines_evaluated;
  const MachineView& m = ctx_.views()[idx];
  if (!EvalStatic(cs, m).ok()) return false;
  FilterResult r = EvalDynamic(cs, m);
  if (!r.ok()) {
    if (IsResourceShortfall(r.code)) cs.short_of.push_back(idx);
    return false;
  }
  Push(cs, m, static_cast<float>(Score(cs, m, nullptr)));
  return true;
}

float PassRunner::Fullness(const MachineView& m) const {
  const ResourceVector& cap = m.machine->capacity();
  auto used = [](int64_t free, int64_t c) {
    return c <= 0 ? 1.0 : 1.0 - static_cast<double>(free) / static_cast<double>(c);
  };
  return static_cast<float>(
      (used(m.free_prod.cpu_millis, cap.cpu_millis) + used(m.free_prod.memory_bytes, cap.memory_bytes)) / 2);
}

void PassRunner::UpdateFullness(const MachineView& m) {
  if (fullness_.empty()) return;
  fullest_.erase({-fullness_[m.index], m.index});
  fullness_[m.index] = Fullness(m);
  fullest_.insert({-fullness_[m.index], m.index});
}

void PassRunner::SeedFullest(ClassState& cs) {
  const size_t want = static_cast<size_t>(opt_.fullest_candidates);
  // Bounded: in a full cell the fullest machines fit nothing.
  const size_t limit = 8 * want;
  cs.in_heap.assign(ctx_.views().size(), false);
  size_t found = 0, examined = 0;
  for (const auto& [key, idx] : fullest_) {
    if (found >= want || examined >= limit) break;
    ++examined;
    if (Consider(cs, idx)) {
      cs.in_heap[idx] = true;
      ++found;
    }
  }
  // And the random sample, as without them (the scan skips those above).
  Scan(cs, cs.enough);
}

std::optional<int32_t> PassRunner::Pick(ClassState& cs) {
  ++cs.round;
  if (!opt_.score_cache) {
    // No score cache: every candidate is checked and scored afresh for
    // every task (the ablation of Borg §3.4's score caching).
    std::vector<Candidate> old;
    old.swap(cs.heap);
    for (const Candidate& c : old) {
      const MachineView& m = ctx_.views()[c.machine];
      ++out_.machines_evaluated;
      FilterResult r = EvalDynamic(cs, m);
      if (!r.ok()) {
        if (IsResourceShortfall(r.code)) cs.short_of.push_back(c.machine);
        continue;
      }
      Push(cs, m, static_cast<float>(Score(cs, m, nullptr)));
    }
  }
  while (true) {
    while (!cs.heap.empty()) {
      const Candidate top = cs.heap.front();
      const MachineView& m = ctx_.views()[top.machine];
      const uint32_t jv = JobVersion(cs);
      const bool fresh =
          top.version == m.version && top.job_version == jv && (opt_.score_cache || top.round == cs.round);
      if (fresh) return top.machine;
      std::pop_heap(cs.heap.begin(), cs.heap.end(), HeapLess);
      cs.heap.pop_back();
      ++out_.machines_evaluated;
      FilterResult r = EvalDynamic(cs, m);
      if (!r.ok()) {
        if (IsResourceShortfall(r.code)) cs.short_of.push_back(top.machine);
        continue;
      }
      // Ignore small changes: keep the score while free CPU and memory moved
      // by less than `small_change` of the machine's capacity.
      float score = top.score;
      const ResourceVector& free = m.FreeFor(cs.cls);
      const ResourceVector& cap = m.machine->capacity();
      const bool reserved =
          m.rescore_before > 0 && (top.version == Candidate::kFromCache || top.version < m.rescore_before);
      bool small = opt_.score_cache && top.job_version == jv && !reserved &&
                   std::abs(free.cpu_millis - top.cpu_at) <= opt_.small_change * cap.cpu_millis &&
                   std::abs(free.memory_bytes - top.mem_at) <= opt_.small_change * cap.memory_bytes;
      if (!small) score = static_cast<float>(Score(cs, m, nullptr));
      Candidate c{score, top.machine, m.version, jv, cs.round, small ? top.cpu_at : free.cpu_millis,
                  small ? top.mem_at : free.memory_bytes};
      cs.heap.push_back(c);
      std::push_heap(cs.heap.begin(), cs.heap.end(), HeapLess);
    }
    if (cs.scan_done) return std::nullopt;
    Scan(cs, cs.enough);
  }
}

std::optional<int32_t> PassRunner::PickPreempting(ClassState& cs, Preemption* chosen) {
  std::sort(cs.short_of.begin(), cs.short_of.end());
  cs.short_of.erase(std::unique(cs.short_of.begin(), cs.short_of.end()), cs.short_of.end());
  std::optional<int32_t> best;
  double best_score = -1;
  int examined = 0;
  // Examine candidates in the pass's random order, at most the configured number.
  std::vector<int32_t> cands = cs.short_of;
  if (opt_.relaxed_randomization && static_cast<int32_t>(cands.size()) > opt_.max_preemption_candidates) {
    for (size_t i = 0; i < static_cast<size_t>(opt_.max_preemption_candidates); ++i) {
      std::swap(cands[i], cands[i + rng_.Uniform(cands.size() - i)]);
    }
    cands.resize(static_cast<size_t>(opt_.max_preemption_candidates));
  }
  for (int32_t idx : cands) {
    const MachineView& m = ctx_.views()[idx];
    if (m.min_priority >= cs.cls.priority) continue;  // nothing lower runs there
    cs.preemption_tried = true;
    ++examined;
    std::optional<Preemption> p =
        FindVictims(cs.cls.priority, cs.cls.prod, cs.cls.need(), m.FreeFor(cs.cls), *m.machine, ctx_.evicted());
    if (!p) continue;
    // Devices: the victims' shares must leave room on the right devices.
    if (!m.devices.empty() && !cs.cls.need().extended.empty() &&
        !ctx_.DevicesWithout(m, p->victims).Fits(cs.cls.need())) {
      continue;
    }
    double score = Score(cs, m, &*p);
    if (!best || score > best_score || (score == best_score && p->BetterThan(*chosen))) {
      best = idx;
      best_score = score;
      *chosen = std::move(*p);
    }
  }
  return best;
}

void PassRunner::Commit(ClassState& cs, const cell::Task* t, int32_t machine, const Preemption* p) {
  MachineView& m = ctx_.views()[machine];
  v1::TaskScheduled prop = Proposal(t, m);
  if (p != nullptr) {
    for (const cell::Task* v : p->victims) {
      ctx_.Count(v->job(), m, -1);  // before it is marked evicted
      ctx_.evicted().insert(v);
      m.free_prod += v->resources();
      m.free_nonprod += v->reservation();
      (IsProd(v->priority()) ? m.prod_cpu : m.nonprod_cpu) -= v->resources().cpu_millis;
      v1::TaskRef* ref = prop.add_victims();
      ref->set_job(v->job()->id);
      ref->set_index(v->index());
      ref->set_incarnation(v->incarnation());
      ++out_.preemptions;
    }
  }
  m.free_prod -= t->resources();
  m.free_nonprod -= t->reservation();
  if (!m.devices.empty()) {
    if (p != nullptr && !p->victims.empty()) m.devices = ctx_.DevicesWithout(m, {});  // victims are in evicted()
    m.devices.Take(t->resources());
    m.placed.push_back(t);
  }
  (cs.cls.prod ? m.prod_cpu : m.nonprod_cpu) += t->resources().cpu_millis;
  if (t->is_alloc()) {
    // Placed in this pass: the tasks that run in it may follow in this pass.
    AllocSlot& slot = allocs_[std::make_pair(t->job()->id, t->index())];
    slot = AllocSlot{machine, t->resources(), absl::StrCat(t->job()->id, "/", t->index()), ""};
  }
  m.min_priority = std::min(m.min_priority, t->priority());
  ++m.version;
  if (!ctx_.reservations().empty()) ctx_.reservations().Placed(t, cs.cls.prod, cs.cls.need(), m, ctx_.views());
  UpdateFullness(m);
  ctx_.Count(t->job(), m, +1);
  out_.proposals.push_back(std::move(prop));
}

AllocSlot& PassRunner::SlotOf(const std::string& set, int32_t index) {
  auto [it, added] = allocs_.try_emplace(std::make_pair(set, index));
  AllocSlot& slot = it->second;
  if (!added) return slot;
  slot.name = absl::StrCat(set, "/", index);
  const cell::Job* j = ctx_.state().FindJob(set);
  const cell::Task* a = j != nullptr && j->alloc_set() && index < static_cast<int32_t>(j->tasks.size())
                            ? &j->tasks[index]
                            : nullptr;
  if (a == nullptr) {
    slot.why = absl::StrCat("no alloc ", slot.name);
  } else if (a->state() != v1::Task::RUNNING || ctx_.evicted().contains(a)) {
    slot.why = absl::StrCat("alloc ", slot.name, " is not running");
  } else if (!ctx_.views()[a->machine()->order()].up) {
    slot.why = absl::StrCat("the machine of alloc ", slot.name, " is not up");
  } else {
    slot.machine = static_cast<int32_t>(a->machine()->order());
    slot.free = ctx_.state().AllocFree(*a);
  }
  return slot;
}

void PassRunner::PlaceInAlloc(const cell::Task* t) {
  AllocSlot& slot = SlotOf(t->job()->spec.alloc(), t->index());
  std::string why = slot.why;
  if (slot.machine >= 0) {
    if (auto dim = t->resources().FirstShortfall(slot.free)) {
      why = absl::StrCat("insufficient ", *dim, " in alloc ", slot.name);
    }
  }
  if (!why.empty()) {
    AllocPending& p = alloc_pending_[t->job()->id];
    p.indexes.push_back(t->index());
    p.why.machines = 1;
    ++p.why.reasons[why];
    ++out_.unplaced;
    return;
  }
  slot.free -= t->resources();
  out_.proposals.push_back(Proposal(t, ctx_.views()[slot.machine]));
}

v1::TaskScheduled PassRunner::Proposal(const cell::Task* t, const MachineView& m) const {
  v1::TaskScheduled prop;
  prop.set_job(t->job()->id);
  prop.set_index(t->index());
  prop.set_expect_state_revision(t->state_revision());
  prop.set_machine(m.machine->name());
  prop.set_based_on_revision(ctx_.state().revision());
  prop.set_scheduler(opt_.name);
  return prop;
}

void PassRunner::Run() {
  const size_t n = ctx_.views().size();
  order_.resize(n);
  std::iota(order_.begin(), order_.end(), 0);
  if (opt_.relaxed_randomization) std::shuffle(order_.begin(), order_.end(), rng_.engine());
  if (opt_.relaxed_randomization && opt_.fullest_candidates > 0) {
    fullness_.resize(n);
    for (const MachineView& m : ctx_.views()) {
      fullness_[m.index] = Fullness(m);
      if (m.up) fullest_.insert({-fullness_[m.index], m.index});
    }
  }

  if (profile_.Weight("reserve") > 0) ctx_.reservations().Build(ctx_.state(), ctx_.views(), s_.homes_.get());
  PendingQueue queue(ctx_.state(), opt_.order, s_.passes_, opt_.task_order);
  std::vector<const cell::Task*> in_allocs;
  while (const cell::Task* t = queue.Next()) {
    if (opt_.max_tasks_per_pass > 0 && out_.tasks_considered >= opt_.max_tasks_per_pass) break;
    ++out_.tasks_considered;
    if (t->in_alloc()) {
      in_allocs.push_back(t);  // after the allocs this pass places
      continue;
    }
    ClassState& cs = ClassFor(t);
    if (opt_.max_unplaced >= 0 && out_.unplaced > opt_.max_unplaced) {
      out_.stopped_early = true;
      break;
    }
    if (cs.failed) {
      cs.unplaced.push_back(t->index());
      ++out_.unplaced;
      continue;
    }
    std::optional<int32_t> m = Pick(cs);
    Preemption pre;
    bool preempting = false;
    if (!m && opt_.preemption && !cs.short_of.empty()) {
      m = PickPreempting(cs, &pre);
      preempting = m.has_value();
    }
    if (!m) {
      cs.failed = true;
      cs.why = Diagnose(ctx_, profile_, cs.cls);
      cs.why.preemption_tried = cs.preemption_tried;
      cs.unplaced.push_back(t->index());
      ++out_.unplaced;
      continue;
    }
    Commit(cs, t, *m, preempting ? &pre : nullptr);
    queue.Placed(t, t->resources());
    // Relaxed randomization, topped up: each placement draws one more
    // feasible machine into the class's candidates, so a big class spreads
    // over a sample that grows with it instead of filling its first sample.
    if (opt_.relaxed_randomization && !cs.scan_done) Scan(cs, 1);
  }
  for (const cell::Task* t : in_allocs) PlaceInAlloc(t);  // in queue order
  out_.reserved_shapes = static_cast<int64_t>(ctx_.reservations().shapes().size());
  out_.replans = ctx_.reservations().replans();
  // The cache copies each failed class's diagnosis: save before the
  // diagnoses move into the result, or later passes skip the class with an
  // empty one ("0/3 machines fit", no reasons; issue #15).
  if (opt_.score_cache) SaveToCache();
  for (ClassState* cs : class_list_) {
    if (cs->unplaced.empty()) continue;
    out_.pending.push_back(PendingClass{cs->cls.job->id, std::move(cs->unplaced), std::move(cs->why)});
  }
  for (auto& [job, p] : alloc_pending_) out_.pending.push_back(PendingClass{job, std::move(p.indexes), std::move(p.why)});
}

Scheduler::Scheduler(Options options)
    : options_(std::move(options)),
      profile_(MustBuildProfile(options_)),
      cache_(std::make_unique<ScoreCache>()),
      homes_(std::make_unique<HomesCache>()) {}
Scheduler::~Scheduler() = default;
Scheduler::Scheduler(Scheduler&&) noexcept = default;
Scheduler& Scheduler::operator=(Scheduler&&) noexcept = default;

void Scheduler::ForgetFailures() { cache_->ForgetFailures(); }

PassResult Scheduler::RunPass(const cell::CellState& state, int64_t now_ms) {
  PassResult out;
  out.based_on_revision = state.revision();
  PassRunner(*this, state, now_ms, out).Run();
  ++passes_;
  return out;
}

}  // namespace herd::sched
