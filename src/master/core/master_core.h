// MasterCore: the master without its transport (docs/design.md §5). It owns the
// cell's committer (state + durable log), the link shard that polls the
// agents and the in-process scheduler loop, and the handlers of its API,
// one class per concern:
//
//   jobs()      submit, kill, read jobs and tasks, why-pending, Propose
//   rollouts()  rollback, pause and resume a rolling update, version history
//   machines()  machines registering and listed, quota, the cell in brief
//   stream()    Watch (the change log) and checkpoints
//   names()     Resolve and WatchNames (tasks' names, naming/names.h)
//   join()      join tokens, and machines joining with one
//
// Every handler asks the Authorizer (admission/authorizer.h) before it acts.
// No gRPC: master/server adapts it to gRPC; the simulator drives it directly.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "base/clock.h"
#include "master/core/admission/identity.h"
#include "master/core/api/access.h"
#include "master/core/api/context.h"
#include "master/core/api/jobs.h"
#include "master/core/api/join.h"
#include "master/core/api/machines.h"
#include "master/core/api/names.h"
#include "master/core/api/rollouts.h"
#include "master/core/api/stream.h"
#include "master/core/committer.h"
#include "master/core/link/agent_link.h"
#include "master/core/link/link_shard.h"
#include "master/core/options.h"
#include "master/core/part.h"
#include "master/core/reclaim/reclaimer.h"
#include "master/core/sched_adapters.h"
#include "master/core/why_store.h"
#include "sched/loop/scheduler_loop.h"
#include "store/log_store.h"

namespace herd::master {

class MasterCore {
 public:
  // Recovers the state from `store` (snapshot + log). `store`, `link` and
  // `clock` must outlive the MasterCore.
  static absl::StatusOr<std::unique_ptr<MasterCore>> Create(store::LogStore* store, AgentLink* link, Clock* clock,
                                                            MasterOptions options);
  // A follower (a replica that is not the leader): serves reads and the
  // change feed from `state`, kept hot with committer().Follow(); it changes
  // nothing, polls no agent and schedules nothing until Promote(). `store`
  // is read for past revisions and the log behind the in-memory feed.
  static absl::StatusOr<std::unique_ptr<MasterCore>> CreateFollower(store::LogStore* store, Clock* clock,
                                                                    MasterOptions options, cell::CellState state);
  // The follower becomes the leader: catches up with `writer`'s log (the
  // leader lease is ours, so nobody else appends), makes it the committer's
  // store, and builds the link and the scheduler; then Start(). Reads and
  // watches served meanwhile go on uninterrupted.
  absl::Status Promote(store::LogStore* writer, AgentLink* link);
  bool leading() const { return committer_->leading(); }
  ~MasterCore();

  // The parts only the leader runs, in start order (empty on a follower):
  // the scheduler loop, the link to the agents, the rollout, batch and
  // reclamation controllers -- each with a start, a stop and a step.
  // MasterLifecycle runs them with the process's own leader-only parts.
  std::vector<MasterPart> LeaderParts();
  // Starts every leader part's threads (tests without a MasterLifecycle).
  void Start();
  // Instead of Start(), for the simulator: poll every machine once, and run
  // one scheduler round (catch up, pass, propose), on the calling thread.
  void PollAllMachines();
  absl::Status StepScheduler();
  // One pass of the rollout controller (rolling updates), for the
  // simulator and tests; Start() runs it on its own thread.
  absl::StatusOr<int> StepRollouts();
  // One pass of the batch controller (after: and scheduled jobs), likewise.
  absl::StatusOr<int> StepBatch();
  // One reclamation pass (tests): reservations from the samples so far.
  absl::StatusOr<int> StepReclaim();
  // Stops every leader part, newest first. Idempotent.
  void Stop();
  // Called once if the store fails; the process should exit.
  void SetFatalHandler(std::function<void(const absl::Status&)> fn);

  // The API.
  JobsApi& jobs() { return jobs_; }
  RolloutsApi& rollouts() { return rollouts_api_; }
  AccessApi& access() { return access_; }
  MachinesApi& machines() { return machines_; }
  StreamApi& stream() { return stream_; }
  NamesApi& names() { return names_; }
  JoinApi& join() { return join_; }

  Committer& committer() { return *committer_; }
  const MasterOptions& options() const { return options_; }
  // The in-process scheduler (nullptr with run_scheduler = false).
  sched::SchedulerLoop* scheduler() { return sched_loop_.get(); }
  WhyStore& why_store() { return why_; }
  // The cell's user records, for Identify (capabilities, revocation).
  UserRecords Users();
  LinkShard* link() { return link_shard_.get(); }
  Reclaimer& reclaimer() { return *reclaimer_; }

 private:
  MasterCore(store::LogStore* reader, Clock* clock, MasterOptions options, cell::CellState state);
  // The link shard and the scheduler loop (leader only).
  void BuildLeaderParts(AgentLink* link);

  Clock* const clock_;

  const MasterOptions options_;
  std::unique_ptr<Committer> committer_;
  std::unique_ptr<LinkShard> link_shard_;
  WhyStore why_;
  ApiContext api_;
  JobsApi jobs_;
  RolloutsApi rollouts_api_;
  AccessApi access_;
  MachinesApi machines_;
  StreamApi stream_;
  NamesApi names_;
  JoinApi join_;
  std::unique_ptr<CommitterChangeSource> sched_source_;
  std::unique_ptr<FunctionProposalSink> sched_sink_;
  std::unique_ptr<sched::SchedulerLoop> sched_loop_;
  std::unique_ptr<RolloutController> rollouts_;
  std::unique_ptr<BatchController> batch_;
  // Reservations (issue #16): fed by the link's replies, committed by the
  // leader's controller.
  std::unique_ptr<Reclaimer> reclaimer_;
  std::unique_ptr<ReclaimController> reclaim_;
};

}  // namespace herd::master
