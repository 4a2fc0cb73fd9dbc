#include "sched/scheduler.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <optional>

#include "absl/container/flat_hash_map.h"
#include "base/priority.h"
#include "base/rng.h"
#include "sched/diagnosis/diagnosis.h"
#include "cell/constraints.h"
#include "sched/framework/pass_context.h"
#include "sched/preempt/preempt.h"
#include "sched/queue/queue.h"

namespace herd::sched {
namespace {

// A feasible machine in a class's heap, with the score it had when computed
// and what it was computed against.
struct Candidate {
  float score = 0;
  int32_t machine = 0;
  uint32_t version = 0;      // MachineView::version when scored (UINT32_MAX: from an earlier pass)
  uint32_t job_version = 0;  // JobPlacements::version when scored
  uint32_t round = 0;        // ClassState::round when scored (score cache off)
  int64_t cpu_at = 0;        // free CPU and memory when scored
  int64_t mem_at = 0;
};

// std::push_heap keeps the greatest first: higher score, then lower machine.
bool HeapLess(const Candidate& a, const Candidate& b) {
  if (a.score != b.score) return a.score < b.score;
  return a.machine > b.machine;
}

// Identifies an equivalence class: the job and the resources, or one task.
struct ClassKey {
  const cell::Job* job = nullptr;
  const cell::Task* task = nullptr;  // classes of one
  ResourceVector resources;
  bool operator==(const ClassKey& o) const { return job == o.job && task == o.task && resources == o.resources; }
  template <typename H>
  friend H AbslHashValue(H h, const ClassKey& k) {
    return H::combine(std::move(h), k.job, k.task, k.resources.cpu_millis, k.resources.memory_bytes,
                      k.resources.disk_bytes, k.resources.ports, k.resources.extended.size());
  }
};

struct ClassState {
  TaskClass cls;
  std::vector<Candidate> heap;
  std::vector<bool> in_heap;  // machines already candidates (seeded from the cache)
  size_t scan_start = 0;
  size_t scan_next = 0;
  bool scan_done = false;
  bool failed = false;
  bool preemption_tried = false;
  uint32_t round = 0;
  std::vector<int32_t> short_of;  // machines that failed only for resources
  std::vector<int32_t> unplaced;
  Diagnosis why;
};

}  // namespace

// Candidates kept from one pass to the next for classes still pending, so an
// online pass resumes where the last one stopped instead of rescoring.
class ScoreCache {
 public:
  struct Entry {
    int32_t machine;
    float score;
    int64_t machine_revision;  // cell::Machine::state_revision when scored
    int64_t cpu_at, mem_at;
  };
  struct Key {
    std::string job;
    int64_t submit_revision;
    ResourceVector resources;
    bool operator==(const Key& o) const {
      return job == o.job && submit_revision == o.submit_revision && resources == o.resources;
    }
    template <typename H>
    friend H AbslHashValue(H h, const Key& k) {
      return H::combine(std::move(h), k.job, k.submit_revision, k.resources.cpu_millis, k.resources.memory_bytes);
    }
  };
  struct Value {
    std::vector<Entry> entries;
    size_t machines = 0;  // machine count when cached (indexes are positions)
    uint64_t pass = 0;
  };
  absl::flat_hash_map<Key, Value> classes;
  size_t total_entries = 0;
  // Classes that found no machine, and when: they are not re-examined until
  // the cell frees capacity (or, if they may preempt, places lower-priority
  // work) -- what makes an online pass over a backlog cheap.
  struct Failed {
    int64_t revision = 0;
    Diagnosis why;
    uint64_t pass = 0;
  };
  absl::flat_hash_map<Key, Failed> failed;
  static constexpr size_t kMaxEntries = 4'000'000;
};

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
  std::optional<int32_t> Pick(ClassState& cs);
  std::optional<int32_t> PickPreempting(ClassState& cs, Preemption* chosen);
  void Commit(ClassState& cs, const cell::Task* t, int32_t machine, const Preemption* p);

  Scheduler& s_;
  const Options& opt_;

  const Profile& profile_;
  PassContext ctx_;
  PassResult& out_;
  Rng rng_;
  std::vector<int32_t> order_;  // machine examination order
  absl::flat_hash_map<ClassKey, std::unique_ptr<ClassState>> classes_;
  std::vector<ClassState*> class_list_;  // creation order (deterministic)
  ClassState* last_class_ = nullptr;
};

