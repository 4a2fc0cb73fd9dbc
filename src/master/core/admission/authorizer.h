// Authorization: the one seam every request to the master passes through
// (DESIGN §2.3 "admission": quota, capabilities, validation). Each handler
// of master/core/api asks the Authorizer before it acts -- with who is
// asking, what they want to do and to what -- and a refusal comes back as
// PERMISSION_DENIED naming the permission that is missing, with nothing
// changed.
//
// Today the caller's identity is the user an RPC names (unverified) and the
// default policy allows everything, as before this seam existed. The
// security issue (#10) fills both in: identities from verified credentials,
// and a policy where users change, read and exec into only their own jobs
// unless they hold a capability (admin, quota admin, run on behalf of a
// user, exec into any task, read all), with an audit log of every decision.
#pragma once

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace herd::master {

// Who is asking.
struct Principal {
  enum class Kind {
    kUser,      // a person or a program acting as a user (the CLI, a framework)
    kMachine,   // an agent, as its machine
    kInternal,  // the master's own parts (its in-process scheduler)
  };
  Kind kind = Kind::kUser;
  std::string name;  // the user's or machine's name, or the part's ("scheduler")

  static Principal User(std::string name) { return {Kind::kUser, std::move(name)}; }
  static Principal Machine(std::string name) { return {Kind::kMachine, std::move(name)}; }
  static Principal Internal(std::string what) { return {Kind::kInternal, std::move(what)}; }

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
  kReadJob,          // GetJob, ListTasks, GetTask, Why
  kListJobs,         // ListJobs (owner: the user filter, "" = everyone's)
  kPropose,          // Propose: placements for the cell
  kRegisterMachine,  // RegisterMachine
  kListMachines,     // ListMachines
  kSetQuota,         // SetQuota (owner: whose quota)
  kListQuotas,       // ListQuotas (owner: the user filter)
  kReadCell,         // GetCell
  kWatch,            // Watch: every mutation of the cell
  kExportCheckpoint, // ExportCheckpoint: the whole cell's state
  kCount,
};
// "submit-job", "kill-job", ...: how messages and the audit log name it.
absl::string_view ActionName(Action a);

// What the action is on (fields that do not apply are empty).
struct Resource {
  std::string job;      // "user/name"
  std::string owner;    // the user who owns the job, or whose quota
  std::string machine;  // a machine's name
  std::string ToString() const;  // "job alice/web", "quota of alice", "machine m1", "the cell"
};

class Authorizer {
 public:
  virtual ~Authorizer() = default;
  // OK, or PERMISSION_DENIED (see Denied()). Called on the request's thread,
  // possibly with the cell's state locked: it must be quick and must not
  // call back into the master.
  virtual absl::Status Authorize(const Principal& who, Action action, const Resource& on) const = 0;
};

// The refusal every policy returns: "user bob may not kill-job job
// alice/web: it needs the permission 'admin'".
absl::Status Denied(const Principal& who, Action action, const Resource& on, absl::string_view permission);

// Allows everything: the policy until the security issue lands.
class AllowAll final : public Authorizer {
 public:
  absl::Status Authorize(const Principal&, Action, const Resource&) const override { return absl::OkStatus(); }
};

}  // namespace herd::master
