// CellState: the whole state of a cell -- jobs, tasks, machines, quotas --
// changed only by applying mutations in order (docs/design.md §3).
//
// Apply() is deterministic and does no I/O: it reads only the state and the
// mutation (times come inside the mutation), so the live master, recovery
// (snapshot + log replay), the scheduler's cached copy and the simulator all
// run this same code and reach the same state. Every applied mutation bumps
// the revision. Task and job states follow the Borg paper's Figure 2; every
// transition records an Event with its reason.
//
// Thread-safety: none. The master guards its CellState with a mutex; the
// scheduler owns its own copy.
#pragma once

#include <cstdint>
#include <climits>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/btree_map.h"
#include "absl/container/btree_set.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "base/priority.h"
#include "base/resources.h"
#include "herd/v1/mutation.pb.h"
#include "herd/v1/objects.pb.h"

namespace herd::cell {

struct Job;
class Machine;
class Task;

// One event of a task's or job's life (compact form of v1::Event).
struct EventRec {
  v1::Event::Transition transition = v1::Event::TRANSITION_UNSPECIFIED;
  int64_t time_ms = 0;
  int64_t revision = 0;
  std::string reason;
  std::string machine;
  void ToProto(v1::Event* out) const;
};

// One task of a job. Its fields are CellState's to change (mutations only);
// everyone else reads them through these accessors.
class Task {
 public:
  const Job* job() const { return job_; }
  int32_t index() const { return index_; }
  v1::Task::State state() const { return state_; }
  v1::Task::Phase phase() const { return phase_; }
  const ResourceVector& resources() const { return resources_; }  // limits after overrides
  const Machine* machine() const { return machine_; }             // while RUNNING
  // Where it ran last (for logs), kept after it leaves.
  const std::string& last_machine() const { return last_machine_; }
  int64_t incarnation() const { return incarnation_; }
  int32_t restarts() const { return restarts_; }
  int32_t exit_code() const { return exit_code_; }
  int32_t exit_signal() const { return exit_signal_; }
  int64_t pid() const { return pid_; }
  int64_t started_ms() const { return started_ms_; }
  int64_t state_revision() const { return state_revision_; }
  const std::string& message() const { return message_; }
  // Newest last; at most kHistory.
  const absl::InlinedVector<EventRec, 1>& history() const { return history_; }
  static constexpr size_t kHistory = 4;
  // Machines not to place this task on again before the given time.
  const std::vector<std::pair<std::string, int64_t>>& avoid() const { return avoid_; }

  // What the agent reported beyond the phase: allocated ports and the health
  // check's verdict. Absent for most tasks (a pointer keeps a million tasks
  // small); cleared when the task leaves its machine.
  struct AgentInfo {
    std::map<std::string, int32_t> ports;
    std::string health;
  };
  const AgentInfo* agent_info() const { return agent_info_.get(); }

  int32_t priority() const { return priority_; }  // the job's, cached (read on every scheduler hot path)
  // The master's estimate of what the task really uses. Non-production work
  // is scheduled against others' reservations, production against limits.
  // Equal to the limit until the reclamation issue estimates it.
  const ResourceVector& reservation() const { return reservation_ ? *reservation_ : resources_; }
  bool AvoidsMachine(absl::string_view machine, int64_t now_ms) const;
  const EventRec* last_event() const { return history_.empty() ? nullptr : &history_.back(); }
  // The job version whose spec it runs; below the job's while an update has
  // not reached it yet (a rolling update holds it back).
  int64_t job_version() const { return job_version_; }
  bool outdated() const;
  // A task of a job that runs in an alloc set (JobSpec.alloc): it is placed
  // in its alloc (the alloc set's task of the same index), on that alloc's
  // machine; its limits count against the alloc, not the machine.
  bool in_alloc() const;
  // A task of an alloc set: an alloc.
  bool is_alloc() const;
  v1::Task ToProto() const;

 private:
  friend class CellState;
  template <typename PortMap>
  void SetAgentInfo(const PortMap& ports, const std::string& health) {
    if (ports.empty() && health.empty()) {
      agent_info_.reset();
      return;
    }
    if (!agent_info_) agent_info_ = std::make_unique<AgentInfo>();
    agent_info_->ports = std::map<std::string, int32_t>(ports.begin(), ports.end());
    agent_info_->health = health;
  }