ClassState& PassRunner::ClassFor(const cell::Task* t) {
  const bool shared = opt_.equivalence_classes && t->avoid.empty();
  // The queue yields a job's tasks together: reuse the last class if it fits.
  if (shared && last_class_ != nullptr && last_class_->cls.job == t->job && last_class_->cls.only_task == nullptr &&
      last_class_->cls.limit == t->resources) {
    return *last_class_;
  }
  ClassKey key{t->job, shared ? nullptr : t, t->resources};
  auto [it, added] = classes_.try_emplace(key);
  if (added) {
    it->second = std::make_unique<ClassState>();
    ClassState& cs = *it->second;
    cs.cls = MakeClass(ctx_, t, shared);
    const size_t n = ctx_.views().size();
    cs.scan_start = opt_.relaxed_randomization && n > 0 ? rng_.Uniform(n) : 0;
    class_list_.push_back(&cs);
    ++out_.classes;
    if (opt_.score_cache && shared) {
      if (!StillFails(cs)) SeedFromCache(cs);
    }
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
  auto it = s_.cache_->failed.find(ScoreCache::Key{cs.cls.job->id, cs.cls.job->submit_revision, cs.cls.limit});
  if (it == s_.cache_->failed.end()) return false;
  const cell::CellState& st = ctx_.state();
  const int64_t at = it->second.revision;
  bool valid = st.freed_revision() <= at;
  if (valid && opt_.preemption) {
    for (int32_t p = 0; p < cs.cls.priority && valid; ++p) {
      if (MayPreempt(cs.cls.priority, p) && st.placed_revision(p) > at) valid = false;
    }
  }
  if (!valid) {
    s_.cache_->failed.erase(it);
    return false;
  }
  cs.failed = true;
  cs.why = it->second.why;
  it->second.pass = s_.passes_;
  ++out_.classes_skipped;
  return true;
}

void PassRunner::SeedFromCache(ClassState& cs) {
  auto it = s_.cache_->classes.find(
      ScoreCache::Key{cs.cls.job->id, cs.cls.job->submit_revision, cs.cls.limit});
  if (it == s_.cache_->classes.end() || it->second.machines != ctx_.views().size()) return;
  cs.in_heap.assign(ctx_.views().size(), false);
  for (const ScoreCache::Entry& e : it->second.entries) {
    const MachineView& m = ctx_.views()[e.machine];
    // A machine whose state or attributes changed is scanned afresh.
    if (m.machine->state_revision != e.machine_revision) continue;
    // Stale by version, so it is re-checked before use; its score is kept
    // if the machine changed only a little (and nothing depends on the job).
    uint32_t jv = profile_.scores_depend_on_job ? UINT32_MAX : 0;
    cs.heap.push_back(Candidate{e.score, e.machine, UINT32_MAX, jv, 0, e.cpu_at, e.mem_at});
    cs.in_heap[e.machine] = true;
  }
  std::make_heap(cs.heap.begin(), cs.heap.end(), HeapLess);
}

void PassRunner::SaveToCache() {
  ScoreCache& cache = *s_.cache_;
  const uint64_t pass = s_.passes_;
  for (ClassState* cs : class_list_) {
    if (cs->cls.only_task != nullptr) continue;
    ScoreCache::Key fkey{cs->cls.job->id, cs->cls.job->submit_revision, cs->cls.limit};
    if (cs->failed) {
      ScoreCache::Failed& f = cache.failed[fkey];
      if (f.pass != pass || f.revision == 0) {
        f.revision = ctx_.state().revision();
        f.why = cs->why;
      }
      f.pass = pass;
    } else {
      cache.failed.erase(fkey);
    }
    if (cs->cls.only_task != nullptr || cs->heap.empty() || cs->failed) continue;
    ScoreCache::Key key{cs->cls.job->id, cs->cls.job->submit_revision, cs->cls.limit};
    ScoreCache::Value& v = cache.classes[key];
    cache.total_entries -= v.entries.size();
    v.entries.clear();
    v.machines = ctx_.views().size();
    v.pass = pass;
    for (const Candidate& c : cs->heap) {
      const MachineView& m = ctx_.views()[c.machine];
      v.entries.push_back({c.machine, c.score, m.machine->state_revision, c.cpu_at, c.mem_at});
    }
    cache.total_entries += v.entries.size();
  }
  for (auto it = cache.failed.begin(); it != cache.failed.end();) {
    if (it->second.pass + 8 < pass) {
      cache.failed.erase(it++);
    } else {
      ++it;
    }
  }
  // Forget classes not seen for a while, and the oldest when too big.
  for (auto it = cache.classes.begin(); it != cache.classes.end();) {
    if (it->second.pass + 8 < pass || (cache.total_entries > ScoreCache::kMaxEntries && it->second.pass < pass)) {
      cache.total_entries -= it->second.entries.size();
      cache.classes.erase(it++);
    } else {
      ++it;
    }
  }
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
    ++out_.machines_evaluated;
    const MachineView& m = ctx_.views()[idx];
    if (!EvalStatic(cs, m).ok()) continue;
    FilterResult r = EvalDynamic(cs, m);
    if (!r.ok()) {
      if (IsResourceShortfall(r.code)) cs.short_of.push_back(idx);
      continue;
    }
    Push(cs, m, static_cast<float>(Score(cs, m, nullptr)));
    ++found;
  }
  if (cs.scan_next >= n) cs.scan_done = true;
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
      const ResourceVector& cap = m.machine->capacity;
      bool small = opt_.score_cache && top.job_version == jv &&
                   std::abs(free.cpu_millis - top.cpu_at) <= opt_.small_change * cap.cpu_millis &&
                   std::abs(free.memory_bytes - top.mem_at) <= opt_.small_change * cap.memory_bytes;
      if (!small) score = static_cast<float>(Score(cs, m, nullptr));
      Candidate c{score, top.machine, m.version, jv, cs.round, small ? top.cpu_at : free.cpu_millis,
                  small ? top.mem_at : free.memory_bytes};
      cs.heap.push_back(c);
      std::push_heap(cs.heap.begin(), cs.heap.end(), HeapLess);
    }
    if (cs.scan_done) return std::nullopt;
    Scan(cs, static_cast<size_t>(std::max(1, opt_.enough_feasible)));
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
  v1::TaskScheduled prop;
  prop.set_job(t->job->id);
  prop.set_index(t->index);
  prop.set_expect_state_revision(t->state_revision);
  prop.set_machine(m.machine->name);
  prop.set_based_on_revision(ctx_.state().revision());
  prop.set_scheduler(opt_.name);
  if (p != nullptr) {
    for (const cell::Task* v : p->victims) {
      ctx_.Count(v->job, m, -1);  // before it is marked evicted
      ctx_.evicted().insert(v);
      m.free_prod += v->resources;
      m.free_nonprod += v->reservation();
      (IsProd(v->priority()) ? m.prod_cpu : m.nonprod_cpu) -= v->resources.cpu_millis;
      v1::TaskRef* ref = prop.add_victims();
      ref->set_job(v->job->id);
      ref->set_index(v->index);
      ref->set_incarnation(v->incarnation);
      ++out_.preemptions;
    }
  }
  m.free_prod -= t->resources;
  m.free_nonprod -= t->reservation();
  (cs.cls.prod ? m.prod_cpu : m.nonprod_cpu) += t->resources.cpu_millis;
  m.min_priority = std::min(m.min_priority, t->priority());
  ++m.version;
  ctx_.Count(t->job, m, +1);
  out_.proposals.push_back(std::move(prop));
}

