#include "master/core/controller/step_controller.h"

#include "base/log.h"

namespace herd::master {

StepController::StepController(std::string name, Committer* committer, Clock* clock, int64_t interval_ms,
                               Decide decide)
    : name_(std::move(name)),
      committer_(committer),
      clock_(clock),
      interval_ms_(interval_ms),
      decide_(std::move(decide)) {}

StepController::~StepController() { Stop(); }

void StepController::Start() {
  {
    absl::MutexLock l(&mu_);
    stop_ = false;
  }
  if (!thread_.joinable()) thread_ = std::thread([this] { Loop(); });
}

void StepController::Stop() {
  {
    absl::MutexLock l(&mu_);
    stop_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

absl::StatusOr<int> StepController::Step() {
  const int64_t now = clock_->NowMs();
  std::vector<v1::Mutation> steps = committer_->Read([&](const cell::CellState& s) { return decide_(s, now); });
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

void StepController::Loop() {
  absl::MutexLock l(&mu_);
  while (!stop_) {
    mu_.Unlock();
    if (absl::StatusOr<int> n = Step(); !n.ok()) HERD_LOG_WARN("{} step failed: {}", name_, n.status().ToString());
    mu_.Lock();
    auto stopping = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return stop_; };
    mu_.AwaitWithTimeout(absl::Condition(&stopping), absl::Milliseconds(interval_ms_));
  }
}

}  // namespace herd::master
