// The master's gRPC face: herd.v1.Herd over MasterCore, and AgentLink over
// herd.v1.Agent.
#pragma once

#include <atomic>
#include <condition_variable>
#include <map>

#include "absl/synchronization/mutex.h"
#include <set>
#include <memory>
#include <mutex>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "herd/v1/agent.grpc.pb.h"
#include "herd/v1/api.grpc.pb.h"
#include "master/core/admission/rate_limiter.h"
#include "master/core/master_core.h"
#include "master/alerts/alert_manager.h"
#include "master/history/history_db.h"
#include "master/server/forwarder.h"
#include "master/server/stream_limits.h"
#include "master/server/stream_pump.h"

namespace herd::master::web {
class WebUi;
}

namespace herd::master {

// The streaming calls are served by the callback API without a thread each
// (stream_pump.h); the unary calls by the server's thread pool.
using HerdServiceBase = v1::Herd::WithCallbackMethod_Watch<
    v1::Herd::WithCallbackMethod_WatchNames<v1::Herd::WithCallbackMethod_ExportCheckpoint<v1::Herd::Service>>>;

class HerdService final : public HerdServiceBase {
 public:
  // `limiter` (may be null: no limits) is asked once per request, after
  // the caller is known and before the core sees it.
  // `forwarder` (may be null: a single master, which always leads) sends
  // on the changes a follower may not make (forwarder.h).
  explicit HerdService(MasterCore* core, RateLimiter* limiter = nullptr, Forwarder* forwarder = nullptr)
      : core_(core), limiter_(limiter), forwarder_(forwarder), pump_(&core->committer()) {}
  // Serves every stream of this master (the Frameworks service's too).
  StreamPump* pump() { return &pump_; }
  // This master's address and its store, as GetCell reports them; set
  // before the server starts.
  // On a follower, run before every read: waits (bounded) until this
  // replica has applied the log up to its head as etcd has it now, so a
  // read from a follower sees every change acknowledged before it began
  // (like etcd's linearizable reads). Set before the server starts.
  void SetReadBarrier(std::function<void()> fn) { read_barrier_ = std::move(fn); }
  void SetIdentity(std::string self, std::string store) {
    self_ = std::move(self);
    store_ = std::move(store);
  }
  // The history QueryHistory reads (null: this master keeps none). Set
  // before the server starts; must outlive it.
  void SetHistory(history::HistoryDb* db) { history_ = db; }
  // This master's HTTPS endpoint (/metrics), as GetCell reports it.
  void SetHttp(std::string address) { http_ = std::move(address); }
  // The alarms ListAlerts reads (the leader's). Set before the server
  // starts; must outlive it.
  void SetAlerts(alerts::AlertManager* alerts) { alerts_ = alerts; }
  // Where this master's DNS responder listens ("" if it has none), as
  // GetCell reports it; set before the server starts.
  void SetDns(std::string address) { dns_ = std::move(address); }
  // The web UI whose login links CreateWebLogin hands out (null: this
  // master serves none). Set before the server starts; must outlive it.
  void SetWeb(web::WebUi* web) { web_ = web; }
  // The caps on open streams every streaming call takes a slot of (null: no
  // caps). Set before the server starts; must outlive it.
  void SetStreamLimits(StreamLimits* streams) { streams_ = streams; }
  // Each user's unary requests in flight (--max-requests-per-user).
  void SetCallLimits(StreamLimits* calls) { calls_ = calls; }
  // What only the server knows of the cell (leader, role, store, its
  // addresses), as GetCell reports it.
  void Describe(v1::CellInfo* out) const;
  grpc::Status CreateWebLogin(grpc::ServerContext*, const v1::CreateWebLoginRequest*,
                              v1::CreateWebLoginResponse*) override;
  grpc::Status Submit(grpc::ServerContext*, const v1::SubmitRequest*, v1::SubmitResponse*) override;
  grpc::Status Kill(grpc::ServerContext*, const v1::KillRequest*, v1::KillResponse*) override;
  grpc::Status Scale(grpc::ServerContext*, const v1::ScaleRequest*, v1::ScaleResponse*) override;
  grpc::Status Rollback(grpc::ServerContext*, const v1::RollbackRequest*, v1::RollbackResponse*) override;
  grpc::Status SetRollout(grpc::ServerContext*, const v1::SetRolloutRequest*, v1::SetRolloutResponse*) override;
  grpc::Status History(grpc::ServerContext*, const v1::HistoryRequest*, v1::HistoryResponse*) override;
  grpc::Status GetJob(grpc::ServerContext*, const v1::GetJobRequest*, v1::GetJobResponse*) override;
  grpc::Status ListJobs(grpc::ServerContext*, const v1::ListJobsRequest*, v1::ListJobsResponse*) override;
  grpc::Status ListTasks(grpc::ServerContext*, const v1::ListTasksRequest*, v1::ListTasksResponse*) override;
  grpc::Status GetTask(grpc::ServerContext*, const v1::GetTaskRequest*, v1::GetTaskResponse*) override;
  grpc::Status ListMachines(grpc::ServerContext*, const v1::ListMachinesRequest*, v1::ListMachinesResponse*) override;
  grpc::ServerWriteReactor<v1::WatchResponse>* Watch(grpc::CallbackServerContext*, const v1::WatchRequest*) override;
  grpc::Status DrainMachines(grpc::ServerContext*, const v1::DrainMachinesRequest*,
                             v1::DrainMachinesResponse*) override;
  grpc::Status SetQuota(grpc::ServerContext*, const v1::SetQuotaRequest*, v1::SetQuotaResponse*) override;
  grpc::Status ListQuotas(grpc::ServerContext*, const v1::ListQuotasRequest*, v1::ListQuotasResponse*) override;
  grpc::Status RegisterMachine(grpc::ServerContext*, const v1::RegisterMachineRequest*,
                               v1::RegisterMachineResponse*) override;
  grpc::Status MachineChanged(grpc::ServerContext*, const v1::MachineChangedRequest*,
                              v1::MachineChangedResponse*) override;
  grpc::ServerWriteReactor<v1::CheckpointRecord>* ExportCheckpoint(grpc::CallbackServerContext*,
                                                                   const v1::ExportCheckpointRequest*) override;
  grpc::Status GetCell(grpc::ServerContext*, const v1::GetCellRequest*, v1::CellInfo*) override;
  grpc::Status Propose(grpc::ServerContext*, const v1::ProposeRequest*, v1::ProposeResponse*) override;
  grpc::Status Why(grpc::ServerContext*, const v1::WhyRequest*, v1::WhyResponse*) override;
  grpc::Status GrantAccess(grpc::ServerContext*, const v1::GrantAccessRequest*, v1::GrantAccessResponse*) override;
  grpc::Status IssueCredential(grpc::ServerContext*, const v1::IssueCredentialRequest*,
                               v1::IssueCredentialResponse*) override;
  grpc::Status UpdateUser(grpc::ServerContext*, const v1::UpdateUserRequest*, v1::UpdateUserResponse*) override;
  grpc::Status QueryHistory(grpc::ServerContext*, const v1::QueryHistoryRequest*,
                            v1::QueryHistoryResponse*) override;
  grpc::Status ListAlerts(grpc::ServerContext*, const v1::ListAlertsRequest*, v1::ListAlertsResponse*) override;
  grpc::Status Resolve(grpc::ServerContext*, const v1::ResolveRequest*, v1::ResolveResponse*) override;
  grpc::ServerWriteReactor<v1::WatchNamesResponse>* WatchNames(grpc::CallbackServerContext*,
                                                               const v1::WatchNamesRequest*) override;
  grpc::Status CreateJoinToken(grpc::ServerContext*, const v1::CreateJoinTokenRequest*,
                               v1::CreateJoinTokenResponse*) override;
  grpc::Status ListJoinTokens(grpc::ServerContext*, const v1::ListJoinTokensRequest*,
                              v1::ListJoinTokensResponse*) override;
  grpc::Status RevokeJoinToken(grpc::ServerContext*, const v1::RevokeJoinTokenRequest*,
                               v1::RevokeJoinTokenResponse*) override;
  // The two calls served without a client certificate (rate-limited by
  // the caller's address).
  grpc::Status GetJoinInfo(grpc::ServerContext*, const v1::GetJoinInfoRequest*, v1::GetJoinInfoResponse*) override;
  grpc::Status Join(grpc::ServerContext*, const v1::JoinRequest*, v1::JoinResponse*) override;

