#include "master/core/frameworks/manager.h"

#include <algorithm>
#include <set>
#include <tuple>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/exhaustive.h"
#include "base/framework_labels.h"
#include "base/ids.h"
#include "base/log.h"
#include "base/priority.h"
#include "master/core/admission/quota.h"
#include "master/core/api/jobs.h"

namespace herd::master::frameworks {
namespace {

constexpr size_t kMaxTaskIdLength = 48;
constexpr size_t kMaxFrameworkNameLength = 32;
constexpr size_t kMaxFrameworkIdLength = 8;  // fits "fw-<id>-<task id>" in a job name
constexpr size_t kMaxRoleLength = 64;
constexpr size_t kMaxAttributeFilters = 64;
constexpr int32_t kDefaultPriority = 100;  // the batch band's lowest

bool Terminal(v1::FrameworkTaskState s) {
  return s == v1::TASK_FINISHED || s == v1::TASK_FAILED || s == v1::TASK_KILLED || s == v1::TASK_LOST ||
         s == v1::TASK_ERROR;
}

// a-z, 0-9, '-', '_', '.'; starts with a letter or digit, ends with neither
// '-' nor '.' (so that "fw-<id>-<task>" is a valid job name).
absl::Status CheckId(absl::string_view what, absl::string_view id, size_t max) {
  if (id.empty()) return absl::InvalidArgumentError(absl::StrCat(what, " is empty"));
  if (id.size() > max) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " '", id.substr(0, max), "...' is longer than ", max, " characters"));
  }
  for (char c : id) {
    if (!(absl::ascii_islower(c) || absl::ascii_isdigit(c) || c == '-' || c == '_' || c == '.')) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, " '", id, "' has a character other than a-z, 0-9, '-', '_' and '.'"));
    }
  }
  if (!absl::ascii_isalnum(id.front()) || id.back() == '-' || id.back() == '.') {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " '", id, "' must start with a letter or digit and not end in '-' or '.'"));
  }
  return absl::OkStatus();
}

// What a framework task's Herd task says about it.
struct Observed {
  v1::FrameworkTaskState state = v1::TASK_STAGING;
  std::string message;
  std::string machine;
  int32_t exit_code = 0;
};

Observed Observe(const cell::Job* job) {
  Observed o;
  if (job == nullptr) {
    o.state = v1::TASK_LOST;
    o.message = "its job is gone from the cell";
    return o;
  }
  if (job->tasks.empty()) return o;
  const cell::Task& t = job->tasks.front();
  const cell::EventRec* ev = t.last_event();
  o.machine = t.machine() ? t.machine()->name() : t.last_machine();
  o.exit_code = t.exit_code();
  o.message = ev ? ev->reason : "";
  switch (t.state()) {
    case v1::Task::RUNNING:
      o.state = t.phase() == v1::Task::ACTIVE ? v1::TASK_RUNNING : v1::TASK_STAGING;
      if (!t.message().empty()) o.message = t.message();
      break;
    case v1::Task::PENDING:
      // Placed once and back to pending: its machine went away, or it was
      // preempted or moved. Retrying is the framework's to decide.
      if (ev && (ev->transition == v1::Event::LOST || ev->transition == v1::Event::EVICT ||
                 ev->transition == v1::Event::RESCHEDULE)) {
        o.state = v1::TASK_LOST;
      }
      break;
    case v1::Task::DEAD:
      if (!ev) {
        o.state = v1::TASK_KILLED;
      } else if (ev->transition == v1::Event::FINISH) {
        o.state = v1::TASK_FINISHED;
      } else if (ev->transition == v1::Event::FAIL) {
        o.state = v1::TASK_FAILED;
        if (!t.message().empty()) o.message = t.message();
      } else if (ev->transition == v1::Event::REJECT) {
        o.state = v1::TASK_ERROR;
      } else {
        o.state = v1::TASK_KILLED;
      }
      break;
    default:
      break;
  }
  return o;
}

// The jobs whose tasks `m` changes, into *out; false if it may change tasks
// it does not name (every framework task must be looked at).
bool JobsNamed(const v1::Mutation& m, std::set<std::string>* out) {
  HERD_EXHAUSTIVE_BEGIN
  switch (m.kind_case()) {
    case v1::Mutation::kTaskObserved:
      out->insert(m.task_observed().task().job());
      return true;
    case v1::Mutation::kTaskExited:
      out->insert(m.task_exited().task().job());
      return true;
    case v1::Mutation::kTaskLost:
      out->insert(m.task_lost().task().job());
      return true;
    case v1::Mutation::kTaskRescheduled:
      out->insert(m.task_rescheduled().task().job());
      return true;
    case v1::Mutation::kTaskScheduled:
      out->insert(m.task_scheduled().job());
      for (const v1::TaskRef& v : m.task_scheduled().victims()) out->insert(v.job());
      return true;
    case v1::Mutation::kJobKilled:
      out->insert(m.job_killed().job());
      return true;
    case v1::Mutation::kJobsSubmitted:
      for (const v1::JobSpec& s : m.jobs_submitted().jobs()) out->insert(JobId(s.user(), s.name()));
      return true;
    // Changes that move no task.
    case v1::Mutation::kMachineRegistered:
    case v1::Mutation::kMachineUp:
    case v1::Mutation::kMachinePackages:
    case v1::Mutation::kMachineInterference:
    case v1::Mutation::kReservationsSet:
    case v1::Mutation::kQuotaSet:
    case v1::Mutation::kUserSet:
    case v1::Mutation::kJoinTokenSet:
    case v1::Mutation::kRolloutChanged:
      return true;
    // Changes that may move tasks they do not name.
    case v1::Mutation::kMachineDown:
    case v1::Mutation::kMachineDrained:
    case v1::Mutation::kJobUpdated:
    case v1::Mutation::kTasksUpdated:
    case v1::Mutation::kJobReleased:
    case v1::Mutation::kScheduleTriggered:
    case v1::Mutation::KIND_NOT_SET:
      return false;
  }
  HERD_EXHAUSTIVE_END
  return false;  // a value no enumerator names
}

}  // namespace

// --- EventQueue ---

