// Driver: Fauxmaster (Borg §3.1) -- the real master (MasterCore: committer,
// admission, link shard, scheduler loop) on an in-memory store, with
// simulated agents and a virtual clock, driven step by step instead of by its
// threads, so a run is deterministic and much faster than real time.
//
// Each tick of virtual time polls every machine once (agents start desired
// runs, report the ones that ended) and runs scheduler rounds until nothing
// more changes.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "base/clock.h"
#include "cell/checkpoint_codec.h"
#include "master/core/lifecycle.h"
#include "master/core/master_core.h"
#include "sim/core/simulated_agents.h"
#include "store/log_store.h"

namespace herd::sim {

struct DriverOptions {
  std::string cell = "sim";
  int64_t start_ms = 1'700'000'000'000;
  int64_t tick_ms = 1'000;  // poll interval
  int down_after = 3;       // missed polls before a machine is down
  sched::Options scheduler;
  int max_rounds_per_tick = 16;
};

class Driver {
 public:
  // An empty cell, or (from != nullptr) the cell of a checkpoint: its
  // snapshot plus its whole log, at the time of its last mutation.
  static absl::StatusOr<std::unique_ptr<Driver>> Create(DriverOptions options, const cell::Checkpoint* from = nullptr);
  ~Driver();

  absl::Status AddMachines(const std::vector<v1::Machine>& machines);
  absl::StatusOr<v1::SubmitResponse> Submit(std::vector<v1::JobSpec> jobs, const std::string& user = "sim");
  absl::Status Kill(const std::string& job, const std::string& reason = "");

  // Moves virtual time forward to `t_ms`, tick by tick.
  absl::Status AdvanceTo(int64_t t_ms);
  // Scheduler rounds, polls and rollout steps until nothing changes, without moving time
  // ("schedule all pending").
  absl::Status Settle();

  int64_t now_ms() const { return clock_.NowMs(); }
  int64_t revision() { return master_->committer().revision(); }
  master::MasterCore& master() { return *master_; }
  SimulatedAgents& agents() { return agents_; }
  ManualClock& clock() { return clock_; }

 private:
  explicit Driver(DriverOptions options);

  DriverOptions options_;
  ManualClock clock_;
  store::MemoryLogStore store_;
  SimulatedAgents agents_;
  std::unique_ptr<master::MasterCore> master_;
  std::unique_ptr<master::MasterLifecycle> life_;  // stepped; before master_ goes
};

}  // namespace herd::sim
