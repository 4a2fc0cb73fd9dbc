#include "master/core/committer.h"

#include <chrono>

#include "absl/strings/str_cat.h"
#include "base/check.h"
#include "base/exhaustive.h"
#include "base/log.h"
#include "base/status.h"

namespace herd::master {

Committer::Committer(cell::CellState state, store::LogStore* store, Clock* clock, Options opts)
    : Committer(FollowerTag{}, std::move(state), clock, opts) {
  absl::MutexLock l(&mu_);
  InstallLog(std::make_unique<store::GroupCommitLog>(store), store);
}

Committer::Committer(FollowerTag, cell::CellState state, Clock* clock, Options opts)
    : store_(nullptr), clock_(clock), opts_(opts), state_(std::move(state)) {
  last_snapshot_ = state_.revision();
  followed_ = state_.revision();
  durable_seen_ = state_.revision();
  snapshot_thread_ = std::thread([this] { SnapshotLoop(); });
}

Committer::~Committer() {
  {
    absl::MutexLock l(&feed_mu_);
    stopping_ = true;
  }
  snapshot_thread_.join();
  if (log_) log_->SetOnDurable(nullptr);
}

void Committer::SetDurableSeen(int64_t rev) {
  absl::MutexLock l(&feed_mu_);
  if (rev <= durable_seen_) return;
  durable_seen_ = rev;
  DurableAdvancedLocked();
}

void Committer::DurableAdvancedLocked() {
  for (const auto& [id, fn] : durable_listeners_) fn();
}

int Committer::AddDurableListener(std::function<void()> fn) {
  absl::MutexLock l(&feed_mu_);
  const int id = next_listener_++;
  durable_listeners_.emplace(id, std::move(fn));
  return id;
}

void Committer::RemoveDurableListener(int id) {
  absl::MutexLock l(&feed_mu_);
  durable_listeners_.erase(id);
}

absl::Status Committer::CheckLeading() const {
  if (leading()) return absl::OkStatus();
  return absl::FailedPreconditionError("this master is a follower: changes are made by the leader");
}

absl::Status Committer::Follow(const std::vector<v1::Mutation>& committed) {
  int64_t rev;
  {
    absl::MutexLock l(&mu_);
    if (log_ != nullptr) return absl::FailedPreconditionError("the leader does not follow");
    for (const v1::Mutation& m : committed) {
      if (m.revision() <= state_.revision()) continue;
      if (m.revision() != state_.revision() + 1) {
        return absl::DataLossError(absl::StrCat("the log skips from revision ", state_.revision(), " to ",
                                                m.revision()));
      }
      absl::Status st = state_.Apply(m);
      if (!st.ok()) {
        return absl::DataLossError(absl::StrCat("log does not replay at revision ", m.revision(), ": ", st.message()));
      }
      feed_.push_back(m);
      while (feed_.size() > opts_.feed_size) feed_.pop_front();
    }
    rev = state_.revision();
    followed_.store(rev, std::memory_order_release);
  }
  SetDurableSeen(rev);
  return absl::OkStatus();
}

void Committer::Reset(cell::CellState state) {
  int64_t rev;
  {
    absl::MutexLock l(&mu_);
    HERD_CHECK(log_ == nullptr);
    state_ = std::move(state);
    feed_.clear();
    last_snapshot_ = rev = state_.revision();
    followed_.store(rev, std::memory_order_release);
  }
  SetDurableSeen(rev);
}

absl::Status Committer::Promote(store::LogStore* store) {
  absl::MutexLock l(&mu_);
  if (log_ != nullptr) return absl::FailedPreconditionError("already the leader");
  auto log = std::make_unique<store::GroupCommitLog>(store);
  HERD_RETURN_IF_ERROR(log->status());
  if (log->DurableRevision() != state_.revision()) {
    return absl::FailedPreconditionError(absl::StrCat("the store is at revision ", log->DurableRevision(),
                                                      ", the state at ", state_.revision()));
  }
  InstallLog(std::move(log), store);
  return absl::OkStatus();
}

void Committer::InstallLog(std::unique_ptr<store::GroupCommitLog> log, store::LogStore* store) {
  log->SetOnDurable([this](int64_t rev) {
    absl::MutexLock l(&feed_mu_);
    durable_seen_ = rev;
    DurableAdvancedLocked();
  });
  SetDurableSeen(log->DurableRevision());
  store_ = store;
  log_ = std::move(log);
  log_ptr_.store(log_.get(), std::memory_order_release);
}

bool Committer::WaitApplied(int64_t revision, absl::Duration timeout) {
  absl::MutexLock l(&feed_mu_);
  auto ready = [&]() { return durable_seen_ >= revision || stopping_; };
  return feed_mu_.AwaitWithTimeout(absl::Condition(&ready), timeout) && durable_seen_ >= revision;
}

absl::Status Committer::WaitDurable(int64_t revision) {
  store::GroupCommitLog* log = log_ptr_.load(std::memory_order_acquire);
  if (log != nullptr) return log->WaitDurable(revision);
  if (revision <= followed_.load(std::memory_order_acquire)) return absl::OkStatus();
  return CheckLeading();
}

int64_t Committer::revision() const {
  absl::ReaderMutexLock l(&mu_);
  return state_.revision();
}

int64_t Committer::ApplyLocked(v1::Mutation& m, absl::string_view actor) {
  m.set_revision(state_.revision() + 1);
  if (m.time_ms() == 0) m.set_time_ms(clock_->NowMs());
  if (m.actor().empty()) m.set_actor(std::string(actor));
  cell::Effects fx;
  absl::Status st = state_.Apply(m, &fx);
  HERD_CHECK_MSG(st.ok(), st.ToString());  // callers checked first
  if (effects_fn_) effects_fn_(fx);
  if (opts_.on_applied) opts_.on_applied(m);
  feed_.push_back(m);
  while (feed_.size() > opts_.feed_size) feed_.pop_front();
  return m.revision();
}

absl::Status Committer::WaitAndCheck(int64_t revision) {
  absl::Status st = log_->WaitDurable(revision);
  if (!st.ok()) {
    HERD_LOG_ERROR("store failed; state in memory is ahead of disk: {}", st.ToString());
    bool report = false;
    {
      absl::MutexLock l(&feed_mu_);
      report = !fatal_reported_;
      fatal_reported_ = true;
    }
    if (report && fatal_fn_) fatal_fn_(st);
    return absl::UnavailableError(absl::StrCat("the master's store failed: ", st.message()));
  }
  MaybeWantSnapshot();
  return absl::OkStatus();
}

void Committer::MaybeWantSnapshot() {
  bool snap = false;
  {
    absl::ReaderMutexLock l(&mu_);
    const double objects = static_cast<double>(state_.task_count(v1::Task::PENDING) +
                                               state_.task_count(v1::Task::RUNNING) +
                                               state_.task_count(v1::Task::DEAD) + state_.machines().size());
    const int64_t every = std::max<int64_t>(opts_.snapshot_every, static_cast<int64_t>(opts_.snapshot_per_object * objects));
    snap = opts_.snapshot_every > 0 && state_.revision() - last_snapshot_ >= every;
  }
  if (snap) {
    absl::MutexLock l(&feed_mu_);
    snapshot_wanted_ = true;
  }
}

// Below the disk reserve, what frees space or only follows what machines
// did still goes through (issue #33, M5: a full disk refused the admin's
// kill that would have freed it, and tasks' exits went unrecorded): kills,
// scale-downs, drains, and the agents' task and machine reports.
// Everything that adds work waits for space.
static bool AllowedBelowReserve(const cell::CellState& s, const v1::Mutation& m) {
  HERD_EXHAUSTIVE_BEGIN
  switch (m.kind_case()) {
    case v1::Mutation::kJobKilled:
    case v1::Mutation::kMachineDrained:
    case v1::Mutation::kTaskObserved:
    case v1::Mutation::kTaskExited:
    case v1::Mutation::kTaskLost:
    case v1::Mutation::kTaskRescheduled:
    case v1::Mutation::kMachineDown:
    case v1::Mutation::kMachineUp:
    case v1::Mutation::kMachinePackages:
    case v1::Mutation::kMachineInterference:
      return true;
    case v1::Mutation::kJobUpdated: {
      const v1::JobUpdated& u = m.job_updated();
      const cell::Job* job = s.FindJob(absl::StrCat(u.spec().user(), "/", u.spec().name()));
      return u.resize() && job != nullptr && u.spec().task_count() < job->spec.task_count();
    }
    case v1::Mutation::kJobsSubmitted:
    case v1::Mutation::kTaskScheduled:
    case v1::Mutation::kMachineRegistered:
    case v1::Mutation::kQuotaSet:
    case v1::Mutation::kReservationsSet:
    case v1::Mutation::kUserSet:
    case v1::Mutation::kJoinTokenSet:
    case v1::Mutation::kTasksUpdated:
    case v1::Mutation::kRolloutChanged:
    case v1::Mutation::kJobReleased:
    case v1::Mutation::kScheduleTriggered:
    case v1::Mutation::KIND_NOT_SET:
      return false;
  }
  HERD_EXHAUSTIVE_END
  return false;
}

absl::Status Committer::CheckSpace(const v1::Mutation* m) const {
  if (!opts_.free_bytes) return absl::OkStatus();
  const int64_t free = opts_.free_bytes();
  if (free < 0 || free >= opts_.min_free_bytes) return absl::OkStatus();
  // A quarter of the reserve is kept even from these: the store needs room
  // to write them.
  if (m != nullptr && free >= opts_.min_free_bytes / 4 && AllowedBelowReserve(state_, *m)) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrCat(
      "the master's disk has ", free >> 20, " MiB free, below its reserve of ", opts_.min_free_bytes >> 20,
      " MiB: changes are refused until space is freed (reads work; kills, scale-downs and drains go through)"));
}

