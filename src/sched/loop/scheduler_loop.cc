#include "sched/loop/scheduler_loop.h"

#include <algorithm>
#include <chrono>

#include "absl/strings/str_cat.h"
#include "base/log.h"

namespace herd::sched {

SchedulerLoop::SchedulerLoop(ChangeSource* source, ProposalSink* sink, Clock* clock, Options options,
                             LoopOptions loop)
    : source_(source),
      sink_(sink),
      clock_(clock),
      options_(std::move(options)),
      loop_(loop),
      scheduler_(options_),
      retry_wait_ms_(loop.retry_wait_ms) {}

SchedulerLoop::~SchedulerLoop() { Stop(); }

bool SchedulerLoop::stopping() const {
  absl::MutexLock l(&mu_);
  return stopping_;
}

void SchedulerLoop::Start() {
  thread_ = std::thread([this] {
    int64_t backoff = loop_.error_backoff_ms;
    while (!stopping()) {
      absl::Status st = Step();
      if (st.ok()) {
        backoff = loop_.error_backoff_ms;
        continue;
      }
      HERD_LOG_WARN("{}: {}; retrying in {} ms", options_.name, st.ToString(), backoff);
      absl::MutexLock l(&mu_);
      mu_.AwaitWithTimeout(absl::Condition(&stopping_), absl::Milliseconds(backoff));
      backoff = std::min(backoff * 2, loop_.max_error_backoff_ms);
    }
  });
}

void SchedulerLoop::Stop() {
  {
    absl::MutexLock l(&mu_);
    stopping_ = true;
  }
  source_->Interrupt();
  if (thread_.joinable()) thread_.join();
}

SchedulerLoop::Stats SchedulerLoop::stats() const {
  absl::MutexLock l(&mu_);
  return stats_;
}

absl::Status SchedulerLoop::Bootstrap() {
  absl::StatusOr<cell::CellState> state = source_->Bootstrap();
  if (!state.ok()) {
    absl::MutexLock l(&mu_);
    ++stats_.errors;
    return absl::Status(state.status().code(),
                        absl::StrCat("cannot load the cell state: ", state.status().message()));
  }
  replica_ = std::move(*state);
  have_replica_ = true;
  dirty_ = true;
  retry_ = false;
  retry_wait_ms_ = loop_.retry_wait_ms;
  // A fresh scheduler: its score cache must not outlive the state it was
  // computed on.
  scheduler_ = Scheduler(options_);
  HERD_LOG_INFO("{}: replica loaded at revision {}: {} jobs, {} machines, {} tasks pending", options_.name,
                replica_.revision(), replica_.jobs().size(), replica_.machines().size(), replica_.pending().size());
  absl::MutexLock l(&mu_);
  ++stats_.bootstraps;
  stats_.revision = replica_.revision();
  return absl::OkStatus();
}

absl::Status SchedulerLoop::Step() {
  if (!have_replica_) {
    absl::Status st = Bootstrap();
    if (!st.ok()) return st;
  }
  int64_t wait = loop_.idle_wait_ms;
  if (retry_) {
    wait = retry_wait_ms_;
  } else if (dirty_) {
    wait = 0;
  }
  absl::StatusOr<std::vector<v1::Mutation>> batch = source_->Next(replica_.revision(), wait);
  if (!batch.ok()) {
    if (batch.status().code() == absl::StatusCode::kOutOfRange) {
      HERD_LOG_WARN("{}: the change feed cannot continue after revision {} ({}); reloading the cell",
                    options_.name, replica_.revision(), batch.status().message());
      have_replica_ = false;
      return absl::OkStatus();
    }
    absl::MutexLock l(&mu_);
    ++stats_.errors;
    return absl::Status(batch.status().code(),
                        absl::StrCat("cannot follow the cell's changes: ", batch.status().message()));
  }
  bool news = false;
  for (const v1::Mutation& m : *batch) {
    if (m.revision() != replica_.revision() + 1) {
      HERD_LOG_WARN("{}: change feed gap: got revision {} after {}; reloading the cell", options_.name,
                    m.revision(), replica_.revision());
      have_replica_ = false;
      return absl::OkStatus();
    }
    absl::Status st = replica_.Apply(m);
    if (!st.ok()) {
      // The same mutations through the same code must give the same state;
      // if not, start over from a fresh copy (after a backoff).
      have_replica_ = false;
      absl::MutexLock l(&mu_);
      ++stats_.errors;
      return absl::InternalError(absl::StrCat("replica diverged at revision ", m.revision(), ": ", st.message(),
                                              "; reloading the cell"));
    }
    // Agents' reports about running tasks do not change placement.
    if (!m.has_task_observed()) news = true;
  }
  if (!batch->empty()) {
    absl::MutexLock l(&mu_);
    stats_.revision = replica_.revision();
  }
  if (news) {
    dirty_ = true;
    retry_wait_ms_ = loop_.retry_wait_ms;  // progress: retry quickly again
  }
  if (retry_) dirty_ = true;  // caught up (or waited long enough): try the stale ones again
  if (!dirty_) return absl::OkStatus();
  return Pass();
}

absl::Status SchedulerLoop::Pass() {
  dirty_ = false;
  const bool was_retry = retry_;
  retry_ = false;
  if (replica_.pending().empty()) {
    retry_wait_ms_ = loop_.retry_wait_ms;
    absl::MutexLock l(&mu_);
    stats_.pending = 0;
    return absl::OkStatus();
  }
  const int64_t revision = replica_.revision();
  const auto start = std::chrono::steady_clock::now();
  const int64_t now_ms = clock_->NowMs();
  PassResult result = scheduler_.RunPass(replica_, now_ms);
  const int64_t us =
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - start).count();
  if (loop_.on_pass) loop_.on_pass(static_cast<double>(us) / 1e6, result);
  if (options_.max_tasks_per_pass > 0 && result.tasks_considered >= options_.max_tasks_per_pass) {
    dirty_ = true;  // the pass stopped early: more to look at
  }
  const v1::ProposeRequest req = ToProposal(result, revision);
  {
    absl::MutexLock l(&mu_);
    ++stats_.passes;
    stats_.last_pass_us = us;
    stats_.last_pass_ms = now_ms;
    stats_.pending = result.unplaced;
  }
  if (req.placements().empty() && req.pending().empty()) return absl::OkStatus();