  Job* job_ = nullptr;
  int32_t index_ = 0;
  v1::Task::State state_ = v1::Task::PENDING;
  v1::Task::Phase phase_ = v1::Task::PHASE_UNSPECIFIED;
  ResourceVector resources_;
  Machine* machine_ = nullptr;
  std::string last_machine_;
  int64_t incarnation_ = 0;
  int32_t restarts_ = 0;
  int32_t exit_code_ = 0;
  int32_t exit_signal_ = 0;
  int64_t pid_ = 0;
  int64_t started_ms_ = 0;
  int64_t state_revision_ = 0;
  std::string message_;
  // Inline: one event costs no allocation (a std::deque would cost >512
  // bytes per task).
  absl::InlinedVector<EventRec, 1> history_;
  std::vector<std::pair<std::string, int64_t>> avoid_;
  std::unique_ptr<AgentInfo> agent_info_;
  int32_t priority_ = 0;
  std::optional<ResourceVector> reservation_;  // set by ReservationsSet
  int64_t job_version_ = 0;
};

struct Job {
  std::string id;  // "user/name"
  v1::JobSpec spec;
  v1::Job::State state = v1::Job::PENDING;
  int64_t submit_time_ms = 0;
  int64_t submit_revision = 0;
  int64_t state_revision = 0;
  std::string request_id;
  int32_t pending = 0, running = 0, dead = 0;
  EventRec last_event;
  // 1 when submitted; +1 on every accepted change of the spec (JobUpdated).
  int64_t version = 1;
  int64_t version_revision = 0;  // cell revision of the last spec change
  // Its latest versions, oldest first (the current one last): at most
  // kVersions, plus older ones a live task still runs. herd history lists
  // them, herd rollback restores one, and an outdated task runs its own.
  std::deque<v1::JobVersion> versions;
  static constexpr size_t kVersions = 20;
  // The latest change's rollout (state UNSPECIFIED before the first update).
  v1::Rollout rollout;
  // A scheduled job (spec.schedule; docs/batch.md): its runs, oldest first
  // (at most kRuns), and the latest due time acted on (its submit time
  // before the first run).
  std::deque<v1::ScheduledRun> runs;
  static constexpr size_t kRuns = 20;
  int64_t last_due_ms = 0;
  // A run of a scheduled job: that job's id ("" for any other job).
  std::string scheduled_by;
  // Index i at position i; spec.task_count of them. Only CellState changes
  // the count (JobUpdated), and it keeps every Task* it holds (pending set,
  // machines) valid when it does.
  std::vector<Task> tasks;