bool EventQueue::Next(v1::FrameworkEvent* out, absl::Duration timeout) {
  absl::MutexLock l(&mu_);
  auto ready = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return !events_.empty() || closed_; };
  mu_.AwaitWithTimeout(absl::Condition(&ready), timeout);
  if (events_.empty()) return false;
  *out = std::move(events_.front());
  events_.pop_front();
  return true;
}

void EventQueue::SetWaker(std::function<void()> wake) {
  absl::MutexLock l(&mu_);
  wake_ = std::move(wake);
}

void EventQueue::Push(v1::FrameworkEvent e) {
  std::function<void()> wake;
  {
    absl::MutexLock l(&mu_);
    if (closed_) return;
    if (events_.size() >= max_) {
      // It does not read: cut it (it subscribes again and reconciles).
      closed_ = true;
      why_ = "too many events waiting: the framework does not read its stream";
    } else {
      events_.push_back(std::move(e));
    }
    wake = wake_;
  }
  if (wake) wake();
}

void EventQueue::Close(std::string why) {
  std::function<void()> wake;
  {
    absl::MutexLock l(&mu_);
    if (closed_) return;
    closed_ = true;
    why_ = std::move(why);
    wake = wake_;
  }
  if (wake) wake();
}

bool EventQueue::closed() const {
  absl::MutexLock l(&mu_);
  return closed_;
}

std::string EventQueue::why_closed() const {
  absl::MutexLock l(&mu_);
  return why_;
}

size_t EventQueue::size() const {
  absl::MutexLock l(&mu_);
  return events_.size();
}

// --- FrameworkManager ---

FrameworkManager::FrameworkManager(Committer* committer, Clock* clock, const MasterOptions* options, ManagerOptions o)
    : committer_(committer), clock_(clock), opts_(o), rng_(std::random_device{}()) {
  ctx_.committer = committer;
  ctx_.clock = clock;
  ctx_.options = options;
  absl::MutexLock l(&mu_);
  for (const auto& [role, r] : opts_.roles) {
    if (absl::Status st = alloc_.SetRole(role, r.weight, r.guarantee); !st.ok()) {
      HERD_LOG_WARN("frameworks: role {} ignored: {}", role, st.ToString());
    }
  }
}

FrameworkManager::~FrameworkManager() { Stop(); }

std::string FrameworkManager::JobName(const std::string& framework_id, const std::string& task_id) {
  return absl::StrCat("fw-", framework_id, "-", task_id);
}

std::string FrameworkManager::NewId(size_t hex_digits) {
  std::string out;
  while (out.size() < hex_digits) absl::StrAppend(&out, absl::Hex(rng_(), absl::kZeroPad16));
  out.resize(hex_digits);
  return out;
}

void FrameworkManager::Start() {
  Recover();
  {
    absl::MutexLock l(&stop_mu_);
    stopping_ = false;
  }
  thread_ = std::thread([this] { Loop(); });
}