namespace {

double SecondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

absl::StatusOr<int64_t> Committer::Commit(absl::string_view actor, const BuildFn& build) {
  const auto t0 = std::chrono::steady_clock::now();
  HERD_RETURN_IF_ERROR(CheckLeading());
  int64_t last;
  std::vector<v1::Mutation> queued;
  {
    absl::MutexLock l(&mu_);
    HERD_ASSIGN_OR_RETURN(std::vector<v1::Mutation> ms, build(state_));
    if (ms.empty()) return state_.revision();
    for (const v1::Mutation& m : ms) HERD_RETURN_IF_ERROR(CheckSpace(&m));
    // The actor first: checks that depend on it (request ids are per user)
    // see what will be applied.
    for (auto& m : ms) {
      if (m.actor().empty()) m.set_actor(std::string(actor));
    }
    if (ms.size() == 1) {
      HERD_RETURN_IF_ERROR(state_.Check(ms[0]));
    } else {
      // All or nothing: check the whole sequence on a scratch copy first.
      auto scratch = cell::CellState::FromSnapshot(state_.ToSnapshot());
      HERD_RETURN_IF_ERROR(scratch.status());
      for (const auto& m : ms) HERD_RETURN_IF_ERROR(scratch->Apply(m));
    }
    for (auto& m : ms) last = ApplyLocked(m, actor);
    queued = std::move(ms);
    log_->Enqueue(queued);
  }
  HERD_RETURN_IF_ERROR(WaitAndCheck(last));
  if (opts_.on_durable) opts_.on_durable(SecondsSince(t0));
  return last;
}

std::vector<absl::Status> Committer::CommitEach(absl::string_view actor, std::vector<v1::Mutation> mutations) {
  return CommitEachImpl(actor, std::move(mutations), /*wait=*/true);
}

std::vector<absl::Status> Committer::CommitEachNoWait(absl::string_view actor, std::vector<v1::Mutation> mutations) {
  return CommitEachImpl(actor, std::move(mutations), /*wait=*/false);
}

std::vector<absl::Status> Committer::CommitEachImpl(absl::string_view actor, std::vector<v1::Mutation> mutations,
                                                    bool wait) {
  const auto t0 = std::chrono::steady_clock::now();
  if (absl::Status lead = CheckLeading(); !lead.ok()) return std::vector<absl::Status>(mutations.size(), lead);
  std::vector<absl::Status> out(mutations.size());
  int64_t last = 0;
  {
    absl::MutexLock l(&mu_);
    std::vector<v1::Mutation> accepted;
    for (size_t i = 0; i < mutations.size(); ++i) {
      if (mutations[i].actor().empty()) mutations[i].set_actor(std::string(actor));
      out[i] = CheckSpace(&mutations[i]);
      if (out[i].ok()) out[i] = state_.Check(mutations[i]);
      if (!out[i].ok()) continue;
      last = ApplyLocked(mutations[i], actor);
      accepted.push_back(std::move(mutations[i]));
    }
    if (!accepted.empty()) log_->Enqueue(std::move(accepted));
  }
  if (last > 0 && !wait) {
    MaybeWantSnapshot();
    return out;
  }
  if (last > 0) {
    absl::Status st = WaitAndCheck(last);
    if (!st.ok()) {
      for (auto& s : out) {
        if (s.ok()) s = st;
      }
    } else if (opts_.on_durable) {
      opts_.on_durable(SecondsSince(t0));
    }
  }
  return out;
}

int64_t Committer::FeedStart() const {
  absl::ReaderMutexLock l(&mu_);
  return feed_.empty() ? state_.revision() + 1 : feed_.front().revision();
}

absl::StatusOr<std::vector<v1::Mutation>> Committer::WaitForMutations(int64_t after, int64_t timeout_ms,
                                                                      size_t max) {
  {
    absl::MutexLock l(&feed_mu_);
    auto ready = [&]() { return durable_seen_ > after || stopping_; };
    feed_mu_.AwaitWithTimeout(absl::Condition(&ready), absl::Milliseconds(timeout_ms));
  }
  int64_t durable = durable_revision();
  std::vector<v1::Mutation> out;
  absl::ReaderMutexLock l(&mu_);
  int64_t start = feed_.empty() ? state_.revision() + 1 : feed_.front().revision();
  if (after + 1 < start && after < durable) {
    return absl::OutOfRangeError(absl::StrCat("revision ", after + 1, " is older than the in-memory feed (", start,
                                              "); read it from the store"));
  }
  if (feed_.empty() || after >= durable) return out;
  size_t i = static_cast<size_t>(std::max<int64_t>(0, after + 1 - start));
  for (; i < feed_.size() && out.size() < max && feed_[i].revision() <= durable; ++i) out.push_back(feed_[i]);
  return out;
}

absl::Status Committer::WriteSnapshot() {
  v1::CellSnapshot snap;
  store::LogStore* store;
  {
    absl::ReaderMutexLock l(&mu_);
    if (log_ == nullptr) return CheckLeading();
    snap = state_.ToSnapshot();
    store = store_;
  }
  HERD_RETURN_IF_ERROR(log_->WaitDurable(snap.revision()));
  HERD_RETURN_IF_ERROR(store->WriteSnapshot(snap));
  {
    absl::MutexLock l(&mu_);
    last_snapshot_ = std::max(last_snapshot_, snap.revision());
  }
  HERD_LOG_INFO("snapshot written at revision {}", snap.revision());
  return absl::OkStatus();
}

void Committer::SnapshotLoop() {
  while (true) {
    {
      absl::MutexLock l(&feed_mu_);
      auto cond = [this]() { return snapshot_wanted_ || stopping_; };
      feed_mu_.Await(absl::Condition(&cond));
      if (stopping_) return;
      snapshot_wanted_ = false;
    }
    if (absl::Status st = WriteSnapshot(); !st.ok()) HERD_LOG_WARN("snapshot failed: {}", st.ToString());
  }
}

}  // namespace herd::master