  int32_t priority() const { return spec.priority(); }
  // A scheduled job: a template with no tasks (state SCHEDULED, DEAD once killed).
  bool scheduled() const { return !spec.schedule().empty(); }
  // An alloc set: its tasks are allocs (docs/allocs.md).
  bool alloc_set() const { return spec.alloc_set(); }
  // Admitted, its tasks held back until spec.after has finished.
  bool waiting() const { return state == v1::Job::WAITING; }
  // The spec of `version` (the current spec if it is not kept).
  const v1::JobSpec& SpecAt(int64_t version) const;
  const v1::JobVersion* FindVersion(int64_t version) const;
  // with_versions: also `versions` (snapshots, herd history).
  v1::Job ToProto(bool with_versions = false) const;
};

// Orders tasks by (job id, index): deterministic, unlike pointer order.
struct TaskKeyOrder {
  bool operator()(const Task* a, const Task* b) const;
};

// A machine of the cell. Its fields are CellState's to change; everyone
// else reads them through these accessors.
class Machine {
 public:
  const std::string& name() const { return name_; }
  const std::string& address() const { return address_; }
  const std::string& http() const { return http_; }  // its agent's HTTPS endpoint, if any
  const ResourceVector& capacity() const { return capacity_; }
  const google::protobuf::Map<std::string, std::string>& attributes() const { return attributes_; }
  v1::Machine::State state() const { return state_; }
  // Drained by an operator: UP, but nothing new is placed here.
  bool drained() const { return drained_; }
  const std::string& drain_reason() const { return drain_reason_; }
  const ResourceVector& allocated() const { return allocated_; }  // sum of the limits of tasks placed here
  const ResourceVector& reserved() const { return reserved_; }    // sum of their reservations
  const std::vector<std::string>& packages() const { return packages_; }  // sha256 of cached packages, sorted
  // Interference with its latency-sensitive tasks, as its agent reported
  // (MachineInterference): "", "throttle", "evict" or "mark"; and why.
  const std::string& interference() const { return interference_; }
  const std::string& interference_reason() const { return interference_reason_; }
  // "mark": no new non-production work here until it falls.
  bool interference_marked() const { return interference_ == "mark"; }
  // Kept in step with tasks() so the scheduler need not walk them: CPU held
  // by production and non-production tasks, and how many tasks of each
  // priority run here (its first key is the lowest priority present).
  int64_t prod_cpu() const { return prod_cpu_; }
  int64_t nonprod_cpu() const { return nonprod_cpu_; }
  const std::map<int32_t, int32_t>& priorities() const { return priorities_; }
  int32_t MinPriority() const { return priorities_.empty() ? INT32_MAX : priorities_.begin()->first; }
  // Running here, by (job id, index).
  const absl::btree_set<Task*, TaskKeyOrder>& tasks() const { return tasks_; }
  const std::string& reason() const { return reason_; }
  int64_t state_revision() const { return state_revision_; }
  int64_t registered_ms() const { return registered_ms_; }
  // When its state last changed (the mutation's time, Unix ms).
  int64_t state_ms() const { return state_ms_; }
  int64_t order() const { return order_; }  // registration order (deterministic iteration)

  ResourceVector Free() const { return capacity_ - allocated_; }
  // What a task of this priority may use: production counts the others'
  // limits, non-production their reservations.
  ResourceVector FreeFor(int32_t priority) const { return capacity_ - (IsProd(priority) ? allocated_ : reserved_); }
  bool HasPackage(absl::string_view sha256) const;
  v1::Machine ToProto() const;

 private:
  friend class CellState;
  std::string name_;
  std::string address_;
  std::string http_;
  ResourceVector capacity_;
  google::protobuf::Map<std::string, std::string> attributes_;
  v1::Machine::State state_ = v1::Machine::UP;
  bool drained_ = false;
  std::string drain_reason_;
  ResourceVector allocated_;
  ResourceVector reserved_;
  std::vector<std::string> packages_;
  std::string interference_;
  std::string interference_reason_;
  int64_t prod_cpu_ = 0;
  int64_t nonprod_cpu_ = 0;
  std::map<int32_t, int32_t> priorities_;
  absl::btree_set<Task*, TaskKeyOrder> tasks_;
  std::string reason_;
  int64_t state_revision_ = 0;
  int64_t registered_ms_ = 0;
  int64_t state_ms_ = 0;
  int64_t order_ = 0;
};

// Orders pending tasks: higher priority first, then job id, then index.
struct PendingOrder {
  bool operator()(const Task* a, const Task* b) const;
};

// What an applied mutation touched, for those who react to changes (the
// link shards poll touched machines at once; the scheduler wakes up).
struct Effects {
  std::vector<std::string> machines;  // machines whose desired tasks changed
  bool pending_added = false;         // tasks became PENDING
};

class CellState {
 public:
  explicit CellState(std::string cell_name = "local");
  CellState(const CellState&) = delete;
  CellState& operator=(const CellState&) = delete;
  CellState(CellState&&) = default;
  CellState& operator=(CellState&&) = default;

  const std::string& cell_name() const { return cell_name_; }
  int64_t revision() const { return revision_; }

  // OK iff Apply(m) would succeed; the error says why not.
  absl::Status Check(const v1::Mutation& m) const;
  // Applies m. m.revision() must be 0 (not yet assigned) or revision() + 1.
  // On error the state is unchanged.
  absl::Status Apply(const v1::Mutation& m, Effects* effects = nullptr);

  // Lookups (nullptr if absent).
  const Job* FindJob(absl::string_view id) const;
  const Task* FindTask(absl::string_view job_id, int32_t index) const;
  const Machine* FindMachine(absl::string_view name) const;