void PassRunner::Run() {
  const size_t n = ctx_.views().size();
  order_.resize(n);
  std::iota(order_.begin(), order_.end(), 0);
  if (opt_.relaxed_randomization) std::shuffle(order_.begin(), order_.end(), rng_.engine());

  PendingQueue queue(ctx_.state(), opt_.order, s_.passes_);
  while (const cell::Task* t = queue.Next()) {
    if (opt_.max_tasks_per_pass > 0 && out_.tasks_considered >= opt_.max_tasks_per_pass) break;
    ++out_.tasks_considered;
    ClassState& cs = ClassFor(t);
    if (opt_.max_unplaced >= 0 && out_.unplaced > opt_.max_unplaced) {
      out_.stopped_early = true;
      break;
    }
    if (cs.failed) {
      cs.unplaced.push_back(t->index);
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
      cs.unplaced.push_back(t->index);
      ++out_.unplaced;
      continue;
    }
    Commit(cs, t, *m, preempting ? &pre : nullptr);
    queue.Placed(t, t->resources);
    // Relaxed randomization, topped up: each placement draws one more
    // feasible machine into the class's candidates, so a big class spreads
    // over a sample that grows with it instead of filling its first sample.
    if (opt_.relaxed_randomization && !cs.scan_done) Scan(cs, 1);
  }
  for (ClassState* cs : class_list_) {
    if (cs->unplaced.empty()) continue;
    out_.pending.push_back(PendingClass{cs->cls.job->id, std::move(cs->unplaced), std::move(cs->why)});
  }
  if (opt_.score_cache) SaveToCache();
}

Scheduler::Scheduler(Options options)
    : options_(std::move(options)), profile_(DefaultProfile(options_)), cache_(std::make_unique<ScoreCache>()) {}
Scheduler::~Scheduler() = default;
Scheduler::Scheduler(Scheduler&&) noexcept = default;
Scheduler& Scheduler::operator=(Scheduler&&) noexcept = default;

void Scheduler::ForgetFailures() { cache_->failed.clear(); }

PassResult Scheduler::RunPass(const cell::CellState& state, int64_t now_ms) {
  PassResult out;
  out.based_on_revision = state.revision();
  PassRunner(*this, state, now_ms, out).Run();
  ++passes_;
  return out;
}

}  // namespace herd::sched
