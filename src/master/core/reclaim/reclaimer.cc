#include "master/core/reclaim/reclaimer.h"

#include <algorithm>
#include <cmath>

#include "base/log.h"
#include "base/resources.h"

namespace herd::master {

void Reclaimer::Observe(const v1::PollResponse& reply) {
  if (!options_.enabled) return;
  const int64_t now = clock_->NowMs();
  absl::MutexLock l(&mu_);
  for (const v1::RunStatus& r : reply.runs()) {
    if (!r.has_usage() || r.usage().sampled_ms() == 0 || r.terminal() || !r.desired()) continue;
    auto key = std::make_pair(r.ref().job(), r.ref().index());
    int64_t& last = last_sampled_[key];
    if (last == r.usage().sampled_ms()) continue;  // the same sample, reported again
    last = r.usage().sampled_ms();
    if (queue_.size() >= options_.max_samples) {
      ++dropped_;
      continue;
    }
    const v1::Usage& u = r.usage();
    const int64_t mem = u.memory_working_set_bytes() > 0 ? u.memory_working_set_bytes() : u.memory_rss_bytes();
    queue_.push_back(Sample{r.ref().job(), r.ref().index(), r.ref().incarnation(), now,
                            static_cast<double>(u.cpu_millis()), static_cast<double>(mem)});
  }
}

int64_t Reclaimer::dropped() const {
  absl::MutexLock l(&mu_);
  return dropped_;
}

std::vector<v1::Mutation> Reclaimer::Decide(const cell::CellState& state, int64_t now_ms) {
  std::vector<v1::Mutation> out;
  if (!options_.enabled) return out;
  std::vector<Sample> samples;
  {
    absl::MutexLock l(&mu_);
    samples.swap(queue_);
    // Forget the sample times of tasks no longer running (bounded by them).
    if (last_sampled_.size() > 2 * static_cast<size_t>(state.task_count(v1::Task::RUNNING)) + 1024) {
      absl::erase_if(last_sampled_, [&](const auto& kv) {
        const cell::Task* t = state.FindTask(kv.first.first, kv.first.second);
        return t == nullptr || t->state() != v1::Task::RUNNING;
      });
    }
  }
  const cell::EstimatorOptions& eo = options_.estimator;
  absl::MutexLock l(&est_mu_);
  for (const Sample& s : samples) {
    const cell::Task* t = state.FindTask(s.job, s.index);
    if (t == nullptr || t->state() != v1::Task::RUNNING || t->incarnation() != s.incarnation) continue;
    auto key = std::make_pair(s.job, s.index);
    auto it = tasks_.find(key);
    if (it == tasks_.end() || it->second.incarnation != s.incarnation) {
      // A run it has not seen: from its limit if new, from the cell's
      // reservation if a master before this one estimated it. Its startup
      // counts from when the agent started it.
      const ResourceVector& lim = t->resources();
      const ResourceVector& cur = t->reservation();
      int64_t start = s.time_ms;
      if (t->started_ms() > 0) start = std::min(start, t->started_ms());
      for (auto ev = t->history().rbegin(); ev != t->history().rend(); ++ev) {
        if (ev->transition != v1::Event::SCHEDULE) continue;
        if (ev->time_ms > 0) start = std::min(start, ev->time_ms);  // this run's placement
        break;
      }
      // An estimate the cell already holds is past its startup (a master
      // before this one made it): go on from it.
      if (!(cur == lim)) start = std::min(start, s.time_ms - eo.startup_ms);
      TaskEstimate e{s.incarnation, 0,
                     cell::Estimate(static_cast<double>(lim.cpu_millis), static_cast<double>(cur.cpu_millis), start),
                     cell::Estimate(static_cast<double>(lim.memory_bytes), static_cast<double>(cur.memory_bytes),
                                    start)};
      it = tasks_.insert_or_assign(key, std::move(e)).first;
    }
    it->second.cpu.Observe(s.cpu, s.time_ms, eo);
    it->second.memory.Observe(s.memory, s.time_ms, eo);
  }
  // What moved enough to commit; estimators of tasks gone are dropped.
  v1::Mutation m;
  v1::ReservationsSet* rs = m.mutable_reservations_set();
  for (auto it = tasks_.begin(); it != tasks_.end();) {
    const cell::Task* t = state.FindTask(it->first.first, it->first.second);
    if (t == nullptr || t->state() != v1::Task::RUNNING || t->incarnation() != it->second.incarnation) {
      tasks_.erase(it++);
      continue;
    }
    const TaskEstimate& e = it->second;
    ++it;
    if (static_cast<size_t>(rs->entries_size()) >= options_.max_entries) continue;
    const ResourceVector& lim = t->resources();
    const ResourceVector& cur = t->reservation();
    ResourceVector next = lim;  // dimensions not estimated stay at the limit
    next.cpu_millis = std::clamp<int64_t>(std::llround(e.cpu.Value(now_ms, eo)), 0, lim.cpu_millis);
    next.memory_bytes = std::clamp<int64_t>(std::llround(e.memory.Value(now_ms, eo)), 0, lim.memory_bytes);
    auto moved = [&](int64_t was, int64_t now, int64_t limit) {
      if (now > was) return true;  // up: at once
      return static_cast<double>(was - now) >= options_.min_change * static_cast<double>(limit);
    };
    if (!moved(cur.cpu_millis, next.cpu_millis, lim.cpu_millis) &&
        !moved(cur.memory_bytes, next.memory_bytes, lim.memory_bytes)) {
      continue;
    }
    v1::ReservationsSet::Entry* entry = rs->add_entries();
    entry->set_job(t->job()->id);
    entry->set_index(t->index());
    entry->set_incarnation(t->incarnation());
    next.ToProto(entry->mutable_reservation());
  }
  if (rs->entries_size() > 0) out.push_back(std::move(m));
  return out;
}

std::optional<std::pair<double, double>> Reclaimer::EstimateOf(const std::string& job, int32_t index,
                                                                  int64_t now_ms) {
  absl::MutexLock l(&est_mu_);
  auto it = tasks_.find(std::make_pair(job, index));
  if (it == tasks_.end()) return std::nullopt;
  return std::make_pair(it->second.cpu.Value(now_ms, options_.estimator),
                        it->second.memory.Value(now_ms, options_.estimator));
}

ReclaimController::ReclaimController(Committer* committer, Clock* clock, Reclaimer* reclaimer)
    : StepController("reclaim", committer, clock, reclaimer->options().interval_ms,
                     [reclaimer](const cell::CellState& s, int64_t now) { return reclaimer->Decide(s, now); }) {}

}  // namespace herd::master
