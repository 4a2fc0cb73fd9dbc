// Authorization: the one seam every request to the master passes through
// (docs/design.md §10; quota and validation are §5's admission). Each
// handler of master/core/api asks the Authorizer before it acts -- with who
// is asking, what they want to do and to what -- and a refusal comes back as
// PERMISSION_DENIED naming the permission that is missing, with nothing
// changed.
//
// The caller's identity comes from the certificate its TLS connection
// presented (rpc::Caller); the policy is CellPolicy below: users change,
// exec into and read the logs and secrets of only their own jobs unless
// they hold a capability.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace herd::master {

// What a user may do beyond their own jobs. An admin holds them all.
enum class Capability : uint32_t {
  kAdmin = 1 << 0,       // "admin": everything
  kQuotaAdmin = 1 << 1,  // "quota-admin": set anyone's quota
  kRunAs = 1 << 2,       // "run-as": act on behalf of another user (--user)
  kExecAny = 1 << 3,     // "exec-any": exec into any task
  kReadAll = 1 << 4,     // "read-all": read every job's secrets and logs, watch the cell, export checkpoints
  kRunAsRoot = 1 << 5,   // "run-as-root": tasks that run as root on the machine
};
inline constexpr Capability kAllCapabilities[] = {Capability::kAdmin,   Capability::kQuotaAdmin, Capability::kRunAs,
                                                  Capability::kExecAny, Capability::kReadAll,    Capability::kRunAsRoot};
absl::string_view CapabilityName(Capability c);  // "quota-admin"
absl::StatusOr<Capability> ParseCapability(absl::string_view name);

// Who is asking.
struct Principal {
  enum class Kind {
    kUser,       // a person or a program acting as a user (the CLI, a framework)
    kMachine,    // an agent, as its machine
    kScheduler,  // a `herd scheduler` proposing placements
    kInternal,   // the master's own parts (its in-process scheduler, the simulator)
  };
  Kind kind = Kind::kUser;
  std::string name;  // the user's or machine's name, or the part's ("scheduler")
  uint32_t capabilities = 0;  // bits of Capability (users only)
  // When a user acts on behalf of another (--user, with run-as): the one
  // who really asked, for messages and the audit log.
  std::string acting_user;
  // The credential's serial ("" for internal parts).
  std::string credential;
  // When it was issued (seconds since the epoch): a revocation ends what it
  // opened (streams) as well as what it asks next.
  int64_t credential_issued_s = 0;

  static Principal User(std::string name) { return {Kind::kUser, std::move(name)}; }
  static Principal Admin(std::string name) {
    return {Kind::kUser, std::move(name), static_cast<uint32_t>(Capability::kAdmin)};
  }
  static Principal Machine(std::string name) { return {Kind::kMachine, std::move(name)}; }
  static Principal Scheduler(std::string name) { return {Kind::kScheduler, std::move(name)}; }
  static Principal Internal(std::string what) { return {Kind::kInternal, std::move(what)}; }

  bool Has(Capability c) const {
    return (capabilities & (static_cast<uint32_t>(c) | static_cast<uint32_t>(Capability::kAdmin))) != 0;
  }

  // "user alice", "machine m1", "the master's scheduler".
  std::string ToString() const;
  // The user whose own jobs "name" (without USER/) refers to; "" if none.
  const std::string& user() const {
    static const std::string kNone;
    return kind == Kind::kUser ? name : kNone;
  }
};

