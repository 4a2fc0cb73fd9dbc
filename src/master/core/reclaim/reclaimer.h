// Resource reclamation in the master (Borg §5.5, issue #16): the agents'
// usage samples, as their poll replies bring them, feed one estimator per
// running task (cell/reclaim.h); every interval the leader commits the
// reservations that moved (ReservationsSet), so the scheduler places
// non-production work into what production leaves idle.
//
// The estimators live only in the leader's memory (a bounded window: one
// per running task, samples not yet folded in are capped). A master that
// takes over starts each estimator from the reservation the cell holds, so
// nothing jumps; a task placed again starts from its limit (CellState).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "base/clock.h"
#include "cell/cell_state.h"
#include "cell/reclaim.h"
#include "herd/v1/agent.pb.h"
#include "herd/v1/mutation.pb.h"
#include "master/core/controller/step_controller.h"

namespace herd::master {

class Reclaimer {
 public:
  struct Options {
    bool enabled = false;
    cell::EstimatorOptions estimator;
    // How often reservations are committed.
    int64_t interval_ms = 5'000;
    // A lower reservation is committed once it moved by this share of the
    // limit; a higher one at once.
    double min_change = 0.05;
    // Entries per ReservationsSet (the rest wait for the next interval),
    // and samples held between intervals (more are dropped and counted).
    size_t max_entries = 10'000;
    size_t max_samples = 1'000'000;
  };

  Reclaimer(Clock* clock, Options options) : clock_(clock), options_(std::move(options)) {}

  const Options& options() const { return options_; }

  // A poll reply's usage samples (a link thread; cheap: they are queued).
  void Observe(const v1::PollResponse& reply);
  // Folds the queued samples into the estimators and returns the
  // mutation(s) that bring the cell's reservations in line with them.
  std::vector<v1::Mutation> Decide(const cell::CellState& state, int64_t now_ms);

  // For tests and status: the estimate of a running task (cpu millis,
  // memory bytes), if there is one.
  std::optional<std::pair<double, double>> EstimateOf(const std::string& job, int32_t index, int64_t now_ms);
  int64_t dropped() const;

 private:
  struct Sample {
    std::string job;
    int32_t index;
    int64_t incarnation;
    int64_t time_ms;  // the master's clock when the reply came
    double cpu, memory;
  };
  struct TaskEstimate {
    int64_t incarnation;
    int64_t last_sampled_ms;  // the agent's sample time (a repeated sample is not counted twice)
    cell::Estimate cpu, memory;
  };

  Clock* const clock_;
  const Options options_;
  mutable absl::Mutex mu_;
  std::vector<Sample> queue_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::pair<std::string, int32_t>, int64_t> last_sampled_ ABSL_GUARDED_BY(mu_);
  int64_t dropped_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Mutex est_mu_;  // Decide and EstimateOf
  absl::flat_hash_map<std::pair<std::string, int32_t>, TaskEstimate> tasks_ ABSL_GUARDED_BY(est_mu_);
};

// The leader's controller that commits what the Reclaimer decides.
class ReclaimController : public StepController {
 public:
  ReclaimController(Committer* committer, Clock* clock, Reclaimer* reclaimer);
};

}  // namespace herd::master
