// MasterCore: the master without its transport (DESIGN §2.3). It owns the
// committer (state + durable log), admission, the link shard that polls the
// agents and the in-process scheduler loop, and answers the API. No gRPC:
// master/server adapts it to gRPC; the simulator drives it directly.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "base/clock.h"
#include "herd/v1/api.pb.h"
#include "master/core/committer.h"
#include "master/core/link/agent_link.h"
#include "master/core/link/link_shard.h"
#include "master/core/sched_adapters.h"
#include "master/core/why_store.h"
#include "sched/loop/scheduler_loop.h"
#include "sched/scheduler.h"
#include "store/log_store.h"

namespace herd::master {

struct MasterOptions {
  std::string cell_name = "local";
  std::string version = "dev";
  Committer::Options committer;
  LinkShard::Options link;
  sched::Options scheduler;
  sched::LoopOptions scheduler_loop;
  // false: no in-process scheduler; an external `herd scheduler` proposes
  // placements through Propose (herd master --scheduler external).
  bool run_scheduler = true;
  bool run_link = true;
};

class MasterCore {
 public:
  // Recovers the state from `store` (snapshot + log). `store`, `link` and
  // `clock` must outlive the MasterCore.
  static absl::StatusOr<std::unique_ptr<MasterCore>> Create(store::LogStore* store, AgentLink* link, Clock* clock,
                                                           MasterOptions options);
  ~MasterCore();

  // Starts polling agents and scheduling.
  void Start();
  // Instead of Start(), for the simulator: poll every machine once, and run
  // one scheduler round (catch up, pass, propose), on the calling thread.
  void PollAllMachines();
  absl::Status StepScheduler();
  void Stop();
  // Called once if the store fails; the process should exit.
  void SetFatalHandler(std::function<void(const absl::Status&)> fn);

  // ---- API. `user` is the calling user. ----
  absl::StatusOr<v1::SubmitResponse> Submit(const std::string& user, const v1::SubmitRequest& req);
  absl::StatusOr<v1::KillResponse> Kill(const std::string& user, const v1::KillRequest& req);
  absl::StatusOr<v1::GetJobResponse> GetJob(const std::string& user, const v1::GetJobRequest& req);
  absl::StatusOr<v1::ListJobsResponse> ListJobs(const v1::ListJobsRequest& req);
  absl::StatusOr<v1::ListTasksResponse> ListTasks(const std::string& user, const v1::ListTasksRequest& req);
  absl::StatusOr<v1::GetTaskResponse> GetTask(const std::string& user, const v1::GetTaskRequest& req);
  absl::StatusOr<v1::ListMachinesResponse> ListMachines(const v1::ListMachinesRequest& req);
  absl::StatusOr<v1::SetQuotaResponse> SetQuota(const std::string& user, const v1::SetQuotaRequest& req);
  absl::StatusOr<v1::ListQuotasResponse> ListQuotas(const v1::ListQuotasRequest& req);
  absl::StatusOr<v1::RegisterMachineResponse> RegisterMachine(const v1::RegisterMachineRequest& req);
  v1::CellInfo GetCell();
  // A scheduler's placements, each committed on its own if still valid
  // (CellState::Check: task still PENDING at its expected state revision,
  // machine up, constraints, victims, fit); a result per placement, with the
  // check's message when refused. The pending diagnoses are kept for Why.
  absl::StatusOr<v1::ProposeResponse> Propose(const std::string& user, const v1::ProposeRequest& req);
  // Why the job's pending tasks are pending, as the schedulers last said.
  absl::StatusOr<v1::WhyResponse> Why(const std::string& user, const v1::WhyRequest& req);
  // Streams durable mutations from `from_revision` (0 = only new ones) to
  // `send` until it returns false or `cancelled()` is true.
  absl::Status Watch(int64_t from_revision, const std::function<bool(const v1::WatchResponse&)>& send,
                     const std::function<bool()>& cancelled);
  // Writes a checkpoint (header, the newest stored snapshot at or before the
  // revision, then the log after it) record by record.
  absl::Status ExportCheckpoint(int64_t up_to_revision,
                                const std::function<bool(const v1::CheckpointRecord&)>& write);

  Committer& committer() { return *committer_; }
  // The in-process scheduler (nullptr with run_scheduler = false).
  sched::SchedulerLoop* scheduler() { return sched_loop_.get(); }
  WhyStore& why_store() { return why_; }
  LinkShard* link() { return link_shard_.get(); }

 private:
  MasterCore(store::LogStore* store, AgentLink* link, Clock* clock, MasterOptions options,
             cell::CellState state);
  // Finds a job from a user's reference ("name" = the caller's job if it
  // exists, else the only job of that name; "user/name").
  absl::StatusOr<std::string> ResolveJob(const cell::CellState& s, const std::string& caller,
                                         const std::string& ref) const;
  // Runs fn on the current state (at_revision 0) or a reconstructed past one.
  template <typename T>
  absl::StatusOr<T> AtRevision(int64_t at_revision, const std::function<absl::StatusOr<T>(const cell::CellState&)>& fn);

  store::LogStore* const store_;
  AgentLink* const agent_link_;
  Clock* const clock_;
  const MasterOptions options_;
  const int64_t started_ms_;
  std::unique_ptr<Committer> committer_;
  std::unique_ptr<LinkShard> link_shard_;
  WhyStore why_;
  std::atomic<int64_t> why_pruned_ms_{0};
  std::unique_ptr<CommitterChangeSource> sched_source_;
  std::unique_ptr<FunctionProposalSink> sched_sink_;
  std::unique_ptr<sched::SchedulerLoop> sched_loop_;
};

}  // namespace herd::master
