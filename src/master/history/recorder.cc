#include "master/history/recorder.h"

#include <algorithm>
#include <chrono>

#include "absl/strings/str_cat.h"
#include "base/exhaustive.h"
#include "base/ids.h"
#include "base/log.h"
#include "cell/batch.h"
#include "google/protobuf/util/json_util.h"
#include "master/core/committer.h"
#include "store/log_store.h"

namespace herd::master::history {
namespace {

constexpr int64_t kMaintainEveryMs = 10 * 60 * 1000;
constexpr size_t kFetchMax = 2000;
constexpr int64_t kFetchWaitMs = 500;

std::string UserOf(absl::string_view job) {
  const size_t slash = job.find('/');
  return std::string(slash == absl::string_view::npos ? absl::string_view() : job.substr(0, slash));
}

// The spec as JSON, with env values hidden: the history is readable by
// every user of the cell, and env is where users put their secrets.
std::string SpecJson(v1::JobSpec spec) {
  for (auto& [k, v] : *spec.mutable_task()->mutable_env()) v = "(hidden)";
  for (v1::TaskOverride& o : *spec.mutable_overrides()) {
    for (auto& [k, v] : *o.mutable_env()) v = "(hidden)";
  }
  std::string json;
  google::protobuf::util::JsonPrintOptions opts;
  opts.preserve_proto_field_names = true;
  (void)google::protobuf::util::MessageToJsonString(spec, &json, opts);
  return json;
}

}  // namespace

void EventMapper::Seed(const cell::CellState& state) {
  for (const auto& [id, job] : state.jobs()) {
    versions_[id] = job->version;
    if (job->scheduled()) schedules_[id] = job->spec;
    for (const cell::Task& t : job->tasks) {
      TaskInfo& info = Info(id, t.index());
      info.machine = t.machine() != nullptr ? t.machine()->name() : t.last_machine();
      info.incarnation = t.incarnation();
    }
  }
}

EventMapper::TaskInfo& EventMapper::Info(const std::string& job, int32_t index) {
  std::vector<TaskInfo>& tasks = tasks_[job];
  // Indexes are below the job's task count (at most 100,000); a larger one
  // shares the last slot rather than growing the master.
  const size_t i = std::min<size_t>(static_cast<size_t>(std::max(index, 0)), kMaxIndex);
  if (tasks.size() <= i) tasks.resize(i + 1);
  return tasks[i];
}

TaskEventRow EventMapper::Row(const v1::Mutation& m, const std::string& job, int32_t index, const char* event) {
  TaskEventRow r;
  r.revision = m.revision();
  r.time_ms = m.time_ms();
  r.job = job;
  r.user = UserOf(job);
  r.task_index = index;
  r.event = event;
  r.actor = m.actor();
  auto it = tasks_.find(job);
  if (it != tasks_.end() && index >= 0 && static_cast<size_t>(index) < it->second.size()) {
    r.machine = it->second[index].machine;
    r.incarnation = it->second[index].incarnation;
  }
  return r;
}

JobRow* EventMapper::AddJobRow(const v1::Mutation& m, Batch* out, const std::string& job, const char* event,
                               int64_t version, std::string reason) {
  JobRow j;
  j.revision = m.revision();
  j.time_ms = m.time_ms();
  j.job = job;
  j.user = UserOf(job);
  j.version = version;
  j.event = event;
  j.actor = m.actor();
  j.reason = std::move(reason);
  out->jobs.push_back(std::move(j));
  return &out->jobs.back();
}

int64_t EventMapper::VersionOf(const std::string& job) const {
  auto v = versions_.find(job);
  return v == versions_.end() ? 0 : v->second;
}

// Events of a run: the ref names its incarnation.
TaskEventRow& EventMapper::AddRunRow(const v1::Mutation& m, Batch* out, const v1::TaskRef& ref, const char* event) {
  TaskInfo& info = Info(ref.job(), ref.index());
  info.incarnation = ref.incarnation();
  out->task_events.push_back(Row(m, ref.job(), ref.index(), event));
  return out->task_events.back();
}

// A task placed on `machine`: a new incarnation.
void EventMapper::AddPlaced(const v1::Mutation& m, Batch* out, const std::string& job, int32_t index,
                            const std::string& machine) {
  TaskInfo& info = Info(job, index);
  info.machine = machine;
  ++info.incarnation;
  TaskEventRow r = Row(m, job, index, "scheduled");
  r.phase = "ASSIGNED";
  out->task_events.push_back(std::move(r));
}

void EventMapper::Add(const v1::Mutation& m, Batch* out) {
  HERD_EXHAUSTIVE_BEGIN
  switch (m.kind_case()) {
    case v1::Mutation::kJobsSubmitted:
      return JobsSubmitted(m, out);
    case v1::Mutation::kJobReleased: {
      const v1::JobReleased& r = m.job_released();
      AddJobRow(m, out, r.job(), r.failed().empty() ? "released" : "dependency failed", VersionOf(r.job()),
                r.failed().empty() ? "" : absl::StrCat(r.failed(), ": ", r.reason()));
      return;
    }
    case v1::Mutation::kScheduleTriggered:
      return ScheduleTriggered(m, out);
    case v1::Mutation::kJobUpdated:
      return JobUpdated(m, out);
    case v1::Mutation::kTasksUpdated: {
      // A step of a rolling update.
      const v1::TasksUpdated& u = m.tasks_updated();
      const std::string reason = absl::StrCat("rolling update to version ", u.version());
      for (int32_t i : u.restart()) out->task_events.emplace_back(Row(m, u.job(), i, "restarted")).reason = reason;
      for (int32_t i : u.reschedule()) out->task_events.emplace_back(Row(m, u.job(), i, "moved")).reason = reason;
      return;
    }
    case v1::Mutation::kRolloutChanged: {
      const v1::RolloutChanged& r = m.rollout_changed();
      std::string reason = absl::StrCat("rollout ", v1::Rollout::State_Name(r.state()));
      if (r.promote()) absl::StrAppend(&reason, " (canaries promoted)");
      if (!r.message().empty()) absl::StrAppend(&reason, ": ", r.message());
      AddJobRow(m, out, r.job(), "rollout", r.version(), std::move(reason));
      return;
    }
    case v1::Mutation::kJobKilled:
      AddJobRow(m, out, m.job_killed().job(), "killed", VersionOf(m.job_killed().job()), m.job_killed().reason());
      return;
    case v1::Mutation::kTaskScheduled: {
      const v1::TaskScheduled& s = m.task_scheduled();
      for (const v1::TaskRef& victim : s.victims()) {
        AddRunRow(m, out, victim, "preempted").reason = absl::StrCat("preempted by ", s.job(), "/", s.index());
      }
      AddPlaced(m, out, s.job(), s.index(), s.machine());
      return;
    }
    case v1::Mutation::kTaskObserved:
      return TaskObserved(m, out);
    case v1::Mutation::kTaskExited:
      return TaskExited(m, out);
    case v1::Mutation::kTaskLost:
      AddRunRow(m, out, m.task_lost().task(), "lost").reason = m.task_lost().reason();
      return;
    case v1::Mutation::kTaskRescheduled:
      AddRunRow(m, out, m.task_rescheduled().task(), "rescheduled").reason = m.task_rescheduled().reason();
      return;
    case v1::Mutation::kMachineRegistered:
    case v1::Mutation::kMachineDown:
    case v1::Mutation::kMachineUp:
    case v1::Mutation::kMachineDrained:
      out->machine_events.push_back(MachineEvent(m));
      return;
    // Kinds the history does not record (no task, job or machine event).
    case v1::Mutation::kQuotaSet:
    case v1::Mutation::kReservationsSet:
    case v1::Mutation::kMachinePackages:
    case v1::Mutation::kUserSet:
    case v1::Mutation::kJoinTokenSet:
    case v1::Mutation::kMachineInterference:
    case v1::Mutation::KIND_NOT_SET:
      return;
  }
  HERD_EXHAUSTIVE_END
}

void EventMapper::JobsSubmitted(const v1::Mutation& m, Batch* out) {
  for (const v1::JobSpec& spec : m.jobs_submitted().jobs()) {
    const std::string id = JobId(spec.user(), spec.name());
    versions_[id] = 1;
    tasks_.erase(id);  // a dead job submitted again starts afresh
    if (!spec.schedule().empty()) schedules_[id] = spec;
    AddJobRow(m, out, id, "submitted", 1, "")->spec_json = SpecJson(spec);
    if (m.jobs_submitted().place_on().empty()) continue;
    // Submitted and placed in one step (a framework's accept).
    for (int32_t i = 0; i < spec.task_count(); ++i) AddPlaced(m, out, id, i, m.jobs_submitted().place_on());
  }
}

void EventMapper::ScheduleTriggered(const v1::Mutation& m, Batch* out) {
  const v1::ScheduleTriggered& t = m.schedule_triggered();
  if (!t.skipped().empty()) {
    AddJobRow(m, out, t.job(), "run skipped", VersionOf(t.job()), t.skipped());
    return;
  }
  for (const std::string& r : t.replace()) {
    AddJobRow(m, out, r, "killed", VersionOf(r), absl::StrCat("replaced by ", t.run()));
  }
  versions_[t.run()] = 1;
  tasks_.erase(t.run());
  JobRow* row = AddJobRow(m, out, t.run(), "submitted", 1, absl::StrCat("a run of ", t.job()));
  if (auto s = schedules_.find(t.job()); s != schedules_.end()) {
    row->spec_json = SpecJson(cell::RunSpec(s->second, t.due_ms()));
  }
}

void EventMapper::JobUpdated(const v1::Mutation& m, Batch* out) {
  const v1::JobUpdated& u = m.job_updated();
  const std::string id = JobId(u.spec().user(), u.spec().name());
  int64_t& version = versions_[id];
  version = u.expect_version() > 0 ? u.expect_version() + 1 : version + 1;
  if (!u.spec().schedule().empty()) schedules_[id] = u.spec();
  AddJobRow(m, out, id, u.rollback() ? "rolled back" : "updated", version, u.reason())->spec_json = SpecJson(u.spec());
  for (int32_t i : u.restart()) out->task_events.emplace_back(Row(m, id, i, "restarted")).reason = u.reason();
  for (int32_t i : u.reschedule()) out->task_events.emplace_back(Row(m, id, i, "moved")).reason = u.reason();
}

void EventMapper::TaskObserved(const v1::Mutation& m, Batch* out) {
  const v1::TaskObserved& o = m.task_observed();
  TaskEventRow& r = AddRunRow(m, out, o.task(), "observed");
  r.phase = v1::Task::Phase_Name(o.phase());
  r.health = o.health();
  r.restarts = o.restarts();
  r.exit_code = o.exit_code();
  r.exit_signal = o.exit_signal();
  r.oom_killed = o.oom_killed();
  r.reason = o.message();
}

void EventMapper::TaskExited(const v1::Mutation& m, Batch* out) {
  const v1::TaskExited& e = m.task_exited();
  TaskEventRow& r = AddRunRow(m, out, e.task(), "exited");
  r.phase = e.exit_code() == 0 && e.exit_signal() == 0 ? "FINISHED" : "FAILED";
  r.restarts = e.restarts();
  r.exit_code = e.exit_code();
  r.exit_signal = e.exit_signal();
  r.oom_killed = e.oom_killed();
  r.reason = e.reason();
}

MachineEventRow EventMapper::MachineEvent(const v1::Mutation& m) {
  MachineEventRow r;
  r.revision = m.revision();
  r.time_ms = m.time_ms();
  if (m.has_machine_registered()) {
    r.machine = m.machine_registered().machine().name();
    r.event = "registered";
    r.reason = m.machine_registered().machine().address();
  } else if (m.has_machine_down()) {
    r.machine = m.machine_down().name();
    r.event = "down";
    r.reason = m.machine_down().reason();
  } else if (m.has_machine_up()) {
    r.machine = m.machine_up().name();
    r.event = "up";
    r.reason = m.machine_up().reason();
  } else {
    r.machine = m.machine_drained().name();
    r.event = m.machine_drained().drained() ? "drained" : "undrained";
    r.reason = m.machine_drained().reason();
  }
  return r;
}

void UsageAccumulator::Sum::Add(const v1::Usage& u) {
  cpu += static_cast<double>(u.cpu_millis());
  const int64_t mem = u.memory_working_set_bytes() > 0 ? u.memory_working_set_bytes() : u.memory_rss_bytes();
  memory += static_cast<double>(mem);
  cpu_max = std::max(cpu_max, u.cpu_millis());
  memory_max = std::max(memory_max, mem);
  disk = u.disk_bytes();
  ++samples;
}

void UsageAccumulator::Add(const std::string& machine, const v1::PollResponse& reply) {
  absl::MutexLock l(&mu_);
  if (reply.has_machine_usage() && reply.machine_usage().sampled_ms() > 0) {
    Sum& s = machines_[machine];
    s.machine = machine;
    s.Add(reply.machine_usage());
  }
  for (const v1::RunStatus& r : reply.runs()) {
    if (!r.has_usage() || r.usage().sampled_ms() == 0 || r.terminal()) continue;
    auto key = std::make_pair(r.ref().job(), r.ref().index());
    auto it = tasks_.find(key);
    if (it == tasks_.end()) {
      if (tasks_.size() >= max_tasks_) {
        dropped_.fetch_add(1, std::memory_order_relaxed);
        continue;
      }
      it = tasks_.emplace(std::move(key), Sum{}).first;
    }
    it->second.machine = machine;
    it->second.Add(r.usage());
  }
}

void UsageAccumulator::Flush(int64_t start_ms, int64_t period_ms, Batch* out) {
  absl::flat_hash_map<std::pair<std::string, int32_t>, Sum> tasks;
  absl::flat_hash_map<std::string, Sum> machines;
  {
    absl::MutexLock l(&mu_);
    tasks.swap(tasks_);
    machines.swap(machines_);
  }
  auto row = [&](const Sum& s) {
    UsageRow u;
    u.time_ms = start_ms;
    u.period_ms = period_ms;
    u.machine = s.machine;
    u.cpu_millis = s.cpu / s.samples;
    u.cpu_millis_max = s.cpu_max;
    u.memory_bytes = s.memory / s.samples;
    u.memory_bytes_max = s.memory_max;
    u.disk_bytes = s.disk;
    u.samples = s.samples;
    return u;
  };
  for (const auto& [key, s] : tasks) {
    UsageRow u = row(s);
    u.job = key.first;
    u.user = UserOf(key.first);
    u.task_index = key.second;
    out->usage.push_back(std::move(u));
  }
  for (const auto& [name, s] : machines) out->machine_usage.push_back(row(s));
}

Recorder::Recorder(HistoryDb* db, Clock* clock) : db_(db), clock_(clock) {}

Recorder::~Recorder() { Stop(); }

void Recorder::Start(Committer* committer, store::LogStore* store) {
  committer_ = committer;
  store_ = store;
  {
    absl::MutexLock l(&mu_);
    period_start_ms_ = clock_->NowMs();
    stats_.recorded_revision = db_->recorded_revision();
  }
  thread_ = std::thread([this] { Loop(); });
}

void Recorder::Stop() {
  {
    absl::MutexLock l(&mu_);
    if (stopping_ || !thread_.joinable()) return;
    stopping_ = true;
  }
  thread_.join();
}

bool Recorder::WaitRecorded(int64_t revision, absl::Duration timeout) {
  absl::MutexLock l(&mu_);
  auto done = [&]() { return stats_.recorded_revision >= revision || stopping_; };
  mu_.AwaitWithTimeout(absl::Condition(&done), timeout);
  return stats_.recorded_revision >= revision;
}

void Recorder::FlushUsage() {
  absl::MutexLock l(&mu_);
  if (!thread_.joinable()) return;
  flush_wanted_ = true;
  auto done = [&]() { return !flush_wanted_ || stopping_; };
  mu_.Await(absl::Condition(&done));
}

Recorder::Stats Recorder::stats() const {
  absl::MutexLock l(&mu_);
  Stats s = stats_;
  s.dropped_samples = usage_.dropped();
  return s;
}

absl::Status Recorder::Fetch(int64_t after, std::vector<v1::Mutation>* out) {
  absl::StatusOr<std::vector<v1::Mutation>> feed = committer_->WaitForMutations(after, kFetchWaitMs, kFetchMax);
  if (feed.ok()) {
    *out = std::move(*feed);
    return absl::OkStatus();
  }
  if (feed.status().code() != absl::StatusCode::kOutOfRange || store_ == nullptr) return feed.status();
  // Behind the in-memory feed (a master that was down a while): the store.
  const int64_t to = std::min(committer_->FeedStart() - 1, after + static_cast<int64_t>(kFetchMax));
  return store_->ReadLog(after + 1, to, [&](const v1::Mutation& m) {
    out->push_back(m);
    return absl::OkStatus();
  });
}

void Recorder::WriteBatch(Batch& batch) {
  if (batch.empty()) return;
  const size_t rows = batch.jobs.size() + batch.task_events.size() + batch.machine_events.size() + batch.usage.size() +
                      batch.machine_usage.size();
  absl::Status st = db_->Write(batch);
  absl::MutexLock l(&mu_);
  if (!st.ok()) {
    ++stats_.errors;
    HERD_LOG_WARN("history: {}", st.ToString());
    return;
  }
  stats_.rows += static_cast<int64_t>(rows);
  if (batch.revision > 0) stats_.recorded_revision = batch.revision;
  batch = Batch{};
}

void Recorder::Loop() {
  int64_t after = db_->recorded_revision();
  committer_->Read([&](const cell::CellState& s) {
    mapper_.Seed(s);
    if (after > s.revision()) {
      // A history of another (or a restored) cell: go on from here.
      HERD_LOG_WARN("history: recorded up to revision {}, but the cell is at {}; recording from there", after,
                    s.revision());
      after = s.revision();
    }
    return 0;
  });
  if (after == 0 && store_ != nullptr) {
    absl::StatusOr<int64_t> first = store_->FirstRevision();
    if (first.ok()) after = *first;
  }
  int64_t last_maintained = 0;
  Batch batch;
  while (true) {
    bool flush = false;
    {
      absl::MutexLock l(&mu_);
      if (stopping_) break;
      flush = flush_wanted_;
    }
    std::vector<v1::Mutation> muts;
    absl::Status st = Fetch(after, &muts);
    const auto busy_start = std::chrono::steady_clock::now();
    if (!st.ok()) {
      HERD_LOG_WARN("history: reading the cell's log after {}: {}", after, st.ToString());
      if (store_ != nullptr) {
        // Compacted away (a history that fell far behind): skip the gap.
        absl::StatusOr<int64_t> first = store_->FirstRevision();
        if (first.ok() && *first > after) after = *first;
      }
    }
    for (const v1::Mutation& m : muts) {
      if (m.revision() <= after) continue;
      mapper_.Add(m, &batch);
      after = m.revision();
      batch.revision = after;
    }
    const int64_t now = clock_->NowMs();
    int64_t period_start;
    {
      absl::MutexLock l(&mu_);
      period_start = period_start_ms_;
    }
    if (flush || now - period_start >= db_->options().sample_interval_ms) {
      usage_.Flush(period_start, std::max<int64_t>(1, now - period_start), &batch);
      absl::MutexLock l(&mu_);
      period_start_ms_ = now;
    }
    const int64_t mutations = static_cast<int64_t>(muts.size());
    WriteBatch(batch);
    if (now - last_maintained >= kMaintainEveryMs) {
      if (absl::Status mst = db_->Maintain(now); !mst.ok()) HERD_LOG_WARN("history: maintenance: {}", mst.ToString());
      last_maintained = now;
    }
    const double busy = std::chrono::duration<double>(std::chrono::steady_clock::now() - busy_start).count();
    absl::MutexLock l(&mu_);
    stats_.mutations += mutations;
    stats_.busy_seconds += busy;
    if (flush) flush_wanted_ = false;
  }
}

}  // namespace herd::master::history