  // Iteration in deterministic order.
  const absl::btree_map<std::string, std::unique_ptr<Job>>& jobs() const { return jobs_; }
  const std::vector<Machine*>& machines() const { return machine_list_; }
  const absl::btree_set<Task*, PendingOrder>& pending() const { return pending_; }

  // Quota configured for (user, band), or nullptr (unlimited).
  const v1::Quota* FindQuota(absl::string_view user, Band band) const;
  const absl::btree_map<std::pair<std::string, std::string>, v1::Quota>& quotas() const { return quotas_; }
  // Users with granted capabilities or revoked credentials; null if none.
  const v1::User* FindUser(const std::string& name) const {
    auto it = users_.find(name);
    return it == users_.end() ? nullptr : &it->second;
  }
  const absl::btree_map<std::string, v1::User>& users() const { return users_; }
  // Join tokens (herd token create), by id; null if none.
  const v1::JoinToken* FindJoinToken(const std::string& id) const {
    auto it = join_tokens_.find(id);
    return it == join_tokens_.end() ? nullptr : &it->second;
  }
  const absl::btree_map<std::string, v1::JoinToken>& join_tokens() const { return join_tokens_; }
  // Sum of the limits of the user's live (not DEAD) tasks in the band.
  ResourceVector Usage(absl::string_view user, Band band) const;
  // The user's tasks that are not DEAD, at every priority (0 included).
  int64_t LiveTasks(absl::string_view user) const;
  // The jobs created by a submit request id of this user (null if unknown).
  // Request ids are scoped per user (#33): the same id used by two users is
  // two requests.
  const std::vector<std::string>* FindRequest(absl::string_view user, absl::string_view request_id) const;
  // The user a submit's request id belongs to: the mutation's actor (the
  // caller the master committed it for), else the owner of its first job.
  static std::string RequestUser(const v1::Mutation& m);

  // Allocs (Borg §2.4, docs/allocs.md). The alloc a task in an alloc set
  // runs in (the alloc set's task of its index; nullptr if none), what an
  // alloc has left (its limits minus those of the RUNNING tasks in it), and
  // the live jobs running in an alloc set (job ids, sorted).
  const Task* AllocOf(const Task& t) const;
  ResourceVector AllocFree(const Task& alloc) const;
  std::vector<std::string> AllocMembers(absl::string_view alloc_set) const;
  // The RUNNING tasks in `alloc` (on its machine).
  std::vector<const Task*> TasksInAlloc(const Task& alloc) const;

  // Counts for summaries.
  int64_t task_count(v1::Task::State s) const;

  // For incremental scheduling: the last revision at which capacity was
  // freed anywhere (a task left a machine, a machine joined or came back),
  // and at which a task of each priority was placed. A task that could not
  // fit at revision R still cannot unless capacity was freed since, or (if it
  // may preempt) a lower-priority task was placed since. Derived, not
  // persisted: after a restore both read as the snapshot's revision.
  int64_t freed_revision() const { return freed_revision_; }
  // The last revision at which a machine was registered or re-registered
  // (its attributes or capacity may have changed). Derived, like the above.
  int64_t machines_revision() const { return machines_revision_; }
  int64_t placed_revision(int32_t priority) const;

  v1::CellSnapshot ToSnapshot() const;
  static absl::StatusOr<CellState> FromSnapshot(const v1::CellSnapshot& snapshot);

  // Verifies the invariants (allocation sums, machine<->task links, pending
  // set, job counts, quota usage). Tests call it after every mutation.
  absl::Status CheckInvariants() const;

 private:
  Job* MutableJob(absl::string_view id);
  Task* MutableTask(absl::string_view job_id, int32_t index);
  Machine* MutableMachine(absl::string_view name);
  absl::Status CheckRef(const v1::TaskRef& ref, const Task** out) const;