  absl::StatusOr<v1::ProposeResponse> resp = sink_->Propose(req);
  if (!resp.ok()) {
    dirty_ = true;  // nothing was decided: pass again once the master answers
    // That pass counted its own proposals as taking capacity they did not.
    if (!req.placements().empty()) scheduler_.ForgetFailures();
    absl::MutexLock l(&mu_);
    ++stats_.errors;
    return absl::Status(resp.status().code(), absl::StrCat("cannot propose: ", resp.status().message()));
  }
  const Outcome outcome = Tally(req, *resp, options_.name);
  AfterProposal(outcome, was_retry);
  if (req.placements_size() > 0) LogPass(revision, req, outcome, result.unplaced, us);
  absl::MutexLock l(&mu_);
  stats_.proposed += req.placements_size();
  stats_.accepted += outcome.accepted;
  stats_.rejected += outcome.rejected;
  return absl::OkStatus();
}

v1::ProposeRequest SchedulerLoop::ToProposal(PassResult& result, int64_t revision) const {
  v1::ProposeRequest req;
  req.set_scheduler(options_.name);
  req.set_based_on_revision(revision);
  for (v1::TaskScheduled& p : result.proposals) {
    if (p.scheduler().empty()) p.set_scheduler(options_.name);
    if (p.based_on_revision() == 0) p.set_based_on_revision(revision);
    *req.add_placements() = std::move(p);
  }
  for (const PendingClass& c : result.pending) {
    v1::PendingDiagnosis* d = req.add_pending();
    c.why.ToProto(d);
    d->set_job(c.job);
    for (int32_t i : c.indexes) d->add_indexes(i);
    d->set_revision(revision);
    d->set_scheduler(options_.name);
  }
  return req;
}

SchedulerLoop::Outcome SchedulerLoop::Tally(const v1::ProposeRequest& req, const v1::ProposeResponse& resp,
                                            absl::string_view name) {
  Outcome out;
  for (int i = 0; i < req.placements_size(); ++i) {
    const bool answered = i < resp.results_size();
    if (answered && resp.results(i).accepted()) {
      ++out.accepted;
      continue;
    }
    ++out.rejected;
    const std::string reason = answered ? resp.results(i).reason() : "no answer for this placement";
    if (out.first_reason.empty()) out.first_reason = reason;
    HERD_LOG_DEBUG("{}: proposal {}/{} -> {} rejected: {}", name, req.placements(i).job(), req.placements(i).index(),
                   req.placements(i).machine(), reason);
  }
  return out;
}

void SchedulerLoop::AfterProposal(const Outcome& outcome, bool was_retry) {
  if (outcome.rejected > 0) {
    retry_ = true;
    scheduler_.ForgetFailures();  // capacity the pass counted as taken is still free
    if (was_retry) retry_wait_ms_ = std::min(retry_wait_ms_ * 2, loop_.max_retry_wait_ms);
  } else {
    retry_wait_ms_ = loop_.retry_wait_ms;
  }
}

void SchedulerLoop::LogPass(int64_t revision, const v1::ProposeRequest& req, const Outcome& outcome,
                            int64_t unplaced, int64_t us) const {
  if (loop_.log_passes) {
    HERD_LOG_INFO("{}: pass at revision {}: {} proposed, {} accepted, {} rejected{}{}; {} left pending; {:.1f} ms",
                  options_.name, revision, req.placements_size(), outcome.accepted, outcome.rejected,
                  outcome.rejected > 0 ? " (first: " : "", outcome.rejected > 0 ? outcome.first_reason + ")" : "",
                  unplaced, us / 1000.0);
  } else {
    HERD_LOG_DEBUG("{}: pass at revision {}: {} proposed, {} accepted, {} rejected; {} left pending; {:.1f} ms",
                   options_.name, revision, req.placements_size(), outcome.accepted, outcome.rejected, unplaced,
                   us / 1000.0);
  }
}

}  // namespace herd::sched
