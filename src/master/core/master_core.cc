#include "master/core/master_core.h"

#include "base/log.h"
#include "base/status.h"
#include "master/core/master_metrics.h"
#include "master/core/recovery.h"

namespace herd::master {

absl::StatusOr<std::unique_ptr<MasterCore>> MasterCore::Create(store::LogStore* store, AgentLink* link, Clock* clock,
                                                               MasterOptions options) {
  HERD_ASSIGN_OR_RETURN(cell::CellState state, Recover(*store, 0, options.cell_name));
  HERD_LOG_INFO("recovered cell '{}' at revision {}: {} jobs, {} machines, {} tasks running, {} pending",
                state.cell_name(), state.revision(), state.jobs().size(), state.machines().size(),
                state.task_count(v1::Task::RUNNING), state.task_count(v1::Task::PENDING));
  HERD_ASSIGN_OR_RETURN(std::unique_ptr<MasterCore> core,
                        CreateFollower(store, clock, std::move(options), std::move(state)));
  HERD_RETURN_IF_ERROR(core->Promote(store, link));
  return core;
}

MasterCore::MasterCore(store::LogStore* reader, Clock* clock, MasterOptions options, cell::CellState state)
    : clock_(clock),
      options_(std::move(options)),
      committer_(std::make_unique<Committer>(Committer::FollowerTag{}, std::move(state), clock, options_.committer)),
      jobs_(api_),
      rollouts_api_(api_),
      access_(api_),
      machines_(api_),
      stream_(api_),
      names_(api_),
      join_(api_) {
  api_.committer = committer_.get();
  api_.store = reader;
  api_.clock = clock;
  api_.options = &options_;
  api_.why = &why_;
  api_.started_ms = clock->NowMs();
  if (options_.metrics != nullptr) AddCellGauges(*options_.metrics, this);
  reclaimer_ = std::make_unique<Reclaimer>(clock, options_.reclaim);
}

absl::StatusOr<std::unique_ptr<MasterCore>> MasterCore::CreateFollower(store::LogStore* store, Clock* clock,
                                                                       MasterOptions options, cell::CellState state) {
  if (options.authorizer == nullptr) return absl::InvalidArgumentError("MasterOptions.authorizer is not set");
  if (options.metrics != nullptr) AddMetricHooks(*options.metrics, &options);
  return std::unique_ptr<MasterCore>(new MasterCore(store, clock, std::move(options), std::move(state)));
}

absl::Status MasterCore::Promote(store::LogStore* writer, AgentLink* link) {
  if (leading()) return absl::FailedPreconditionError("already the leader");
  const int64_t from = committer_->revision();
  HERD_ASSIGN_OR_RETURN(int64_t head, writer->LastRevision());
  if (head > from) {
    std::vector<v1::Mutation> tail;
    HERD_RETURN_IF_ERROR(writer->ReadLog(from + 1, head, [&](const v1::Mutation& m) {
      tail.push_back(m);
      return absl::OkStatus();
    }));
    absl::Status st = committer_->Follow(tail);
    if (!st.ok() || committer_->revision() != head) {
      // Compacted past us, or a gap: start again from the store.
      HERD_LOG_WARN("catching up from revision {} to {} failed ({}); recovering from the store", from, head,
                    st.ToString());
      HERD_ASSIGN_OR_RETURN(cell::CellState fresh, Recover(*writer, 0, options_.cell_name));
      committer_->Reset(std::move(fresh));
    }
  }
  // Built on the caught-up state, before the committer takes changes (so
  // no change runs before its effects listener is set).
  BuildLeaderParts(link);
  HERD_RETURN_IF_ERROR(committer_->Promote(writer));
  committer_->Read([&](const cell::CellState& s) {
    HERD_LOG_INFO("took over cell '{}' at revision {} (hot from {}): {} jobs, {} machines, {} tasks running",
                  s.cell_name(), s.revision(), from, s.jobs().size(), s.machines().size(),
                  s.task_count(v1::Task::RUNNING));
    return 0;
  });
  return absl::OkStatus();
}

void MasterCore::BuildLeaderParts(AgentLink* link) {
  rollouts_ = std::make_unique<RolloutController>(committer_.get(), clock_, options_.rollout);
  batch_ = std::make_unique<BatchController>(committer_.get(), clock_, options_.batch);
  if (options_.reclaim.enabled) {
    reclaim_ = std::make_unique<ReclaimController>(committer_.get(), clock_, reclaimer_.get());
    HERD_LOG_INFO("reclamation: {}", cell::DescribeEstimator(options_.reclaim.estimator));
  }
  if (options_.run_link) {
    LinkShard::Options lo = options_.link;
    if (options_.reclaim.enabled) {
      // The replies' usage feeds the estimators too (beside the history).
      lo.on_reply = [r = reclaimer_.get(), also = options_.link.on_reply](const std::string& machine,
                                                                          const v1::PollResponse& reply) {
        r->Observe(reply);
        if (also) also(machine, reply);
      };
    }
    link_shard_ = std::make_unique<LinkShard>(committer_.get(), link, clock_, std::move(lo));
    LinkShard* shard = link_shard_.get();
    committer_->SetEffectsListener([shard](const cell::Effects& fx) {
      for (const std::string& m : fx.machines) shard->Kick(m);
    });
    api_.link.store(shard);
  }
  if (options_.run_scheduler) {
    sched_source_ = std::make_unique<CommitterChangeSource>(committer_.get());
    sched_sink_ = std::make_unique<FunctionProposalSink>(
        [this](const v1::ProposeRequest& req) { return jobs_.Propose(Principal::Internal("scheduler"), req); });
    sched_loop_ = std::make_unique<sched::SchedulerLoop>(sched_source_.get(), sched_sink_.get(), clock_,
                                                         options_.scheduler, options_.scheduler_loop);
  }
}

UserRecords MasterCore::Users() {
  return [this](const std::string& name) {
    return committer_->Read([&](const cell::CellState& s) -> std::optional<v1::User> {
      const v1::User* u = s.FindUser(name);
      return u ? std::optional<v1::User>(*u) : std::nullopt;
    });
  };
}

MasterCore::~MasterCore() { Stop(); }

std::vector<MasterPart> MasterCore::LeaderParts() {
  std::vector<MasterPart> parts;
  if (sched_loop_) {
    sched::SchedulerLoop* l = sched_loop_.get();
    parts.push_back({"scheduler",
                     [l] {
                       l->Start();
                       return absl::OkStatus();
                     },
                     [l] { l->Stop(); }, [l] { return l->Step(); }});
  }
  if (link_shard_) {
    LinkShard* l = link_shard_.get();
    parts.push_back({"link",
                     [l] {
                       l->Start();
                       return absl::OkStatus();
                     },
                     [l] { l->Stop(); },
                     [l] {
                       l->PollAllOnce();
                       return absl::OkStatus();
                     }});
  }
  auto controller = [&](const char* name, StepController* c) {
    if (c == nullptr) return;
    parts.push_back({name,
                     [c] {
                       c->Start();
                       return absl::OkStatus();
                     },
                     [c] { c->Stop(); }, [c] { return c->Step().status(); }});
  };
  controller("rollouts", rollouts_.get());
  controller("batch", batch_.get());
  controller("reclaim", reclaim_.get());
  return parts;
}

void MasterCore::Start() {
  for (MasterPart& p : LeaderParts()) (void)p.start();
}

void MasterCore::PollAllMachines() {
  if (link_shard_) link_shard_->PollAllOnce();
}

absl::StatusOr<int> MasterCore::StepRollouts() {
  if (!rollouts_) return absl::FailedPreconditionError("a follower runs no rollouts");
  return rollouts_->Step();
}

absl::StatusOr<int> MasterCore::StepBatch() {
  if (!batch_) return absl::FailedPreconditionError("a follower runs no batch controller");
  return batch_->Step();
}

absl::StatusOr<int> MasterCore::StepReclaim() {
  if (!reclaim_) return absl::FailedPreconditionError("reclamation is off, or this master follows");
  return reclaim_->Step();
}

absl::Status MasterCore::StepScheduler() {
  if (!sched_loop_) return absl::FailedPreconditionError("this master runs no scheduler");
  return sched_loop_->Step();
}

void MasterCore::Stop() {
  std::vector<MasterPart> parts = LeaderParts();
  for (auto it = parts.rbegin(); it != parts.rend(); ++it) it->stop();
}

void MasterCore::SetFatalHandler(std::function<void(const absl::Status&)> fn) {
  committer_->SetFatalListener(std::move(fn));
}

}  // namespace herd::master