  absl::Status CheckSubmit(const v1::Mutation& m) const;
  absl::Status CheckPlaceOn(const v1::JobsSubmitted& m) const;
  absl::Status CheckKill(const v1::JobKilled& m) const;
  absl::Status CheckScheduled(const v1::TaskScheduled& m) const;
  absl::Status CheckMachineRegistered(const v1::MachineRegistered& m) const;
  absl::Status CheckQuota(const v1::QuotaSet& m) const;
  absl::Status CheckUser(const v1::UserSet& m) const;
  absl::Status CheckJoinToken(const v1::JoinTokenSet& m) const;
  // What JobsSubmitted and JobUpdated both ask of a spec (names, count,
  // priority, resources).
  absl::Status CheckSpec(const v1::JobSpec& s) const;
  absl::Status CheckJobUpdated(const v1::JobUpdated& m) const;
  absl::Status CheckTasksUpdated(const v1::TasksUpdated& m) const;
  absl::Status CheckRolloutChanged(const v1::RolloutChanged& m) const;
  // spec.after of the jobs a submit creates: each names a job that exists
  // (or is submitted with it) and is not scheduled, and no job waits for
  // itself, directly or through others.
  absl::Status CheckAfter(const v1::JobsSubmitted& m) const;
  absl::Status CheckJobReleased(const v1::JobReleased& m) const;
  absl::Status CheckScheduleTriggered(const v1::ScheduleTriggered& m) const;
  // spec.alloc_set / spec.alloc of a job a submit creates or an update
  // changes (`old`: the live job, or null).
  absl::Status CheckAllocFields(const v1::JobSpec& s, const Job* old) const;
  // A job `s` may run in an alloc set (`is_set`) of `set_user` with `allocs` allocs.
  absl::Status CheckAllocMember(const v1::JobSpec& s, bool is_set, const std::string& set_user,
                                int32_t allocs) const;
  // The RUNNING tasks in `alloc` go back to PENDING with it (it left its
  // machine: Borg moves an alloc's tasks with it).
  void EvictFromAlloc(const Task& alloc, const v1::Mutation& m, Effects* fx);
  void ApplyUser(const v1::Mutation& m);
  void ApplyJoinToken(const v1::Mutation& m);
  void ApplyJobReleased(const v1::Mutation& m, Effects* fx);
  void ApplyScheduleTriggered(const v1::Mutation& m, Effects* fx);
  // A new job from `spec` (replacing a DEAD one of its id): every task
  // PENDING, or WAITING with spec.after, or none for a scheduled job.
  Job* CreateJob(const v1::JobSpec& spec, const v1::Mutation& m, const std::string& request_id,
                 const std::string& reason, Effects* fx);
  // Every live task of the job DEAD (KILL, reason), off its machine.
  void KillTasks(Job* j, const std::string& reason, const v1::Mutation& m, Effects* fx);
  // A PENDING task joins the scheduler's queue, unless its job is WAITING.
  void Enqueue(Task* t);

  void ApplySubmit(const v1::Mutation& m, Effects* fx);
  void ApplyKill(const v1::Mutation& m, Effects* fx);
  void ApplyJobUpdated(const v1::Mutation& m, Effects* fx);
  void ApplyTasksUpdated(const v1::Mutation& m, Effects* fx);
  void ApplyRolloutChanged(const v1::Mutation& m);
  // Records the job's current spec as its newest version and forgets the
  // oldest ones beyond Job::kVersions that no live task runs.
  void AddVersion(Job* j, const v1::Mutation& m, std::string reason);
  // A RUNNING task takes its job's current spec on its machine: restarted
  // (a new run) or, if only its limits or priority change, in place; `why`
  // ("job version 3") ends its event's reason.
  void UpdateOnMachine(Task* t, bool restart, const v1::Mutation& m, absl::string_view why, Effects* fx);
  // A RUNNING task leaves its machine to be placed again with the current spec.
  void MoveForUpdate(Task* t, const v1::Mutation& m, absl::string_view why, Effects* fx);
  // Grows or shrinks a job's task list. Growing may move the tasks in
  // memory, so they leave the pending set and their machines' lists first
  // and come back after; removed tasks must already be unlinked.
  void ResizeTasks(Job* j, int32_t count);
  // A task takes its job's current spec: limits (and quota usage), priority
  // and version; its state revision is this one. It must be off any machine
  // and out of the pending set.
  void TakeSpec(Task* t);
  // A new run of a task on its machine (placed, or restarted by an update):
  // the next incarnation, phase ASSIGNED, nothing observed of it yet.
  static void NewRun(Task* t);
  void ApplyScheduled(const v1::Mutation& m, Effects* fx);
  void ApplyObserved(const v1::Mutation& m);
  void ApplyExited(const v1::Mutation& m, Effects* fx);
  void ApplyLost(const v1::Mutation& m, Effects* fx);
  void ApplyRescheduled(const v1::Mutation& m, Effects* fx);
  absl::Status CheckReservations(const v1::ReservationsSet& m) const;
  void ApplyReservations(const v1::Mutation& m);
  void ApplyMachineRegistered(const v1::Mutation& m, Effects* fx);
  void ApplyMachineDown(const v1::Mutation& m, Effects* fx);
  void ApplyMachineUp(const v1::Mutation& m);
  void ApplyMachineDrained(const v1::Mutation& m, Effects* fx);
  void ApplyQuota(const v1::Mutation& m);
  void ApplyMachinePackages(const v1::Mutation& m);
  void ApplyMachineInterference(const v1::Mutation& m);

