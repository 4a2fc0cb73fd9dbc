#include "master/core/rollout/rollout_controller.h"

#include "cell/rollout.h"

namespace herd::master {

RolloutController::RolloutController(Committer* committer, Clock* clock, Options opts)
    : StepController("rollout", committer, clock, opts.interval_ms,
                     [](const cell::CellState& s, int64_t now) { return cell::StepRollouts(s, now); }) {}

}  // namespace herd::master
