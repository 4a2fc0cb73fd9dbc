#include "master/core/rollout/rollout_controller.h"

#include "base/log.h"
#include "cell/rollout.h"

namespace herd::master {

RolloutController::RolloutController(Committer* committer, Clock* clock, Options opts)
    : committer_(committer), clock_(clock), opts_(opts) {}

RolloutController::~RolloutController() { Stop(); }

void RolloutController::Start() {
  {
    absl::MutexLock l(&mu_);
    stop_ = false;
  }
  if (!thread_.joinable()) thread_ = std::thread([this] { Loop(); });
}

void RolloutController::Stop() {
  {
    absl::MutexLock l(&mu_);
    stop_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

absl::StatusOr<int> RolloutController::Step() {
  const int64_t now = clock_->NowMs();
  // Decided under the read lock; each committed on its own if still valid
  // then (one that is not is decided again on the next pass).
  std::vector<v1::Mutation> steps =
      committer_->Read([&](const cell::CellState& s) { return cell::StepRollouts(s, now); });
  if (steps.empty()) return 0;
  int count = 0;
  absl::Status first;
  for (const absl::Status& st : committer_->CommitEach("master", std::move(steps))) {
    if (st.ok()) {
      ++count;
    } else if (first.ok()) {
      first = st;
    }
  }
  if (count == 0 && !first.ok()) return first;
  return count;
}

void RolloutController::Loop() {
  absl::MutexLock l(&mu_);
  while (!stop_) {
    mu_.Unlock();
    if (absl::StatusOr<int> n = Step(); !n.ok()) HERD_LOG_WARN("rollout step failed: {}", n.status().ToString());
    mu_.Lock();
    auto stopping = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return stop_; };
    mu_.AwaitWithTimeout(absl::Condition(&stopping), absl::Milliseconds(opts_.interval_ms));
  }
}

}  // namespace herd::master
