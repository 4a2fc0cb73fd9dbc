#include "master/core/batch/batch_controller.h"

#include "base/log.h"
#include "cell/batch.h"
#include "master/core/batch/schedules.h"

namespace herd::master {

BatchController::BatchController(Committer* committer, Clock* clock, Options opts)
    : committer_(committer), clock_(clock), opts_(opts) {}

BatchController::~BatchController() { Stop(); }

void BatchController::Start() {
  {
    absl::MutexLock l(&mu_);
    stop_ = false;
  }
  if (!thread_.joinable()) thread_ = std::thread([this] { Loop(); });
}

void BatchController::Stop() {
  {
    absl::MutexLock l(&mu_);
    stop_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

absl::StatusOr<int> BatchController::Step() {
  const int64_t now = clock_->NowMs();
  // Decided under the read lock; each committed on its own if still valid
  // then (one that is not is decided again on the next pass).
  std::vector<v1::Mutation> steps = committer_->Read([&](const cell::CellState& s) {
    std::vector<v1::Mutation> out = cell::StepDependencies(s);
    for (v1::Mutation& m : StepSchedules(s, now)) out.push_back(std::move(m));
    return out;
  });
  if (steps.empty()) return 0;
  for (v1::Mutation& m : steps) m.set_time_ms(now);
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

void BatchController::Loop() {
  absl::MutexLock l(&mu_);
  while (!stop_) {
    mu_.Unlock();
    if (absl::StatusOr<int> n = Step(); !n.ok()) HERD_LOG_WARN("batch step failed: {}", n.status().ToString());
    mu_.Lock();
    auto stopping = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return stop_; };
    mu_.AwaitWithTimeout(absl::Condition(&stopping), absl::Milliseconds(opts_.interval_ms));
  }
}

}  // namespace herd::master
