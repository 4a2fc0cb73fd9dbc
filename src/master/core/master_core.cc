#include "master/core/master_core.h"

#include <google/protobuf/util/message_differencer.h>

#include <map>
#include <set>

#include "absl/container/flat_hash_set.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/ids.h"
#include "base/log.h"
#include "base/priority.h"
#include "base/status.h"
#include "cell/constraints.h"
#include "master/core/admission.h"
#include "master/core/recovery.h"
#include "spec/validate.h"

namespace herd::master {

absl::StatusOr<std::unique_ptr<MasterCore>> MasterCore::Create(store::LogStore* store, AgentLink* link,
                                                               Clock* clock, MasterOptions options) {
  HERD_ASSIGN_OR_RETURN(cell::CellState state, Recover(*store, 0, options.cell_name));
  HERD_LOG_INFO("recovered cell '{}' at revision {}: {} jobs, {} machines, {} tasks running, {} pending",
                state.cell_name(), state.revision(), state.jobs().size(), state.machines().size(),
                state.task_count(v1::Task::RUNNING), state.task_count(v1::Task::PENDING));
  return std::unique_ptr<MasterCore>(new MasterCore(store, link, clock, std::move(options), std::move(state)));
}

MasterCore::MasterCore(store::LogStore* store, AgentLink* link, Clock* clock, MasterOptions options,
                       cell::CellState state)
    : store_(store), agent_link_(link), clock_(clock), options_(std::move(options)), started_ms_(clock->NowMs()) {
  committer_ = std::make_unique<Committer>(std::move(state), store_, clock_, options_.committer);
  if (options_.run_link) {
    link_shard_ = std::make_unique<LinkShard>(committer_.get(), agent_link_, clock_, options_.link);
    LinkShard* shard = link_shard_.get();
    committer_->SetEffectsListener([shard](const cell::Effects& fx) {
      for (const std::string& m : fx.machines) shard->Kick(m);
    });
  }
  if (options_.run_scheduler) {
    sched_source_ = std::make_unique<CommitterChangeSource>(committer_.get());
    sched_sink_ = std::make_unique<FunctionProposalSink>(
        [this](const v1::ProposeRequest& req) { return Propose("", req); });
    sched_loop_ = std::make_unique<sched::SchedulerLoop>(sched_source_.get(), sched_sink_.get(), clock_,
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

absl::StatusOr<std::string> MasterCore::ResolveJob(const cell::CellState& s, const std::string& caller,
                                                   const std::string& ref_text) const {
  HERD_ASSIGN_OR_RETURN(JobRef ref, ParseJobRef(ref_text));
  if (!ref.user.empty()) {
    if (s.FindJob(ref.Id()) == nullptr) return absl::NotFoundError(absl::StrCat("no job ", ref.Id()));
    return ref.Id();
  }
  if (!caller.empty() && s.FindJob(JobId(caller, ref.name)) != nullptr) return JobId(caller, ref.name);
  std::vector<std::string> matches;
  for (const auto& [id, job] : s.jobs()) {
    if (job->spec.name() == ref.name) matches.push_back(id);
  }
  if (matches.empty()) return absl::NotFoundError(absl::StrCat("no job named ", ref.name));
  if (matches.size() > 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("job name ", ref.name, " is ambiguous: ", absl::StrJoin(matches, ", "), "; use USER/NAME"));
  }
  return matches[0];
}

template <typename T>
absl::StatusOr<T> MasterCore::AtRevision(int64_t at_revision,
                                         const std::function<absl::StatusOr<T>(const cell::CellState&)>& fn) {
  if (at_revision == 0 || at_revision == committer_->revision()) {
    return committer_->Read([&](const cell::CellState& s) { return fn(s); });
  }
  HERD_ASSIGN_OR_RETURN(cell::CellState past, Recover(*store_, at_revision, options_.cell_name));
  return fn(past);
}

namespace {
bool SameAttributes(const cell::Attributes& a, const cell::Attributes& b) {
  if (a.size() != b.size()) return false;
  for (const auto& [k, v] : b) {
    auto it = a.find(k);
    if (it == a.end() || it->second != v) return false;
  }
  return true;
}

bool SameSpec(v1::JobSpec a, v1::JobSpec b) {
  a.clear_source();
  b.clear_source();
  return google::protobuf::util::MessageDifferencer::Equals(a, b);
}
}  // namespace

absl::StatusOr<v1::SubmitResponse> MasterCore::Submit(const std::string& user, const v1::SubmitRequest& req) {
  if (req.jobs().empty()) return absl::InvalidArgumentError("nothing to submit: no jobs");
  // Validation needs no state: do it outside the lock.
  std::vector<v1::JobSpec> specs;
  std::vector<std::string> problems;
  for (v1::JobSpec spec : req.jobs()) {
    if (spec.user().empty()) spec.set_user(user);
    if (absl::Status st = spec::Validate(spec); !st.ok()) {
      problems.push_back(absl::StrCat("job ", spec.user(), "/", spec.name(), ": ", st.message()));
    }
    specs.push_back(std::move(spec));
  }
  if (!problems.empty()) return absl::InvalidArgumentError(absl::StrJoin(problems, "\n"));

  v1::SubmitResponse resp;
  auto build = [&](const cell::CellState& s) -> absl::StatusOr<std::vector<v1::Mutation>> {
    resp.Clear();
    if (!req.request_id().empty()) {
      if (const auto* jobs = s.FindRequest(req.request_id())) {
        // A retry of a request that already succeeded: same answer, no change.
        for (const std::string& id : *jobs) {
          v1::SubmitResult* r = resp.add_results();
          r->set_job(id);
          r->set_created(false);
          if (const cell::Job* j = s.FindJob(id)) r->set_tasks(j->spec.task_count());
        }
        return std::vector<v1::Mutation>{};
      }
    }
    std::vector<v1::JobSpec> fresh;
    for (const v1::JobSpec& spec : specs) {
      std::string id = JobId(spec.user(), spec.name());
      v1::SubmitResult* r = resp.add_results();
      r->set_job(id);
      r->set_tasks(spec.task_count());
      const cell::Job* old = s.FindJob(id);
      if (old != nullptr && old->state != v1::Job::DEAD) {
        if (SameSpec(old->spec, spec)) {
          r->set_created(false);  // identical live job: nothing to do
          continue;
        }
        return absl::AlreadyExistsError(absl::StrCat(
            "job ", id, " already exists with a different spec (submitted at revision ", old->submit_revision,
            "); kill it first or use another name"));
      }
      r->set_created(true);
      fresh.push_back(spec);
    }
    if (fresh.empty()) return std::vector<v1::Mutation>{};
    HERD_RETURN_IF_ERROR(CheckQuota(s, fresh));
    if (req.dry_run()) return std::vector<v1::Mutation>{};
    v1::Mutation m;
    for (auto& spec : fresh) *m.mutable_jobs_submitted()->add_jobs() = std::move(spec);
    m.mutable_jobs_submitted()->set_request_id(req.request_id());
    return std::vector<v1::Mutation>{std::move(m)};
  };
  HERD_ASSIGN_OR_RETURN(int64_t rev, committer_->Commit(user, build));
  resp.set_revision(rev);
  return resp;
}

absl::StatusOr<v1::KillResponse> MasterCore::Kill(const std::string& user, const v1::KillRequest& req) {
  std::string id;
  auto build = [&](const cell::CellState& s) -> absl::StatusOr<std::vector<v1::Mutation>> {
    HERD_ASSIGN_OR_RETURN(id, ResolveJob(s, user, req.job()));
    if (s.FindJob(id)->state == v1::Job::DEAD) return std::vector<v1::Mutation>{};  // already dead: idempotent
    v1::Mutation m;
    m.mutable_job_killed()->set_job(id);
    m.mutable_job_killed()->set_reason(req.reason().empty() ? absl::StrCat("killed by ", user) : req.reason());
    return std::vector<v1::Mutation>{std::move(m)};
  };
  HERD_ASSIGN_OR_RETURN(int64_t rev, committer_->Commit(user, build));
  v1::KillResponse resp;
  resp.set_revision(rev);
  committer_->Read([&](const cell::CellState& s) {
    if (const cell::Job* j = s.FindJob(id)) *resp.mutable_job() = j->ToProto();
    return 0;
  });
  return resp;
}

absl::StatusOr<v1::GetJobResponse> MasterCore::GetJob(const std::string& user, const v1::GetJobRequest& req) {
  HERD_ASSIGN_OR_RETURN(
      v1::GetJobResponse resp,
      AtRevision<v1::GetJobResponse>(req.at_revision(), [&](const cell::CellState& s) -> absl::StatusOr<v1::GetJobResponse> {
        HERD_ASSIGN_OR_RETURN(std::string id, ResolveJob(s, user, req.job()));
        const cell::Job* j = s.FindJob(id);
        v1::GetJobResponse r;
        *r.mutable_job() = j->ToProto();
        for (const cell::Task& t : j->tasks) *r.add_tasks() = t.ToProto();
        r.set_revision(s.revision());
        return r;
      }));
  if (req.at_revision() == 0) {
    std::map<int32_t, int64_t> pending;
    for (const v1::Task& t : resp.tasks()) {
      if (t.state() == v1::Task::PENDING) pending[t.index()] = t.state_revision();
    }
    for (const v1::PendingDiagnosis& d : why_.For(resp.job().id(), pending)) {
      for (int32_t index : d.indexes()) (*resp.mutable_why_pending())[index] = d.text();
    }
  }
  return resp;
}

absl::StatusOr<v1::ProposeResponse> MasterCore::Propose(const std::string& user, const v1::ProposeRequest& req) {
  std::string scheduler = req.scheduler();
  if (scheduler.empty()) scheduler = user.empty() ? "external" : absl::StrCat("scheduler:", user);
  std::vector<v1::Mutation> ms;
  ms.reserve(req.placements_size());
  absl::flat_hash_set<std::string> looked_at;
  for (const v1::TaskScheduled& p : req.placements()) {
    v1::Mutation m;
    v1::TaskScheduled* ts = m.mutable_task_scheduled();
    *ts = p;
    if (ts->scheduler().empty()) ts->set_scheduler(scheduler);
    if (ts->based_on_revision() == 0) ts->set_based_on_revision(req.based_on_revision());
    looked_at.insert(p.job());
    ms.push_back(std::move(m));
  }
  std::vector<absl::Status> st = ms.empty() ? std::vector<absl::Status>{} : committer_->CommitEach(scheduler, std::move(ms));
  v1::ProposeResponse resp;
  for (const absl::Status& s : st) {
    v1::ProposalResult* r = resp.add_results();
    r->set_accepted(s.ok());
    if (!s.ok()) r->set_reason(std::string(s.message()));
  }
  resp.set_revision(committer_->revision());

  // Why the rest is pending: latest per job, from whichever scheduler.
  std::vector<v1::PendingDiagnosis> pending(req.pending().begin(), req.pending().end());
  for (v1::PendingDiagnosis& d : pending) {
    if (d.scheduler().empty()) d.set_scheduler(scheduler);
    if (d.revision() == 0) d.set_revision(req.based_on_revision());
    looked_at.insert(d.job());
  }
  why_.Record(looked_at, pending);
  // Now and then, forget jobs that have nothing pending any more.
  int64_t now = clock_->MonotonicMs();
  int64_t last = why_pruned_ms_.load();
  if (now - last >= 1000 && why_pruned_ms_.compare_exchange_strong(last, now)) {
    std::vector<std::string> jobs = why_.Jobs();
    absl::flat_hash_set<std::string> keep = committer_->Read([&](const cell::CellState& s) {
      absl::flat_hash_set<std::string> k;
      for (const std::string& id : jobs) {
        const cell::Job* j = s.FindJob(id);
        if (j != nullptr && j->pending > 0) k.insert(id);
      }
      return k;
    });
    why_.Retain([&](const std::string& id) { return keep.contains(id); });
  }
  return resp;
}

absl::StatusOr<v1::WhyResponse> MasterCore::Why(const std::string& user, const v1::WhyRequest& req) {
  std::string id;
  std::map<int32_t, int64_t> pending;  // index -> state revision
  HERD_RETURN_IF_ERROR(committer_->Read([&](const cell::CellState& s) -> absl::Status {
    HERD_ASSIGN_OR_RETURN(id, ResolveJob(s, user, req.job()));
    for (const cell::Task& t : s.FindJob(id)->tasks) {
      if (t.state == v1::Task::PENDING) pending[t.index] = t.state_revision;
    }
    return absl::OkStatus();
  }));
  v1::WhyResponse resp;
  resp.set_job(id);
  resp.set_pending_tasks(static_cast<int32_t>(pending.size()));
  size_t explained = 0;
  for (v1::PendingDiagnosis& d : why_.For(id, pending)) {
    explained += d.indexes_size();
    *resp.add_pending() = std::move(d);
  }
  if (pending.empty()) {
    resp.set_note("the job has no pending tasks");
  } else if (explained == 0) {
    resp.set_note("no scheduler pass has looked at it yet");
  } else if (explained < pending.size()) {
    size_t n = pending.size() - explained;
    resp.set_note(absl::StrCat(n, " pending task", n == 1 ? "" : "s",
                               " not looked at yet by a scheduler pass (being placed, or pending again since)"));
  }
  return resp;
}

absl::StatusOr<v1::ListJobsResponse> MasterCore::ListJobs(const v1::ListJobsRequest& req) {
  return AtRevision<v1::ListJobsResponse>(req.at_revision(), [&](const cell::CellState& s) -> absl::StatusOr<v1::ListJobsResponse> {
    v1::ListJobsResponse r;
    for (const auto& [id, j] : s.jobs()) {
      if (!req.user().empty() && j->spec.user() != req.user()) continue;
      if (!req.include_dead() && j->state == v1::Job::DEAD) continue;
      *r.add_jobs() = j->ToProto();
    }
    r.set_revision(s.revision());
    return r;
  });
}

absl::StatusOr<v1::ListTasksResponse> MasterCore::ListTasks(const std::string& user, const v1::ListTasksRequest& req) {
  return AtRevision<v1::ListTasksResponse>(req.at_revision(), [&](const cell::CellState& s) -> absl::StatusOr<v1::ListTasksResponse> {
    HERD_ASSIGN_OR_RETURN(std::string id, ResolveJob(s, user, req.job()));
    v1::ListTasksResponse r;
    for (const cell::Task& t : s.FindJob(id)->tasks) *r.add_tasks() = t.ToProto();
    r.set_revision(s.revision());
    return r;
  });
}

absl::StatusOr<v1::GetTaskResponse> MasterCore::GetTask(const std::string& user, const v1::GetTaskRequest& req) {
  return committer_->Read([&](const cell::CellState& s) -> absl::StatusOr<v1::GetTaskResponse> {
    HERD_ASSIGN_OR_RETURN(std::string id, ResolveJob(s, user, req.job()));
    const cell::Task* t = s.FindTask(id, req.index());
    if (t == nullptr) {
      return absl::NotFoundError(absl::StrCat("job ", id, " has no task ", req.index(), " (it has ",
                                              s.FindJob(id)->tasks.size(), ")"));
    }
    v1::GetTaskResponse r;
    *r.mutable_task() = t->ToProto();
    std::string machine = t->machine ? t->machine->name : t->last_machine;
    if (const cell::Machine* m = s.FindMachine(machine)) *r.mutable_machine() = m->ToProto();
    if (t->incarnation > 0) r.set_run_id(RunId(id, t->index, t->incarnation));
    return r;
  });
}

absl::StatusOr<v1::ListMachinesResponse> MasterCore::ListMachines(const v1::ListMachinesRequest& req) {
  return AtRevision<v1::ListMachinesResponse>(req.at_revision(), [&](const cell::CellState& s) -> absl::StatusOr<v1::ListMachinesResponse> {
    v1::ListMachinesResponse r;
    for (const cell::Machine* m : s.machines()) *r.add_machines() = m->ToProto();
    r.set_revision(s.revision());
    return r;
  });
}

absl::StatusOr<v1::SetQuotaResponse> MasterCore::SetQuota(const std::string& user, const v1::SetQuotaRequest& req) {
  v1::Quota q = req.quota();
  if (q.limited().empty()) {
    for (const std::string& d : LimitedDimensions(q)) q.add_limited(d);
  }
  for (const std::string& d : q.limited()) {
    if (d != "cpu" && d != "memory" && d != "disk" && d != "ports") {
      HERD_RETURN_IF_ERROR(ValidateResourceName(d));
    }
  }
  auto build = [&](const cell::CellState&) -> absl::StatusOr<std::vector<v1::Mutation>> {
    v1::Mutation m;
    *m.mutable_quota_set()->mutable_quota() = q;
    return std::vector<v1::Mutation>{m};
  };
  HERD_ASSIGN_OR_RETURN(int64_t rev, committer_->Commit(user, build));
  v1::SetQuotaResponse r;
  r.set_revision(rev);
  return r;
}

absl::StatusOr<v1::ListQuotasResponse> MasterCore::ListQuotas(const v1::ListQuotasRequest& req) {
  return committer_->Read([&](const cell::CellState& s) -> absl::StatusOr<v1::ListQuotasResponse> {
    v1::ListQuotasResponse r;
    for (const auto& [key, q] : s.quotas()) {
      if (!req.user().empty() && q.user() != req.user()) continue;
      v1::QuotaUsage* u = r.add_quotas();
      *u->mutable_quota() = q;
      s.Usage(q.user(), *ParseBand(q.band())).ToProto(u->mutable_used());
    }
    // Users with live work but no quota in a band are unlimited there.
    std::set<std::pair<std::string, std::string>> seen;
    for (const auto& [key, q] : s.quotas()) seen.insert(key);
    for (const auto& [id, j] : s.jobs()) {
      if (j->state == v1::Job::DEAD) continue;
      if (!req.user().empty() && j->spec.user() != req.user()) continue;
      std::string band(BandNameOf(j->spec.priority()));
      if (!seen.insert({j->spec.user(), band}).second) continue;
      v1::QuotaUsage* u = r.add_quotas();
      u->mutable_quota()->set_user(j->spec.user());
      u->mutable_quota()->set_band(band);
      u->set_unlimited(true);
      s.Usage(j->spec.user(), BandOf(j->spec.priority())).ToProto(u->mutable_used());
    }
    return r;
  });
}

absl::StatusOr<v1::RegisterMachineResponse> MasterCore::RegisterMachine(const v1::RegisterMachineRequest& req) {
  const v1::Machine& in = req.machine();
  HERD_RETURN_IF_ERROR(ValidateMachineName(in.name()));
  if (in.address().empty()) return absl::InvalidArgumentError("machine address is required");
  auto build = [&](const cell::CellState& s) -> absl::StatusOr<std::vector<v1::Mutation>> {
    const cell::Machine* m = s.FindMachine(in.name());
    if (m != nullptr && m->state == v1::Machine::UP && m->address == in.address() &&
        m->capacity == ResourceVector::FromProto(in.capacity()) && SameAttributes(m->attributes, in.attributes())) {
      return std::vector<v1::Mutation>{};  // nothing changed
    }
    v1::Mutation mut;
    v1::Machine* out = mut.mutable_machine_registered()->mutable_machine();
    out->set_name(in.name());
    out->set_address(in.address());
    *out->mutable_capacity() = in.capacity();
    *out->mutable_attributes() = in.attributes();
    return std::vector<v1::Mutation>{mut};
  };
  HERD_ASSIGN_OR_RETURN(int64_t rev, committer_->Commit(absl::StrCat("agent:", in.name()), build));
  if (link_shard_) link_shard_->Kick(in.name());
  v1::RegisterMachineResponse r;
  r.set_revision(rev);
  r.set_poll_interval_ms(options_.link.poll_interval_ms);
  return r;
}

v1::CellInfo MasterCore::GetCell() {
  v1::CellInfo info = committer_->Read([&](const cell::CellState& s) {
    v1::CellInfo i;
    i.set_cell(s.cell_name());
    i.set_revision(s.revision());
    i.set_machines(static_cast<int32_t>(s.machines().size()));
    int32_t up = 0;
    for (const cell::Machine* m : s.machines()) up += m->state == v1::Machine::UP;
    i.set_machines_up(up);
    int32_t live = 0;
    for (const auto& [id, j] : s.jobs()) live += j->state != v1::Job::DEAD;
    i.set_jobs(live);
    i.set_tasks_pending(static_cast<int32_t>(s.task_count(v1::Task::PENDING)));
    i.set_tasks_running(static_cast<int32_t>(s.task_count(v1::Task::RUNNING)));
    i.set_tasks_dead(static_cast<int32_t>(s.task_count(v1::Task::DEAD)));
    return i;
  });
  info.set_durable_revision(committer_->durable_revision());
  info.set_version(options_.version);
  info.set_started_ms(started_ms_);
  return info;
}

absl::Status MasterCore::Watch(int64_t from_revision, const std::function<bool(const v1::WatchResponse&)>& send,
                               const std::function<bool()>& cancelled) {
  int64_t after = from_revision > 0 ? from_revision - 1 : committer_->durable_revision();
  while (!cancelled()) {
    auto batch = committer_->WaitForMutations(after, 500, 1000);
    if (batch.status().code() == absl::StatusCode::kOutOfRange) {
      // Older than the in-memory feed: serve it from the store.
      int64_t upto = committer_->FeedStart() - 1;
      v1::WatchResponse resp;
      bool ok = true;
      HERD_RETURN_IF_ERROR(store_->ReadLog(after + 1, upto, [&](const v1::Mutation& m) {
        *resp.add_mutations() = m;
        after = m.revision();
        if (resp.mutations_size() >= 1000) {
          ok = send(resp);
          resp.Clear();
          if (!ok) return absl::CancelledError("watcher gone");
        }
        return absl::OkStatus();
      }));
      if (resp.mutations_size() > 0 && !send(resp)) return absl::OkStatus();
      if (!ok) return absl::OkStatus();
      continue;
    }
    HERD_RETURN_IF_ERROR(batch.status());
    if (batch->empty()) continue;
    v1::WatchResponse resp;
    for (auto& m : *batch) *resp.add_mutations() = std::move(m);
    after = resp.mutations(resp.mutations_size() - 1).revision();
    if (!send(resp)) return absl::OkStatus();
  }
  return absl::OkStatus();
}

absl::Status MasterCore::ExportCheckpoint(int64_t up_to_revision,
                                          const std::function<bool(const v1::CheckpointRecord&)>& write) {
  int64_t durable = committer_->durable_revision();
  int64_t upto = up_to_revision == 0 ? durable : up_to_revision;
  if (upto > durable) {
    return absl::OutOfRangeError(absl::StrCat("revision ", upto, " is in the future (newest is ", durable, ")"));
  }
  HERD_ASSIGN_OR_RETURN(int64_t first, store_->FirstRevision());
  if (upto < first) {
    return absl::OutOfRangeError(absl::StrCat("revision ", upto, " was compacted away (oldest is ", first, ")"));
  }
  HERD_ASSIGN_OR_RETURN(std::optional<v1::CellSnapshot> snap, store_->ReadSnapshot(upto));
  v1::CellSnapshot base;
  if (snap.has_value()) {
    base = std::move(*snap);
  } else {
    base.set_cell(options_.cell_name);  // the empty cell at revision 0
  }
  v1::CheckpointRecord rec;
  v1::CheckpointHeader* h = rec.mutable_header();
  h->set_cell(options_.cell_name);
  h->set_snapshot_revision(base.revision());
  h->set_last_revision(upto);
  h->set_created_ms(clock_->NowMs());
  h->set_herd_version(options_.version);
  if (!write(rec)) return absl::CancelledError("checkpoint reader went away");
  rec.Clear();
  *rec.mutable_snapshot() = std::move(base);
  int64_t from = rec.snapshot().revision() + 1;
  if (!write(rec)) return absl::CancelledError("checkpoint reader went away");
  if (from > upto) return absl::OkStatus();
  return store_->ReadLog(from, upto, [&](const v1::Mutation& m) {
    v1::CheckpointRecord r;
    *r.mutable_mutation() = m;
    return write(r) ? absl::OkStatus() : absl::CancelledError("checkpoint reader went away");
  });
}

}  // namespace herd::master
