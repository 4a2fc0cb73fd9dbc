// A controller of the leading master: every interval it reads the committed
// cell state, asks a pure function of the state and the time what moves
// the cell on, and commits each mutation that is still valid then (one that
// is not is decided again on the next pass). It keeps no state of its own,
// so a master that takes over carries on from the log, and the simulator,
// stepping it, replays the same mutations. Rolling updates
// (RolloutController) and batch work (BatchController) are two.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "base/clock.h"
#include "cell/cell_state.h"
#include "herd/v1/mutation.pb.h"
#include "master/core/committer.h"

namespace herd::master {

class StepController {
 public:
  // What to commit, decided under the state's read lock at `now_ms`.
  using Decide = std::function<std::vector<v1::Mutation>(const cell::CellState&, int64_t now_ms)>;

  // `name` is for the log ("rollout", "batch").
  StepController(std::string name, Committer* committer, Clock* clock, int64_t interval_ms, Decide decide);
  ~StepController();
  StepController(const StepController&) = delete;
  StepController& operator=(const StepController&) = delete;

  void Start();
  void Stop();
  // One pass on the calling thread, at the clock's time: the number of
  // mutations committed (the first error if none was).
  absl::StatusOr<int> Step();

 private:
  void Loop();

  const std::string name_;
  Committer* const committer_;
  Clock* const clock_;
  const int64_t interval_ms_;
  const Decide decide_;
  absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace herd::master