  // The caller, identified and within its rate (the Frameworks service
  // admits its callers with this too).
  absl::StatusOr<Principal> Admit(const grpc::ServerContextBase* ctx);

 private:
  absl::StatusOr<Principal> Caller(const grpc::ServerContextBase* ctx);
  // Trailing metadata of every answer: the revision it was made at, and
  // whether a leader or a follower made it.
  void Stamp(grpc::ServerContext* ctx, int64_t revision) const;
  // After a forwarded change made at `revision`: waits (bounded) until this
  // replica has applied it, then stamps the answer.
  void CaughtUp(grpc::ServerContext* ctx, int64_t revision);
  // A follower's read barrier (SetReadBarrier), if any.
  void Barrier();
  // A caller without a certificate (GetJoinInfo, Join), held to a rate
  // by its address; returns the address.
  absl::StatusOr<std::string> AdmitAnonymous(const grpc::ServerContext* ctx);
  // A slot for one of `who`'s unary requests in flight, or RESOURCE_EXHAUSTED.
  absl::Status HoldCall(const Principal& who, const char* what, StreamLimits::Slot* slot);
  // A slot for `who`'s stream `what` (StreamLimits), ended by `end` should
  // the credential that opened it be revoked; or why not.
  absl::StatusOr<StreamLimits::Slot> OpenStream(const Principal& who, const std::string& what,
                                                std::function<void()> end);
  // Admits the caller of a stream, takes its slot and opens its cursor with
  // `open`; serves it, or refuses it with why.
  template <typename Msg, typename OpenFn>
  grpc::ServerWriteReactor<Msg>* ServeStream(grpc::CallbackServerContext* ctx, const char* what, bool barrier,
                                             OpenFn open);

