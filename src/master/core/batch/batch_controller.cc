#include "master/core/batch/batch_controller.h"

#include "cell/batch.h"
#include "master/core/batch/schedules.h"

namespace herd::master {

BatchController::BatchController(Committer* committer, Clock* clock, Options opts)
    : StepController("batch", committer, clock, opts.interval_ms, [](const cell::CellState& s, int64_t now) {
        std::vector<v1::Mutation> out = cell::StepDependencies(s);
        for (v1::Mutation& m : StepSchedules(s, now)) out.push_back(std::move(m));
        for (v1::Mutation& m : out) m.set_time_ms(now);  // the time the due times were judged at
        return out;
      }) {}

}  // namespace herd::master
