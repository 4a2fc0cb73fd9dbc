#include "agent/server/agent_protocol.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "base/log.h"
#include "pki/pki.h"
#include "rpc/rpc.h"

namespace herd::agent {

// ---- PollServer -------------------------------------------------------------

PollServer::PollServer(RunTable* runs, MachineFacts facts, Clock* clock, int64_t start_wait_ms)
    : runs_(runs), facts_(std::move(facts)), clock_(clock), start_wait_ms_(start_wait_ms) {}

bool PollServer::ApplyLocked(const v1::PollRequest& req, bool* changed) {
  *changed = false;
  if (!req.delta()) {
    absl::flat_hash_map<std::string, v1::TaskRun> next;
    next.reserve(req.desired_size());
    for (const v1::TaskRun& run : req.desired()) next[run.run_id()] = run;
    *changed = next.size() != desired_.size();
    if (!*changed) {
      for (const auto& [id, run] : next) {
        auto it = desired_.find(id);
        // A run changed in place by an update comes with a new job version.
        if (it == desired_.end() || it->second.job_version() != run.job_version()) {
          *changed = true;
          break;
        }
      }
    }
    desired_ = std::move(next);
    desired_revision_ = req.revision();
    return true;
  }
  // A delta is relative to one desired state: applied to any other it would
  // leave runs started or stopped that should not be.
  if (desired_revision_ == 0 || req.base_revision() != desired_revision_) return false;
  for (const std::string& id : req.stop()) *changed |= desired_.erase(id) > 0;
  for (const v1::TaskRun& run : req.desired()) {
    auto [it, added] = desired_.try_emplace(run.run_id(), run);
    if (!added) {
      *changed |= it->second.job_version() != run.job_version();
      it->second = run;
    }
    *changed |= added;
  }
  desired_revision_ = req.revision();
  return true;
}

grpc::Status PollServer::Poll(grpc::ServerContext* ctx, const v1::PollRequest& req, v1::PollResponse* resp) {
  // Only the master says what runs here.
  absl::StatusOr<pki::CertInfo> caller = rpc::Caller(ctx);
  if (!caller.ok()) return rpc::ToGrpc(caller.status());
  if (caller->subject.role != pki::Role::kMaster) {
    HERD_LOG_WARN("refused a poll from {}: only the master may poll", pki::Describe(caller->subject));
    return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                        absl::StrCat(pki::Describe(caller->subject), " may not poll machine ", facts_.name,
                                     ": only the master may"));
  }
  return Answer(req, resp);
}

grpc::Status PollServer::Answer(const v1::PollRequest& req, v1::PollResponse* resp) {
  if (draining_) {
    // Stopping every task before exiting: a new desired state would start
    // again what is being stopped (the master moves the tasks of a machine
    // it cannot poll).
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, absl::StrCat("the agent of ", facts_.name, " is stopping"));
  }
  const int64_t received_ms = clock_->MonotonicMs();
  last_poll_ms_ = received_ms;
  if (!req.machine().empty() && req.machine() != facts_.name) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        absl::StrCat("this agent is ", facts_.name, ", not ", req.machine()));
  }
  bool changed = false, applied;
  int64_t holding;
  {
    absl::MutexLock l(&mu_);
    if (req.lease_ms() > 0) {
      // The lease runs from when the poll the master acknowledges arrived
      // here: that was before the master saw our reply to it, its own last
      // contact with this machine, so the lease never outlasts the time
      // the master gives this machine before placing its at-most-once
      // tasks elsewhere. Renewed before SetDesired, so runs held for want
      // of a lease start with this poll.
      if (req.lease_ack() != 0) {
        for (const auto& [token, at] : lease_polls_) {
          if (token == req.lease_ack()) {
            runs_->RenewLease(clock_->MonotonicMs() - at, req.lease_ms());
            break;
          }
        }
      }
      if (req.lease_token() != 0) {
        lease_polls_.emplace_back(req.lease_token(), received_ms);
        if (lease_polls_.size() > kLeasePolls) lease_polls_.pop_front();
      }
    }
    applied = ApplyLocked(req, &changed);
    // The first desired state is always handed over: until then the runs
    // the table recovered from disk count as desired.
    changed |= applied && !handed_over_;
    holding = desired_revision_;
    if (changed) {
      handed_over_ = true;
      std::vector<v1::TaskRun> desired;
      desired.reserve(desired_.size());
      for (const auto& [id, run] : desired_) desired.push_back(run);
      runs_->SetDesired(desired);
    }
  }
  if (!applied) {
    HERD_LOG_INFO("a delta poll from the master applies to revision {}, this agent holds {}: asking for all",
                  req.base_revision(), holding);
  }
  uint64_t version = 0;
  std::vector<v1::RunStatus> runs = runs_->Observe(&version);
  auto pending = [&runs] {
    int n = 0;
    for (const auto& r : runs) n += r.phase() == v1::Task::STARTING;
    return n;
  };
  if (changed && start_wait_ms_ > 0) {
    const int64_t deadline = clock_->MonotonicMs() + start_wait_ms_;
    while (pending() > 0 && clock_->MonotonicMs() < deadline) {
      version = runs_->WaitForChange(version, deadline - clock_->MonotonicMs());
      runs = runs_->Observe(&version);
    }
  }
  resp->set_machine(facts_.name);
  facts_.capacity.ToProto(resp->mutable_capacity());
  for (const auto& [k, v] : facts_.attributes) (*resp->mutable_attributes())[k] = v;
  resp->set_starts_pending(pending());
  for (auto& r : runs) *resp->add_runs() = std::move(r);
  resp->set_agent_started_ms(runs_->started_ms());
  resp->set_desired_revision(holding);
  runs_->DescribeMachine(resp);
  return grpc::Status::OK;
}

