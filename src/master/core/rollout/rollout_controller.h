// RolloutController: the leader's driver of rolling updates. Every
// interval it reads the committed cell state, asks cell::StepRollouts what
// moves each rolling job on (the next batch, done, paused after canaries,
// failed and rolled back) and commits that through the log. It keeps no
// state of its own, so a master that takes over mid-update goes on from
// the log, and the simulator, stepping it, replays the same mutations.
#pragma once

#include <cstdint>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "base/clock.h"
#include "master/core/committer.h"

namespace herd::master {

class RolloutController {
 public:
  struct Options {
    // How often rolling jobs are looked at (a rollout waits at least this
    // long between batches, and on min_healthy_time anyway).
    int64_t interval_ms = 500;
  };

  RolloutController(Committer* committer, Clock* clock, Options opts);
  ~RolloutController();
  RolloutController(const RolloutController&) = delete;
  RolloutController& operator=(const RolloutController&) = delete;

  void Start();
  void Stop();
  // One pass on the calling thread, at the clock's time: the number of
  // mutations committed.
  absl::StatusOr<int> Step();

 private:
  void Loop();

  Committer* const committer_;
  Clock* const clock_;
  const Options opts_;
  absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace herd::master