  MasterCore* const core_;
  RateLimiter* const limiter_;
  Forwarder* const forwarder_;
  history::HistoryDb* history_ = nullptr;
  std::string http_;
  alerts::AlertManager* alerts_ = nullptr;
  // History queries running: in all, and by user (one user may not hold
  // every slot).
  absl::Mutex queries_mu_;
  int queries_running_ ABSL_GUARDED_BY(queries_mu_) = 0;
  std::map<std::string, int> queries_by_user_ ABSL_GUARDED_BY(queries_mu_);
  std::function<void()> read_barrier_;
  std::string self_;
  std::string store_;
  std::string dns_;
  web::WebUi* web_ = nullptr;
  StreamLimits* streams_ = nullptr;
  StreamLimits* calls_ = nullptr;
  StreamPump pump_;  // last: its streams end before the rest goes
};

// Polls agents over gRPC as the master (credential `self`), one cached
// channel per address and machine. PollAsync keeps any number of polls in
// flight on gRPC's own threads (the callback API), so a few link threads
// poll thousands of machines.
class GrpcAgentLink final : public AgentLink {
 public:
  explicit GrpcAgentLink(pki::Credential self) : self_(std::move(self)) {}
  ~GrpcAgentLink() override;
  // Asked before every poll (every command to an agent): a replicated
  // master's leader lease is held (LeaderLease::held(), which turns false
  // on its own clock the moment the lease may have expired, before the
  // keep-alive thread notices and ends the process). Set before polling.
  void SetMayCommand(std::function<bool()> fn) { may_command_ = std::move(fn); }
  absl::StatusOr<v1::PollResponse> Poll(const std::string& address, const v1::PollRequest& request,
                                        int64_t timeout_ms) override;
  void PollAsync(const std::string& address, const v1::PollRequest& request, int64_t timeout_ms,
                 Done done) override;
  void CancelAll() override;

 private:
  struct Call;
  v1::Agent::Stub* StubFor(const std::string& address, const std::string& machine);

  const pki::Credential self_;
  std::function<bool()> may_command_;
  std::mutex mu_;
  std::condition_variable idle_;
  absl::flat_hash_map<std::pair<std::string, std::string>, std::unique_ptr<v1::Agent::Stub>> stubs_;
  absl::flat_hash_set<Call*> calls_;  // in flight
};

}  // namespace herd::master