// What is asked. Each RPC of the master's API is exactly one action.
enum class Action {
  kSubmitJob,        // Submit: once per job, on the job's owner
  kKillJob,          // Kill
  kScaleJob,         // Scale: change a job's task count
  kRollbackJob,      // Rollback: put a job back at an earlier version's spec
  kControlRollout,   // SetRollout: pause or resume a job's rolling update
  kReadJob,          // GetJob, ListTasks, GetTask, Why, History
  kListJobs,         // ListJobs (owner: the user filter, "" = everyone's)
  kPropose,          // Propose: placements for the cell
  kRegisterMachine,  // RegisterMachine
  kListMachines,     // ListMachines
  kSetQuota,         // SetQuota (owner: whose quota)
  kListQuotas,       // ListQuotas (owner: the user filter)
  kReadCell,         // GetCell
  kWatch,            // Watch: every mutation of the cell
  kExportCheckpoint, // ExportCheckpoint: the whole cell's state
  kExecTask,         // a grant to exec into a task (owner: the job's)
  kReadLogs,         // a grant to read a task's logs
  kReadSecrets,      // see a job's env values (asked by reads, which hide them otherwise)
  kManageUsers,      // issue or revoke credentials, grant capabilities
  kRunTaskAs,        // Submit of a job whose tasks name a machine account (isolation.user; account: which)
  kNotifyMachine,    // MachineChanged: a machine asks to be polled now (only itself)
  kDrainMachine,     // DrainMachines: drain or undrain (machine: which)
  kReadMetrics,      // GET /metrics on the master (herd master --metrics)
  kQueryHistory,     // QueryHistory: read-only SQL on the history (env values are not in it)
  kListAlerts,       // ListAlerts: the cell's alarms
  kResolveName,      // Resolve, WatchNames: tasks' names, addresses, ports and health (on the job)
  kOpenWebUi,        // CreateWebLogin: a link that logs a browser into the web UI as the caller
  kCount,
};
// "submit-job", "kill-job", ...: how messages and the audit log name it.
absl::string_view ActionName(Action a);

// What the action is on (fields that do not apply are empty).
struct Resource {
  std::string job;      // "user/name"
  std::string owner;    // the user who owns the job, or whose quota
  std::string machine;  // a machine's name
  std::string account;  // a machine account tasks would run as (kRunTaskAs)
  std::string ToString() const;  // "job alice/web", "quota of alice", "machine m1", "the cell"
};

class Authorizer {
 public:
  virtual ~Authorizer() = default;
  // OK, or PERMISSION_DENIED (see Denied()). Called on the request's thread,
  // possibly with the cell's state locked: it must be quick and must not
  // call back into the master.
  virtual absl::Status Authorize(const Principal& who, Action action, const Resource& on) const = 0;
  // A caller refused before any action could be weighed: a revoked
  // credential, acting as another user without run-as. Only recorded (the
  // audit log); the refusal itself is the caller's answer.
  virtual void Unidentified(const std::string& name, const std::string& credential, const std::string& acting_as,
                            const absl::Status& why) const {}
  // A machine asked to join with a token (JoinApi): from `peer`, with token
  // `token_id`, as `machine`; OK if it got its credential. Only recorded.
  virtual void Joined(const std::string& peer, const std::string& token_id, const std::string& machine,
                      const absl::Status& outcome) const {}
};

// The refusal every policy returns: "user bob may not kill-job job
// alice/web: it needs the permission 'admin'".
absl::Status Denied(const Principal& who, Action action, const Resource& on, absl::string_view permission);

// Allows everything: for the simulator and tests of one part.
class AllowAll final : public Authorizer {
 public:
  absl::Status Authorize(const Principal&, Action, const Resource&) const override { return absl::OkStatus(); }
};

// The cell's policy (Borg §2.6 and Kubernetes RBAC's defaults, in short):
// - the master's own parts may do anything;
// - a machine may only register itself (its name is its certificate's);
// - a scheduler may read the cell and propose placements;
// - a user may submit (create or update), scale, roll back, pause and
//   resume the rollout of, kill, exec into, and read
//   the logs and secrets of their own jobs; may read every job's status
//   (env values hidden) and its tasks' names, the machines, the quotas,
//   the cell and its metrics; everything else needs a capability:
//   quota-admin to set quotas, exec-any to exec into others' tasks,
//   read-all for others' secrets and logs, the cell's stream and
//   checkpoints, admin for the rest (changing others' jobs, users,
//   placements). Tasks run as an unprivileged account the agent maps the
//   job's owner to; naming a machine account (isolation.user) needs
//   run-as, and root needs run-as-root.
class CellPolicy final : public Authorizer {
 public:
  absl::Status Authorize(const Principal& who, Action action, const Resource& on) const override;
};

// True if the action changes something (what the audit log records).
bool IsMutating(Action a);

}  // namespace herd::master
