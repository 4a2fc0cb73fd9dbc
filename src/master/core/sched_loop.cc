#include "master/core/sched_loop.h"

#include <chrono>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/log.h"

namespace herd::master {

SchedulerLoop::SchedulerLoop(Committer* committer, store::LogStore* store, sched::Options options)
    : committer_(committer), store_(store), scheduler_(std::move(options)) {}

SchedulerLoop::~SchedulerLoop() { Stop(); }

void SchedulerLoop::Start() {
  Resync();
  thread_ = std::thread([this] { Loop(); });
}

void SchedulerLoop::Stop() {
  {
    absl::MutexLock l(&mu_);
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

bool SchedulerLoop::Resync() {
  auto snap = committer_->Read([](const cell::CellState& s) { return s.ToSnapshot(); });
  auto restored = cell::CellState::FromSnapshot(snap);
  if (!restored.ok()) {
    HERD_LOG_ERROR("scheduler: cannot copy the cell state: {}", restored.status().ToString());
    return false;
  }
  cache_ = std::move(*restored);
  return true;
}

SchedulerLoop::Stats SchedulerLoop::stats() const {
  absl::MutexLock l(&mu_);
  return stats_;
}

std::map<std::string, std::string> SchedulerLoop::WhyPending(const std::string& job) const {
  absl::MutexLock l(&mu_);
  std::map<std::string, std::string> out;
  for (auto it = why_.lower_bound(job + "/"); it != why_.end() && absl::StartsWith(it->first, job + "/"); ++it) {
    out.insert(*it);
  }
  return out;
}

void SchedulerLoop::Loop() {
  bool dirty = true;  // run a first pass over whatever is pending
  while (true) {
    {
      absl::MutexLock l(&mu_);
      if (stopping_) return;
    }
    // Catch up with the master.
    auto batch = committer_->WaitForMutations(cache_.revision(), dirty ? 0 : 500, 10'000);
    if (!batch.ok()) {
      HERD_LOG_WARN("scheduler fell behind the change feed; resyncing: {}", batch.status().ToString());
      Resync();
      dirty = true;
      continue;
    }
    for (const v1::Mutation& m : *batch) {
      cell::Effects fx;
      absl::Status st = cache_.Apply(m, &fx);
      if (!st.ok()) {
        HERD_LOG_ERROR("scheduler cache diverged at revision {}: {}; resyncing", m.revision(), st.ToString());
        Resync();
        dirty = true;
        break;
      }
      // Reports from agents about running tasks do not change placement.
      if (!m.has_task_observed()) dirty = true;
    }
    if (!dirty || cache_.pending().empty()) {
      if (cache_.pending().empty()) {
        absl::MutexLock l(&mu_);
        why_.clear();
      }
      dirty = false;
      continue;
    }
    dirty = false;
    auto start = std::chrono::steady_clock::now();
    sched::PassResult result = scheduler_.RunPass(cache_);
    int64_t us = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - start).count();
    std::vector<v1::Mutation> proposals;
    proposals.reserve(result.proposals.size());
    for (auto& p : result.proposals) {
      v1::Mutation m;
      *m.mutable_task_scheduled() = std::move(p);
      proposals.push_back(std::move(m));
    }
    int64_t accepted = 0, rejected = 0;
    if (!proposals.empty()) {
      std::vector<absl::Status> st = committer_->CommitEach(scheduler_.options().name, std::move(proposals));
      for (const auto& s : st) {
        if (s.ok()) {
          ++accepted;
        } else {
          ++rejected;
          HERD_LOG_DEBUG("proposal rejected: {}", s.ToString());
        }
      }
      if (rejected > 0) dirty = true;  // retry once the cache has caught up
    }
    absl::MutexLock l(&mu_);
    ++stats_.passes;
    stats_.proposed += accepted + rejected;
    stats_.accepted += accepted;
    stats_.rejected += rejected;
    stats_.last_pass_us = us;
    why_.clear();
    for (const auto& p : result.pending) {
      for (int32_t index : p.indexes) why_[absl::StrCat(p.job, "/", index)] = p.why.ToString();
    }
  }
}

}  // namespace herd::master
