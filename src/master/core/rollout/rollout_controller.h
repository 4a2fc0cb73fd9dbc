// RolloutController: the leader's driver of rolling updates. Every
// interval it reads the committed cell state, asks cell::StepRollouts what
// moves each rolling job on (the next batch, done, paused after canaries,
// failed and rolled back) and commits that through the log. It keeps no
// state of its own, so a master that takes over mid-update goes on from
// the log, and the simulator, stepping it, replays the same mutations.
#pragma once

#include <cstdint>

#include "base/clock.h"
#include "master/core/committer.h"
#include "master/core/controller/step_controller.h"

namespace herd::master {

class RolloutController : public StepController {
 public:
  struct Options {
    // How often rolling jobs are looked at (a rollout waits at least this
    // long between batches, and on min_healthy_time anyway).
    int64_t interval_ms = 500;
  };

  RolloutController(Committer* committer, Clock* clock, Options opts);
};

}  // namespace herd::master