void FrameworkManager::Stop() {
  {
    absl::MutexLock l(&stop_mu_);
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
  absl::MutexLock l(&mu_);
  for (auto& [id, f] : fws_) {
    if (f.events) f.events->Close("the master is stopping");
  }
}

void FrameworkManager::Loop() {
  int64_t seen = committer_->revision();
  bool early = false;  // an early round is due once the gap has passed
  for (;;) {
    {
      absl::MutexLock l(&stop_mu_);
      if (stopping_) return;
    }
    // Wake on the next changes of the cell (a task's status may have
    // changed), or after the offer interval at the latest; observe only the
    // framework jobs they name. A change that moves tasks without naming
    // them (a machine down or drained, a job update), or a feed this loop
    // fell behind, means a look at all of them.
    const int64_t wait_ms =
        early ? std::max<int64_t>(opts_.min_round_gap_ms, 1) : std::min<int64_t>(opts_.offer_interval_ms, 500);
    auto batch = committer_->WaitForMutations(seen, wait_ms, 10'000);
    std::set<std::string> jobs;
    bool all = !batch.ok();
    if (!batch.ok()) {
      seen = committer_->revision();
    } else if (!batch->empty()) {
      seen = batch->back().revision();
      for (const v1::Mutation& m : *batch) all = !JobsNamed(m, &jobs) || all;
    }
    early = Step(all ? nullptr : &jobs);
    // Changes that come in a burst (an accept's, an agent's poll) are
    // seen by one step.
    if (batch.ok() && !batch->empty()) absl::SleepFor(absl::Milliseconds(5));
  }
}

void FrameworkManager::Recover() {
  const int64_t now = clock_->NowMs();
  struct FoundTask {
    std::string task, job;
    ResourceVector resources;
    Observed seen;
    bool live = false;
  };
  struct Found {
    v1::FrameworkInfo info;
    std::vector<FoundTask> tasks;
  };
  std::map<std::string, Found> found;
  committer_->Read([&](const cell::CellState& s) {
    for (const auto& [id, job] : s.jobs()) {
      if (!IsFrameworkTask(job->spec.labels())) continue;
      const bool live = job->state != v1::Job::DEAD;
      if (!live) {
        // Ended: its terminal update may not have been acknowledged to the
        // old leader. Sent again if it ended recently.
        const cell::EventRec* ev = job->tasks.empty() ? nullptr : job->tasks.front().last_event();
        if (ev == nullptr || now - ev->time_ms > opts_.resend_ended_within_ms) continue;
      }
      const auto& labels = job->spec.labels();
      auto get = [&](const char* k) {
        auto it = labels.find(std::string(k));
        return it == labels.end() ? std::string() : it->second;
      };
      Found& f = found[get(kFrameworkLabel)];
      if (live || f.info.id().empty()) {
        f.info.set_id(get(kFrameworkLabel));
        f.info.set_name(get(kFrameworkNameLabel));
        f.info.set_role(get(kFrameworkRoleLabel));
        f.info.set_user(job->spec.user());
        f.info.set_priority(job->spec.priority());
        int64_t failover = 0;
        if (absl::SimpleAtoi(get(kFrameworkFailoverLabel), &failover)) f.info.set_failover_timeout_ms(failover);
      }
      FoundTask t;
      t.task = get(kFrameworkTaskLabel);
      t.job = id;
      t.resources = job->tasks.empty() ? ResourceVector() : job->tasks.front().resources();
      t.seen = Observe(job.get());
      t.live = live;
      f.tasks.push_back(std::move(t));
    }
    return 0;
  });
  absl::MutexLock l(&mu_);
  for (auto& [id, f] : found) {
    if (fws_.contains(id)) continue;
    if (!alloc_.AddFramework(id, f.info.role()).ok()) continue;
    alloc_.SetActive(id, false);
    Framework& fw = fws_[id];
    fw.info = f.info;
    fw.disconnected_ms = now;
    for (FoundTask& t : f.tasks) {
      // Each task's latest status, to be acknowledged again (at least once:
      // the old leader's acknowledgements died with it).
      if (t.live) {
        TaskRec rec;
        rec.job = t.job;
        rec.held = t.resources;
        rec.last = t.seen.state;
        AddTask(fw, id, t.task, std::move(rec));
      }
      Update(fw, t.task, t.job, t.seen.state, t.seen.message, t.seen.machine, t.seen.exit_code, now);
    }
    HERD_LOG_INFO(
        "framework {} ({}, user {}) recovered with {} live tasks and {} updates to deliver; it has {} ms "
        "to subscribe again",
        id, f.info.name(), f.info.user(), fw.tasks.size(), fw.unacked.size(), f.info.failover_timeout_ms());
  }
}

absl::Status FrameworkManager::MayAct(const Principal& who, const std::string& user) const {
  // The caller must be allowed to submit jobs as the framework's user: the
  // user itself, or one with the capability (admin, run-as).
  return ctx_.Authorize(who, Action::kSubmitJob, Resource{"", user, "", ""});
}

absl::Status FrameworkManager::MayUseRole(const Principal& who, const std::string& user,
                                          const std::string& role) const {
  // A role the operator named (a weight, a guarantee) is reserved for the
  // users it lists (#33); the others are everyone's and weigh 1.
  if (role.empty() || who.Has(Capability::kAdmin)) return absl::OkStatus();
  auto it = opts_.roles.find(role);
  if (it == opts_.roles.end() || it->second.users.contains(user)) return absl::OkStatus();
  return absl::PermissionDeniedError(absl::StrCat("role ", role, " is reserved: user ", user,
                                                  " is not among its users (herd master --framework-role ", role,
                                                  "=WEIGHT,users=", user, "+...)"));
}

absl::Status FrameworkManager::MayUsePriority(const Principal& who, const std::string& user, int32_t priority) const {
  // As for a job (admission/quota.h): a user with a quota in the band is
  // held to it, and one whose quota there is zero may not use the band at
  // all; with no quota the band is open (docs/operating.md, Quotas).
  if (priority == 0 || who.Has(Capability::kAdmin)) return absl::OkStatus();
  const Band band = BandOf(priority);
  return committer_->Read([&](const cell::CellState& s) -> absl::Status {
    const v1::Quota* q = s.FindQuota(user, band);
    if (q == nullptr) return absl::OkStatus();
    const ResourceVector limit = ResourceVector::FromProto(q->limit());
    for (const std::string& dim : LimitedDimensions(*q)) {
      if ((dim == "cpu" || dim == "memory") && limit.Get(dim) <= 0) {
        return absl::PermissionDeniedError(absl::StrCat("priority ", priority, ": user ", user,
                                                        " has no quota in band ", BandName(band), " (", dim,
                                                        " limit 0); ask for a priority in a band you have quota in"));
      }
    }
    return absl::OkStatus();
  });
}

absl::StatusOr<FrameworkManager::Framework*> FrameworkManager::Find(const Principal& who, const std::string& id) {
  auto it = fws_.find(id);
  if (it == fws_.end()) {
    return absl::NotFoundError(absl::StrCat("framework '", id.substr(0, 64), "' is not registered"));
  }
  HERD_RETURN_IF_ERROR(MayAct(who, it->second.info.user()));
  return &it->second;
}

void FrameworkManager::Send(Framework& f, v1::FrameworkEvent e) {
  if (f.events) f.events->Push(std::move(e));
}

void FrameworkManager::Update(Framework& f, const std::string& task_id, const std::string& job,
                              v1::FrameworkTaskState state, std::string message, std::string machine, int32_t exit_code,
                              int64_t now) {
  v1::FrameworkTaskStatus st;
  st.set_task_id(task_id);
  st.set_state(state);
  st.set_message(std::move(message));
  st.set_machine(std::move(machine));
  st.set_exit_code(exit_code);
  st.set_uuid(NewId(32));
  st.set_job(job);
  v1::FrameworkEvent e;
  *e.mutable_update()->mutable_status() = st;
  f.unacked[task_id] = {std::move(st), f.events ? now : 0};
  Send(f, std::move(e));
}

absl::StatusOr<FrameworkManager::Subscription> FrameworkManager::Subscribe(const Principal& who,
                                                                           const v1::SubscribeRequest& req) {
  v1::FrameworkInfo info = req.framework();
  if (info.user().empty()) info.set_user(who.user());
  HERD_RETURN_IF_ERROR(ValidateUserName(info.user()));
  if (!info.name().empty()) HERD_RETURN_IF_ERROR(CheckId("framework name", info.name(), kMaxFrameworkNameLength));
  if (info.role().size() > kMaxRoleLength) {
    return absl::InvalidArgumentError(absl::StrCat("role is longer than ", kMaxRoleLength, " characters"));
  }
  if (info.failover_timeout_ms() < 0 || info.failover_timeout_ms() > opts_.max_failover_ms) {
    return absl::InvalidArgumentError(
        absl::StrCat("failover_timeout_ms: ", info.failover_timeout_ms(), " is outside 0..", opts_.max_failover_ms));
  }
  if (info.failover_timeout_ms() == 0) info.set_failover_timeout_ms(opts_.default_failover_ms);
  if (info.priority() == 0) info.set_priority(kDefaultPriority);
  if (info.priority() < 0 || info.priority() > kMaxPriority) {
    return absl::InvalidArgumentError(absl::StrCat("priority: ", info.priority(), " is outside 0..", kMaxPriority));
  }
  HERD_RETURN_IF_ERROR(MayAct(who, info.user()));
  const bool admin = who.Has(Capability::kAdmin);
  if (!admin && info.failover_timeout_ms() > opts_.max_user_failover_ms) {
    return absl::PermissionDeniedError(absl::StrCat(
        "failover_timeout_ms: ", info.failover_timeout_ms(), " is above ", opts_.max_user_failover_ms,
        ", the longest a framework may ask for unless an admin registers it (--framework-max-user-failover)"));
  }
  HERD_RETURN_IF_ERROR(MayUsePriority(who, info.user(), info.priority()));
  const int64_t now = clock_->NowMs();
  absl::MutexLock l(&mu_);
  Framework* f = nullptr;
  if (info.id().empty() || !fws_.contains(info.id())) {
    HERD_RETURN_IF_ERROR(MayUseRole(who, info.user(), info.role()));
    if (fws_.size() >= opts_.max_frameworks) {
      return absl::ResourceExhaustedError(absl::StrCat("the cell has ", fws_.size(), " frameworks, the most it takes"));
    }
    if (opts_.max_frameworks_per_user > 0) {
      size_t mine = 0;
      for (const auto& [fid, other] : fws_) mine += other.info.user() == info.user();
      if (mine >= opts_.max_frameworks_per_user) {
        return absl::ResourceExhaustedError(
            absl::StrCat("user ", info.user(), " has ", mine, " frameworks registered, the most one user may (",
                         "--framework-max-per-user ", opts_.max_frameworks_per_user,
                         "); tear one down or wait for a disconnected one's failover timeout"));
      }
    }
    std::string id = info.id();
    if (id.empty()) {
      do id = NewId(8);
      while (fws_.contains(id));
    } else {
      // An id this leader does not know: the framework was registered with
      // an earlier leader and had no live task to recover it from. It keeps
      // its id (nothing of it is left to protect).
      HERD_RETURN_IF_ERROR(CheckId("framework id", id, kMaxFrameworkIdLength));
    }
    info.set_id(id);
    HERD_RETURN_IF_ERROR(alloc_.AddFramework(id, info.role()));
    f = &fws_[id];
    f->info = info;
    HERD_LOG_INFO("framework {} ({}, user {}, role {}) registered by {}", id, info.name(), info.user(),
                  info.role().empty() ? "*" : info.role(), who.name);
  } else {
    HERD_ASSIGN_OR_RETURN(f, Find(who, info.id()));
    if (f->info.user() != info.user()) {
      return absl::PermissionDeniedError(
          absl::StrCat("framework ", info.id(), " belongs to user ", f->info.user(), ", not ", info.user()));
    }
    // A new subscription replaces the old one (the framework failed over).
    if (f->events) f->events->Close("replaced by a newer subscription");
    RescindAll(info.id(), /*tell=*/false);
    // Name and failover timeout may change; role and user stay (its tasks carry them).
    info.set_role(f->info.role());
    f->info = info;
    HERD_LOG_INFO("framework {} ({}) subscribed again ({} tasks)", info.id(), info.name(), f->tasks.size());
  }
  f->events = std::make_shared<EventQueue>(opts_.max_queue);
  f->disconnected_ms = 0;
  f->last_heartbeat_ms = now;
  alloc_.SetActive(info.id(), true);
  v1::FrameworkEvent e;
  e.mutable_subscribed()->set_framework_id(info.id());
  e.mutable_subscribed()->set_heartbeat_interval_ms(opts_.heartbeat_ms);
  f->events->Push(std::move(e));
  // Updates it has not acknowledged, again.
  for (auto& [task, pending] : f->unacked) {
    v1::FrameworkEvent u;
    *u.mutable_update()->mutable_status() = pending.first;
    f->events->Push(std::move(u));
    pending.second = now;
  }
  next_round_ms_ = 0;  // offers at once
  return Subscription{info.id(), f->events};
}

void FrameworkManager::Disconnected(const Subscription& sub) {
  absl::MutexLock l(&mu_);
  auto it = fws_.find(sub.framework_id);
  if (it == fws_.end() || it->second.events != sub.events) return;  // replaced or removed meanwhile
  Framework& f = it->second;
  f.events->Close("disconnected");
  f.events.reset();
  f.disconnected_ms = clock_->NowMs();
  alloc_.SetActive(sub.framework_id, false);
  RescindAll(sub.framework_id, /*tell=*/false);
  HERD_LOG_INFO("framework {} ({}) disconnected; its {} tasks are kept for {} ms", sub.framework_id, f.info.name(),
                f.tasks.size(), f.info.failover_timeout_ms());
}

void FrameworkManager::RescindOffer(const std::string& offer_id, bool tell) {
  auto it = offers_.find(offer_id);
  if (it == offers_.end()) return;
  alloc_.Recover(it->second.framework, it->second.resources);
  freed_ = true;
  if (tell) {
    if (auto f = fws_.find(it->second.framework); f != fws_.end()) {
      v1::FrameworkEvent e;
      e.mutable_rescind()->set_offer_id(offer_id);
      Send(f->second, std::move(e));
    }
  }
  offers_.erase(it);
}

void FrameworkManager::RescindAll(const std::string& framework_id, bool tell) {
  std::vector<std::string> ids;
  for (const auto& [id, o] : offers_) {
    if (o.framework == framework_id) ids.push_back(id);
  }
  for (const std::string& id : ids) RescindOffer(id, tell);
}

absl::Status FrameworkManager::CheckAcceptLimits(const v1::AcceptRequest& req) const {
  if (req.offer_ids().empty()) return absl::InvalidArgumentError("accept names no offer");
  if (static_cast<size_t>(req.offer_ids_size()) > opts_.max_offers_per_call) {
    return absl::InvalidArgumentError(
        absl::StrCat("accept names ", req.offer_ids_size(), " offers; at most ", opts_.max_offers_per_call));
  }
  if (static_cast<size_t>(req.tasks_size()) > opts_.max_tasks_per_accept) {
    return absl::InvalidArgumentError(absl::StrCat("accept launches ", req.tasks_size(), " tasks; at most ",
                                                   opts_.max_tasks_per_accept, " per call"));
  }
  if (req.filters().require_attributes_size() > static_cast<int>(kMaxAttributeFilters)) {
    return absl::InvalidArgumentError(absl::StrCat("at most ", kMaxAttributeFilters, " attribute filters"));
  }
  return absl::OkStatus();
}

// The job a framework task runs as: one task, never restarted by the cell
// (the framework decides), labelled with its framework.
v1::JobSpec FrameworkManager::TaskSpec(const Framework& f, const std::string& fid, const v1::FrameworkTask& t) {
  v1::JobSpec spec;
  spec.set_name(JobName(fid, t.task_id()));
  spec.set_user(f.info.user());
  spec.set_priority(f.info.priority());
  spec.set_task_count(1);
  spec.mutable_restart()->set_mode(v1::RestartPolicy::NEVER);
  v1::TaskTemplate* tt = spec.mutable_task();
  *tt->mutable_command() = t.argv();
  *tt->mutable_env() = t.env();
  *tt->mutable_resources() = t.resources();
  auto& labels = *spec.mutable_labels();
  labels[std::string(kFrameworkLabel)] = fid;
  labels[std::string(kFrameworkTaskLabel)] = t.task_id();
  labels[std::string(kFrameworkNameLabel)] = f.info.name();
  labels[std::string(kFrameworkRoleLabel)] = f.info.role();
  labels[std::string(kFrameworkFailoverLabel)] = absl::StrCat(f.info.failover_timeout_ms());
  spec.set_source(absl::StrCat("framework ", fid, " (", f.info.name(), ")"));
  return spec;
}

absl::StatusOr<v1::AcceptResponse> FrameworkManager::Accept(const Principal& who, const v1::AcceptRequest& req) {
  HERD_RETURN_IF_ERROR(CheckAcceptLimits(req));
  const int64_t now = clock_->NowMs();
  absl::MutexLock l(&mu_);
  HERD_ASSIGN_OR_RETURN(Framework * f, Find(who, req.framework_id()));
  const std::string& fid = req.framework_id();
  // The offers: all this framework's, outstanding, on one machine.
  std::string machine;
  ResourceVector offered;
  std::set<std::string> named;
  for (const std::string& oid : req.offer_ids()) {
    if (!named.insert(oid).second) {
      return absl::InvalidArgumentError(absl::StrCat("offer ", oid.substr(0, 64), " is named twice"));
    }
  }
  for (const std::string& oid : req.offer_ids()) {
    auto it = offers_.find(oid);
    if (it == offers_.end() || it->second.framework != fid) {
      // Rescinded, expired or answered: what it named is not held anymore.
      v1::AcceptResponse resp;
      for (const v1::FrameworkTask& t : req.tasks()) {
        v1::FrameworkTaskStatus* st = resp.add_statuses();
        st->set_task_id(t.task_id());
        st->set_state(v1::TASK_ERROR);
        st->set_message(
            absl::StrCat("offer no longer valid: ", oid.substr(0, 64), " was rescinded, has expired or was answered"));
      }
      return resp;
    }
    if (!machine.empty() && it->second.machine != machine) {
      return absl::InvalidArgumentError(
          absl::StrCat("offers of one accept must be on one machine: ", machine, " and ", it->second.machine));
    }
    machine = it->second.machine;
    offered += it->second.resources;
  }
  // The offers are answered: everything offered comes back; what the
  // launched tasks use is counted again below.
  for (const std::string& oid : req.offer_ids()) RescindOffer(oid, /*tell=*/false);
  if (req.has_filters()) {
    int64_t refuse = req.filters().refuse_ms() > 0 ? std::min(req.filters().refuse_ms(), opts_.max_refuse_ms)
                                                   : opts_.default_refuse_ms;
    alloc_.Decline(fid, machine, now + refuse);
    if (!req.filters().require_attributes().empty()) {
      alloc_.RequireAttributes(fid,
                               {req.filters().require_attributes().begin(), req.filters().require_attributes().end()});
    }
  }

  v1::AcceptResponse resp;
  std::vector<v1::JobSpec> specs;
  std::vector<int> spec_of;  // response index -> specs index (-1: refused)
  std::set<std::string> ids;
  ResourceVector asked;
  for (const v1::FrameworkTask& t : req.tasks()) {
    v1::FrameworkTaskStatus* st = resp.add_statuses();
    st->set_task_id(t.task_id());
    st->set_machine(machine);
    absl::Status ok = CheckId("task_id", t.task_id(), kMaxTaskIdLength);
    if (ok.ok() && (f->tasks.contains(t.task_id()) || ids.contains(t.task_id()))) {
      ok = absl::AlreadyExistsError(absl::StrCat("task ", t.task_id(), " is already live"));
    }
    if (ok.ok() && f->tasks.size() + specs.size() >= opts_.max_tasks_per_framework) {
      ok =
          absl::ResourceExhaustedError(absl::StrCat("the framework runs ", f->tasks.size(), " tasks, the most it may"));
    }
    if (ok.ok() && t.argv().empty()) ok = absl::InvalidArgumentError("argv is empty");
    v1::JobSpec spec;
    if (ok.ok()) {
      spec = TaskSpec(*f, fid, t);
      ok = PrepareSpec(ctx_, who, &spec, /*framework_task=*/true);
    }
    if (ok.ok()) {
      ResourceVector r = ResourceVector::FromProto(spec.task().resources());
      if (!(asked + r).FitsIn(offered)) {
        ok = absl::InvalidArgumentError(
            absl::StrCat("the tasks ask for more than the offers hold (", offered.ToString(), ")"));
      } else {
        asked += r;
      }
    }
    if (!ok.ok()) {
      st->set_state(v1::TASK_ERROR);
      st->set_message(std::string(ok.message()));
      spec_of.push_back(-1);
      continue;
    }
    ids.insert(t.task_id());
    st->set_job(JobId(spec.user(), spec.name()));
    spec_of.push_back(static_cast<int>(specs.size()));
    specs.push_back(std::move(spec));
  }

  absl::Status committed = absl::OkStatus();
  if (!specs.empty()) {
    const std::string actor = absl::StrCat("framework:", fid);
    // One mutation submits the jobs and places them (JobsSubmitted.place_on):
    // the cell checks it against the same ledger the built-in scheduler's
    // placements are checked against, all or nothing, without a copy of the
    // state.
    auto build = [&](const cell::CellState& s) -> absl::StatusOr<std::vector<v1::Mutation>> {
      HERD_RETURN_IF_ERROR(CheckQuota(s, specs));
      v1::Mutation submit;
      v1::JobsSubmitted* js = submit.mutable_jobs_submitted();
      for (const v1::JobSpec& spec : specs) *js->add_jobs() = spec;
      js->set_place_on(machine);
      return std::vector<v1::Mutation>{std::move(submit)};
    };
    committed = committer_->Commit(actor, build).status();
  }
  for (int i = 0; i < resp.statuses_size(); ++i) {
    v1::FrameworkTaskStatus* st = resp.mutable_statuses(i);
    if (spec_of[i] < 0) continue;  // refused before the commit: the answer says why
    if (!committed.ok()) {
      st->set_state(v1::TASK_ERROR);
      st->set_message(absl::StrCat("offer no longer valid: ", committed.message()));
      Update(*f, st->task_id(), st->job(), v1::TASK_ERROR, st->message(), machine, 0, now);
      continue;
    }
    const v1::JobSpec& spec = specs[spec_of[i]];
    TaskRec rec;
    rec.job = JobId(spec.user(), spec.name());
    rec.held = ResourceVector::FromProto(spec.task().resources());
    rec.last = v1::TASK_STAGING;
    AddTask(*f, fid, st->task_id(), std::move(rec));
    st->set_state(v1::TASK_STAGING);
    Update(*f, st->task_id(), st->job(), v1::TASK_STAGING, "", machine, 0, now);
  }
  return resp;
}

absl::StatusOr<v1::DeclineResponse> FrameworkManager::Decline(const Principal& who, const v1::DeclineRequest& req) {
  if (static_cast<size_t>(req.offer_ids_size()) > opts_.max_offers_per_call) {
    return absl::InvalidArgumentError(
        absl::StrCat("decline names ", req.offer_ids_size(), " offers; at most ", opts_.max_offers_per_call));
  }
  if (req.filters().require_attributes_size() > static_cast<int>(kMaxAttributeFilters)) {
    return absl::InvalidArgumentError(absl::StrCat("at most ", kMaxAttributeFilters, " attribute filters"));
  }
  const int64_t now = clock_->NowMs();
  absl::MutexLock l(&mu_);
  HERD_ASSIGN_OR_RETURN(Framework * f, Find(who, req.framework_id()));
  (void)f;
  const int64_t refuse = req.filters().refuse_ms() > 0 ? std::min(req.filters().refuse_ms(), opts_.max_refuse_ms)
                                                       : opts_.default_refuse_ms;
  for (const std::string& oid : req.offer_ids()) {
    auto it = offers_.find(oid);
    if (it == offers_.end() || it->second.framework != req.framework_id()) continue;  // gone already: nothing to do
    alloc_.Decline(req.framework_id(), it->second.machine, now + refuse);
    RescindOffer(oid, /*tell=*/false);
  }
  if (!req.filters().require_attributes().empty()) {
    alloc_.RequireAttributes(req.framework_id(),
                             {req.filters().require_attributes().begin(), req.filters().require_attributes().end()});
  }
  return v1::DeclineResponse();
}

absl::Status FrameworkManager::KillJobs(const std::vector<std::string>& jobs, const std::string& reason) {
  if (jobs.empty()) return absl::OkStatus();
  // Each kill stands alone (one that is dead already is no failure): no
  // all-or-nothing check, which would copy the cell state.
  std::vector<v1::Mutation> kills;
  committer_->Read([&](const cell::CellState& s) {
    for (const std::string& id : jobs) {
      const cell::Job* j = s.FindJob(id);
      if (j == nullptr || j->state == v1::Job::DEAD) continue;
      v1::Mutation m;
      m.mutable_job_killed()->set_job(id);
      m.mutable_job_killed()->set_reason(reason);
      kills.push_back(std::move(m));
    }
    return 0;
  });
  if (kills.empty()) return absl::OkStatus();
  const std::vector<v1::Mutation> sent = kills;
  std::vector<absl::Status> st = committer_->CommitEach("frameworks", std::move(kills));
  for (size_t i = 0; i < st.size(); ++i) {
    if (st[i].ok()) continue;
    // Dead meanwhile (it ended, or someone else killed it): done all the same.
    bool dead = committer_->Read([&](const cell::CellState& s) {
      const cell::Job* j = s.FindJob(sent[i].job_killed().job());
      return j == nullptr || j->state == v1::Job::DEAD;
    });
    if (!dead) return st[i];
  }
  return absl::OkStatus();
}

absl::StatusOr<v1::KillTaskResponse> FrameworkManager::KillTask(const Principal& who, const v1::KillTaskRequest& req) {
  absl::MutexLock l(&mu_);
  HERD_ASSIGN_OR_RETURN(Framework * f, Find(who, req.framework_id()));
  auto it = f->tasks.find(req.task_id());
  if (it == f->tasks.end()) {
    if (f->unacked.contains(req.task_id())) return v1::KillTaskResponse();  // ended already: idempotent
    return absl::NotFoundError(absl::StrCat("framework ", req.framework_id(), " has no live task '",
                                            req.task_id().substr(0, kMaxTaskIdLength), "'"));
  }
  HERD_RETURN_IF_ERROR(KillJobs({it->second.job}, absl::StrCat("killed by framework ", req.framework_id())));
  ObserveTasks(clock_->NowMs());  // the KILLED update at once
  return v1::KillTaskResponse();
}

absl::StatusOr<v1::AcknowledgeResponse> FrameworkManager::Acknowledge(const Principal& who,
                                                                      const v1::AcknowledgeRequest& req) {
  absl::MutexLock l(&mu_);
  HERD_ASSIGN_OR_RETURN(Framework * f, Find(who, req.framework_id()));
  auto it = f->unacked.find(req.task_id());
  // An older update's acknowledgement, or a repeated one: nothing to do
  // (the latest is sent again until it is acknowledged).
  if (it != f->unacked.end() && it->second.first.uuid() == req.uuid()) f->unacked.erase(it);
  return v1::AcknowledgeResponse();
}

absl::StatusOr<v1::ReconcileResponse> FrameworkManager::Reconcile(const Principal& who,
                                                                  const v1::ReconcileRequest& req) {
  if (req.task_ids_size() > 100'000) return absl::InvalidArgumentError("reconcile names more than 100000 tasks");
  absl::MutexLock l(&mu_);
  HERD_ASSIGN_OR_RETURN(Framework * f, Find(who, req.framework_id()));
  ObserveTasks(clock_->NowMs());
  v1::ReconcileResponse resp;
  auto status_of = [&](const std::string& task) {
    v1::FrameworkTaskStatus st;
    st.set_task_id(task);
    if (auto it = f->tasks.find(task); it != f->tasks.end()) {
      st.set_job(it->second.job);
      st.set_state(it->second.last);
      committer_->Read([&](const cell::CellState& s) {
        Observed o = Observe(s.FindJob(it->second.job));
        st.set_machine(o.machine);
        st.set_message(o.message);
        return 0;
      });
    } else if (auto u = f->unacked.find(task); u != f->unacked.end()) {
      st = u->second.first;
      st.clear_uuid();
    } else {
      st.set_state(v1::TASK_LOST);
      st.set_message("unknown task (ended and acknowledged, or never launched)");
    }
    *resp.add_statuses() = std::move(st);
  };
  if (req.task_ids().empty()) {
    std::set<std::string> all;
    for (const auto& [t, rec] : f->tasks) all.insert(t);
    for (const auto& [t, u] : f->unacked) all.insert(t);
    for (const std::string& t : all) status_of(t);
  } else {
    for (const std::string& t : req.task_ids()) status_of(t);
  }
  return resp;
}

void FrameworkManager::Remove(const std::string& framework_id, const std::string& why) {
  auto it = fws_.find(framework_id);
  if (it == fws_.end()) return;
  std::vector<std::string> jobs;
  for (const auto& [t, rec] : it->second.tasks) jobs.push_back(rec.job);
  if (absl::Status st = KillJobs(jobs, why); !st.ok()) {
    HERD_LOG_WARN("framework {}: killing its {} tasks: {} (tried again next round)", framework_id, jobs.size(),
                  st.ToString());
    return;
  }
  for (const auto& [t, rec] : it->second.tasks) by_job_.erase(rec.job);
  RescindAll(framework_id, /*tell=*/true);
  if (it->second.events) {
    v1::FrameworkEvent e;
    e.mutable_error()->set_message(why);  // the framework learns why its stream ends
    it->second.events->Push(std::move(e));
    it->second.events->Close(why);
  }
  alloc_.RemoveFramework(framework_id);
  HERD_LOG_INFO("framework {} ({}) removed, {} tasks killed: {}", framework_id, it->second.info.name(), jobs.size(),
                why);
  fws_.erase(it);
}

absl::StatusOr<v1::TeardownResponse> FrameworkManager::Teardown(const Principal& who, const v1::TeardownRequest& req) {
  absl::MutexLock l(&mu_);
  HERD_ASSIGN_OR_RETURN(Framework * f, Find(who, req.framework_id()));
  (void)f;
  Remove(req.framework_id(), absl::StrCat("framework torn down by ", who.name));
  if (fws_.contains(req.framework_id())) return absl::UnavailableError("could not kill its tasks; try again");
  return v1::TeardownResponse();
}

absl::StatusOr<v1::ListFrameworksResponse> FrameworkManager::ListFrameworks(const Principal& who,
                                                                            const v1::ListFrameworksRequest&) {
  ResourceVector total;
  committer_->Read([&](const cell::CellState& s) {
    for (const cell::Machine* m : s.machines()) {
      if (m->state() == v1::Machine::UP) total += m->capacity();
    }
    return 0;
  });
  v1::ListFrameworksResponse resp;
  total.ToProto(resp.mutable_total());
  absl::MutexLock l(&mu_);
  std::map<std::string, int32_t> offers;
  std::map<std::string, ResourceVector> offered;
  for (const auto& [id, o] : offers_) {
    ++offers[o.framework];
    offered[o.framework] += o.resources;
  }
  for (const auto& [id, f] : fws_) {
    if (!MayAct(who, f.info.user()).ok()) continue;
    v1::FrameworkSummary* out = resp.add_frameworks();
    *out->mutable_info() = f.info;
    out->set_connected(f.events != nullptr);
    out->set_disconnected_ms(f.events ? 0 : f.disconnected_ms);
    out->set_tasks(static_cast<int32_t>(f.tasks.size()));
    ResourceVector held;
    for (const auto& [task, rec] : f.tasks) held += rec.held;
    held.ToProto(out->mutable_used());
    offered[id].ToProto(out->mutable_offered());
    // Which dimension is dominant, and its share (unweighted).
    double best = 0;
    std::string dim;
    auto consider = [&](const char* name, int64_t have, int64_t all) {
      if (all <= 0) return;
      const double share = static_cast<double>(have) / static_cast<double>(all);
      if (share > best || dim.empty()) best = share, dim = name;
    };
    consider("cpu", held.cpu_millis, total.cpu_millis);
    consider("memory", held.memory_bytes, total.memory_bytes);
    consider("disk", held.disk_bytes, total.disk_bytes);
    for (const auto& [name, all] : total.extended) consider(name.c_str(), held.Extended(name), all);
    out->set_dominant_share(best);
    out->set_dominant_resource(dim);
    out->set_outstanding_offers(offers[id]);
    out->set_role_weight(alloc_.Weight(f.info.role().empty() ? "*" : f.info.role()));
  }
  return resp;
}

void FrameworkManager::AddTask(Framework& f, const std::string& framework_id, const std::string& task_id, TaskRec rec) {
  alloc_.Allocate(framework_id, rec.held);
  by_job_[rec.job] = {framework_id, task_id};
  f.tasks.insert_or_assign(task_id, std::move(rec));
}

void FrameworkManager::ObserveTasks(int64_t now, const std::set<std::string>* jobs) {
  std::vector<std::string> lost_jobs;
  // One task: an update if its status moved; forgotten once terminal.
  auto observe = [&](const cell::CellState& s, const std::string& fid, Framework& f,
                     std::map<std::string, TaskRec>::iterator it) {
    TaskRec& rec = it->second;
    const cell::Job* job = s.FindJob(rec.job);
    Observed o = Observe(job);
    if (rec.killing && o.state == v1::TASK_KILLED) o.state = v1::TASK_LOST;  // we killed it for being lost
    if (o.state == rec.last) return std::next(it);
    if (o.state == v1::TASK_LOST && !rec.killing && job != nullptr) {
      // Back to pending: the built-in scheduler will not place it again,
      // and retrying is the framework's call. Kill the job.
      rec.killing = true;
      lost_jobs.push_back(rec.job);
    }
    rec.last = o.state;
    Update(f, it->first, rec.job, o.state, o.message, o.machine, o.exit_code, now);
    if (!Terminal(o.state)) return std::next(it);
    alloc_.Recover(fid, rec.held);
    freed_ = true;
    by_job_.erase(rec.job);
    return f.tasks.erase(it);
  };
  committer_->Read([&](const cell::CellState& s) {
    if (jobs == nullptr) {
      for (auto& [fid, f] : fws_) {
        for (auto it = f.tasks.begin(); it != f.tasks.end();) it = observe(s, fid, f, it);
      }
      return 0;
    }
    for (const std::string& job : *jobs) {
      auto ix = by_job_.find(job);
      if (ix == by_job_.end()) continue;  // not a live framework task
      const auto [fid, task] = ix->second;
      auto f = fws_.find(fid);
      if (f == fws_.end()) continue;
      auto it = f->second.tasks.find(task);
      if (it != f->second.tasks.end()) observe(s, fid, f->second, it);
    }
    return 0;
  });
  if (absl::Status st = KillJobs(lost_jobs, "lost; its framework decides whether to run it again"); !st.ok()) {
    HERD_LOG_WARN("frameworks: killing {} lost tasks' jobs: {}", lost_jobs.size(), st.ToString());
  }
}

void FrameworkManager::AllocationRound(int64_t now) {
  std::vector<MachineSlack> slack;
  ResourceVector total;
  std::map<std::string, ResourceVector> offered;
  for (const auto& [id, o] : offers_) offered[o.machine] += o.resources;
  committer_->Read([&](const cell::CellState& s) {
    for (const cell::Machine* m : s.machines()) {
      if (m->state() != v1::Machine::UP) continue;
      total += m->capacity();
      if (m->drained()) continue;
      ResourceVector free = m->capacity() - m->allocated();
      if (auto it = offered.find(m->name()); it != offered.end()) free -= it->second;
      if (free.AnyNegative()) continue;
      MachineSlack ms;
      ms.machine = m->name();
      ms.free = free;
      for (const auto& [k, v] : m->attributes()) ms.attributes.emplace(k, v);
      slack.push_back(std::move(ms));
    }
    return 0;
  });
  std::map<std::string, v1::FrameworkEvent> events;
  std::map<std::string, const MachineSlack*> by_name;
  for (const MachineSlack& m : slack) by_name[m.machine] = &m;
  for (Offer& o : alloc_.Round(slack, total, now)) {
    auto f = fws_.find(o.framework);
    if (f == fws_.end() || !f->second.events) {
      alloc_.Recover(o.framework, o.resources);
      continue;
    }
    std::string id = NewId(16);
    v1::ResourceOffer* ro = events[o.framework].mutable_offers()->add_offers();
    ro->set_id(id);
    ro->set_framework_id(o.framework);
    ro->set_machine(o.machine);
    o.resources.ToProto(ro->mutable_resources());
    if (const MachineSlack* m = by_name[o.machine]) {
      for (const auto& [k, v] : m->attributes) (*ro->mutable_attributes())[k] = v;
    }
    offers_[id] = OfferRec{o.framework, o.machine, o.resources, now + opts_.offer_timeout_ms};
  }
  for (auto& [fid, e] : events) Send(fws_[fid], std::move(e));
}

void FrameworkManager::Tick() { Step(nullptr); }

bool FrameworkManager::Step(const std::set<std::string>* jobs) {
  const int64_t now = clock_->NowMs();
  absl::MutexLock l(&mu_);
  // Every task is looked at before each allocation round, whatever the
  // feed said (a safety net that costs one pass a round).
  ObserveTasks(now, now >= next_round_ms_ ? nullptr : jobs);
  const bool round = now >= next_round_ms_ || (freed_ && now - last_round_ms_ >= opts_.min_round_gap_ms);
  // Offers past their timeout.
  std::vector<std::string> expired;
  for (const auto& [id, o] : offers_) {
    if (o.expires_ms <= now) expired.push_back(id);
  }
  for (const std::string& id : expired) RescindOffer(id, /*tell=*/true);
  // Streams that were cut (they fell behind): disconnected now.
  std::vector<std::string> gone;
  for (auto& [fid, f] : fws_) {
    if (f.events && f.events->closed()) {
      f.events.reset();
      f.disconnected_ms = now;
      alloc_.SetActive(fid, false);
      RescindAll(fid, /*tell=*/false);
    }
    if (!f.events && f.disconnected_ms > 0 && now - f.disconnected_ms >= f.info.failover_timeout_ms()) {
      gone.push_back(fid);
    }
  }
  for (const std::string& fid : gone) {
    Remove(fid, absl::StrCat("framework did not subscribe again within its failover timeout"));
  }
  // Unacknowledged updates again; heartbeats.
  for (auto& [fid, f] : fws_) {
    if (!f.events) continue;
    for (auto& [task, pending] : f.unacked) {
      if (now - pending.second < opts_.resend_ms) continue;
      v1::FrameworkEvent u;
      *u.mutable_update()->mutable_status() = pending.first;
      f.events->Push(std::move(u));
      pending.second = now;
    }
    if (now - f.last_heartbeat_ms >= opts_.heartbeat_ms) {
      v1::FrameworkEvent hb;
      hb.mutable_heartbeat();
      f.events->Push(std::move(hb));
      f.last_heartbeat_ms = now;
    }
  }
  if (round) {
    AllocationRound(now);
    next_round_ms_ = now + opts_.offer_interval_ms;
    last_round_ms_ = now;
    freed_ = false;
  }
  return freed_;
}

size_t FrameworkManager::frameworks() const {
  absl::MutexLock l(&mu_);
  return fws_.size();
}

size_t FrameworkManager::outstanding_offers() const {
  absl::MutexLock l(&mu_);
  return offers_.size();
}

ResourceVector FrameworkManager::Held(const std::string& framework_id) const {
  absl::MutexLock l(&mu_);
  return alloc_.Held(framework_id);
}

bool FrameworkManager::connected(const std::string& framework_id) const {
  absl::MutexLock l(&mu_);
  auto it = fws_.find(framework_id);
  return it != fws_.end() && it->second.events != nullptr;
}

}  // namespace herd::master::frameworks
