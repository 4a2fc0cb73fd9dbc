#include "master/core/master_core.h"

#include "base/log.h"
#include "base/status.h"
#include "master/core/recovery.h"

namespace herd::master {

absl::StatusOr<std::unique_ptr<MasterCore>> MasterCore::Create(store::LogStore* store, AgentLink* link,
                                                               Clock* clock, MasterOptions options) {
  HERD_ASSIGN_OR_RETURN(cell::CellState state, Recover(*store, 0, options.cell_name));
  HERD_LOG_INFO("recovered cell '{}' at revision {}: {} jobs, {} machines, {} tasks running, {} pending",
                state.cell_name(), state.revision(), state.jobs().size(), state.machines().size(),
                state.task_count(v1::Task::RUNNING), state.task_count(v1::Task::PENDING));
  if (options.authorizer == nullptr) return absl::InvalidArgumentError("MasterOptions.authorizer is not set");
  return std::unique_ptr<MasterCore>(new MasterCore(store, link, clock, std::move(options), std::move(state)));
}

absl::StatusOr<std::unique_ptr<MasterCore>> MasterCore::CreateFrom(store::LogStore* store, AgentLink* link,
                                                                   Clock* clock, MasterOptions options,
                                                                   cell::CellState hot) {
  const int64_t from = hot.revision();
  absl::Status st = CatchUp(*store, hot, 0);
  if (st.code() == absl::StatusCode::kOutOfRange) {
    HERD_LOG_WARN("the log after revision {} was compacted; recovering from the store instead", from);
    return Create(store, link, clock, std::move(options));
  }
  HERD_RETURN_IF_ERROR(st);
  HERD_LOG_INFO("took over cell '{}' at revision {} (hot from {}): {} jobs, {} machines, {} tasks running",
                hot.cell_name(), hot.revision(), from, hot.jobs().size(), hot.machines().size(),
                hot.task_count(v1::Task::RUNNING));
  if (options.authorizer == nullptr) return absl::InvalidArgumentError("MasterOptions.authorizer is not set");
  return std::unique_ptr<MasterCore>(new MasterCore(store, link, clock, std::move(options), std::move(hot)));
}

MasterCore::MasterCore(store::LogStore* store, AgentLink* link, Clock* clock, MasterOptions options,
                       cell::CellState state)
    : options_(std::move(options)),
      committer_(std::make_unique<Committer>(std::move(state), store, clock, options_.committer)),
      jobs_(api_),
      access_(api_),
      machines_(api_),
      stream_(api_) {
  if (options_.run_link) {
    link_shard_ = std::make_unique<LinkShard>(committer_.get(), link, clock, options_.link);
    LinkShard* shard = link_shard_.get();
    committer_->SetEffectsListener([shard](const cell::Effects& fx) {
      for (const std::string& m : fx.machines) shard->Kick(m);
    });
  }
  api_.committer = committer_.get();
  api_.store = store;
  api_.clock = clock;
  api_.options = &options_;
  api_.why = &why_;
  api_.link = link_shard_.get();
  api_.started_ms = clock->NowMs();
  if (options_.run_scheduler) {
    sched_source_ = std::make_unique<CommitterChangeSource>(committer_.get());
    sched_sink_ = std::make_unique<FunctionProposalSink>(
        [this](const v1::ProposeRequest& req) { return jobs_.Propose(Principal::Internal("scheduler"), req); });
    sched_loop_ = std::make_unique<sched::SchedulerLoop>(sched_source_.get(), sched_sink_.get(), clock,
                                                         options_.scheduler, options_.scheduler_loop);
  }
}

MasterCore::~MasterCore() { Stop(); }

void MasterCore::Start() {
  if (link_shard_) link_shard_->Start();
  if (sched_loop_) sched_loop_->Start();
}

void MasterCore::PollAllMachines() {
  if (link_shard_) link_shard_->PollAllOnce();
}

absl::Status MasterCore::StepScheduler() {
  if (!sched_loop_) return absl::FailedPreconditionError("this master runs no scheduler");
  return sched_loop_->Step();
}

void MasterCore::Stop() {
  if (sched_loop_) sched_loop_->Stop();
  if (link_shard_) link_shard_->Stop();
}

void MasterCore::SetFatalHandler(std::function<void(const absl::Status&)> fn) {
  committer_->SetFatalListener(std::move(fn));
}

}  // namespace herd::master