  // State transitions of one task (keep counts, sets and sums in step).
  void Transition(Task* t, v1::Task::State to, v1::Event::Transition why, absl::string_view reason,
                  const v1::Mutation& m, absl::string_view machine = "");
  void Unplace(Task* t, Effects* fx);
  void Place(Task* t, Machine* mach, Effects* fx);
  // Links a running task and its machine and keeps the machine's sums in
  // step (allocated, reserved, CPU by prod and non-prod, priorities): the one
  // place this happens, for Place and for FromSnapshot. DetachFromMachine
  // undoes it.
  // A task in an alloc counts against the alloc (alloc_used_), not the
  // machine's sums.
  void AttachToMachine(Task* t, Machine* mach);
  void DetachFromMachine(Task* t);
  // `kill_reason`: the job was killed (every live task), with this reason.
  void UpdateJobState(Job* j, const v1::Mutation& m, const std::string* kill_reason = nullptr);
  // A run of a scheduled job died: its outcome goes into the scheduled
  // job's run history.
  void RecordRunOutcome(const Job& run);
  void AddUsage(const Task& t, bool add);
  void RecordRequest(const std::string& user, const std::string& request_id, std::vector<std::string> jobs);

  std::string cell_name_;
  int64_t revision_ = 0;
  absl::btree_map<std::string, std::unique_ptr<Job>> jobs_;
  absl::flat_hash_map<std::string, std::unique_ptr<Machine>> machines_;
  std::vector<Machine*> machine_list_;
  absl::btree_set<Task*, PendingOrder> pending_;
  absl::btree_map<std::pair<std::string, std::string>, v1::Quota> quotas_;  // (user, band)
  absl::btree_map<std::string, v1::User> users_;
  absl::btree_map<std::string, v1::JoinToken> join_tokens_;
  absl::flat_hash_map<std::pair<std::string, int>, ResourceVector> usage_;  // (user, band)
  absl::flat_hash_map<std::string, int64_t> live_tasks_;                     // by user
  using RequestKey = std::pair<std::string, std::string>;  // (user, request id)
  absl::flat_hash_map<RequestKey, std::vector<std::string>> requests_;
  std::deque<RequestKey> request_order_;  // oldest first, bounded
  int64_t task_counts_[4] = {0, 0, 0, 0};
  int64_t freed_revision_ = 0;
  int64_t machines_revision_ = 0;
  std::vector<int64_t> placed_revision_ = std::vector<int64_t>(kMaxPriority + 1, 0);
  int64_t machine_seq_ = 0;
  Effects* fx_ = nullptr;  // the effects of the mutation being applied
  // Derived (rebuilt by FromSnapshot): per alloc (alloc set id, index) the
  // limits of the RUNNING tasks in it, and per alloc set its live member jobs.
  absl::flat_hash_map<std::pair<std::string, int32_t>, ResourceVector> alloc_used_;
  absl::flat_hash_map<std::string, absl::btree_set<std::string>> alloc_members_;

  static constexpr size_t kMaxRequestIds = 100'000;
};

}  // namespace herd::cell