// ---- Registrar --------------------------------------------------------------

Registrar::Registrar(v1::Herd::StubInterface* master, const PollServer& polls, std::string address, Clock* clock,
                     std::string master_name, std::string http)
    : master_(master),
      polls_(polls),
      address_(std::move(address)),
      clock_(clock),
      master_name_(std::move(master_name)),
      http_(std::move(http)) {}

void Registrar::Tick() {
  const int64_t last_contact = std::max(registered_at_.load(), polls_.last_poll_ms());
  if (registered_at_ != 0 && clock_->MonotonicMs() - last_contact <= 5 * interval_ms_) return;
  grpc::Status st = Register();
  if (st.ok()) {
    registered_at_ = clock_->MonotonicMs();
    HERD_LOG_INFO("{} registered with the master at {}", polls_.facts().name, master_name_);
    warned_ = false;
  } else if (!warned_) {
    HERD_LOG_WARN("{} cannot register with the master at {}: {} (will keep trying)", polls_.facts().name,
                  master_name_, st.error_message());
    warned_ = true;
  }
}

grpc::Status Registrar::Register() {
  const MachineFacts& f = polls_.facts();
  v1::RegisterMachineRequest req;
  v1::Machine* m = req.mutable_machine();
  m->set_name(f.name);
  m->set_address(address_);
  m->set_http(http_);
  f.capacity.ToProto(m->mutable_capacity());
  for (const auto& [k, v] : f.attributes) (*m->mutable_attributes())[k] = v;
  v1::RegisterMachineResponse resp;
  auto ctx = rpc::Context("", 5000);
  grpc::Status st = master_->RegisterMachine(ctx.get(), req, &resp);
  if (st.ok()) interval_ms_ = std::max<int64_t>(100, resp.poll_interval_ms());
  return st;
}

// ---- Doorbell ---------------------------------------------------------------

namespace {

// What the master wants to hear of at once about a run.
int Key(const v1::RunStatus& r) { return r.terminal() ? 100 : static_cast<int>(r.phase()); }
bool Worth(const v1::RunStatus& r) {
  return r.terminal() || r.phase() == v1::Task::ACTIVE || r.phase() == v1::Task::EXITED ||
         r.phase() == v1::Task::BACKOFF;
}

}  // namespace

Doorbell::Doorbell(v1::Herd::StubInterface* master, const RunTable& runs, std::string machine)
    : master_(master), runs_(runs), machine_(std::move(machine)) {
  for (const auto& r : runs_.Observe(&version_)) seen_[r.run_id()] = Key(r);
}

bool Doorbell::Tick() {
  if (runs_.Version() == version_) return false;
  bool pending = false;
  absl::flat_hash_map<std::string, int> next;
  for (const auto& r : runs_.Observe(&version_)) {
    const int key = Key(r);
    auto it = seen_.find(r.run_id());
    if ((it == seen_.end() || it->second != key) && Worth(r)) pending = true;
    next[r.run_id()] = key;
  }
  seen_ = std::move(next);
  if (!pending) return false;
  v1::MachineChangedRequest req;
  req.set_machine(machine_);
  v1::MachineChangedResponse resp;
  auto ctx = rpc::Context("", 2000);
  grpc::Status st = master_->MachineChanged(ctx.get(), req, &resp);
  if (!st.ok() && !warned_) {
    // The next poll carries the change anyway.
    HERD_LOG_WARN("{} cannot tell the master of a change: {}", machine_, st.error_message());
    warned_ = true;
  } else if (st.ok()) {
    warned_ = false;
  }
  return true;
}

}  // namespace herd::agent
