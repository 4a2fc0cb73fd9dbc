// What the master's API handlers (jobs.h, machines.h, stream.h) share: the
// cell through the committer, the store (past revisions, the log), the
// clock, the options, where schedulers' why-pending goes, the link shard (to
// poll a machine at once) and the authorizer every handler asks first.
#pragma once

#include <atomic>
#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "base/clock.h"
#include "base/status.h"
#include "cell/cell_state.h"
#include "master/core/admission/authorizer.h"
#include "master/core/committer.h"
#include "master/core/link/link_shard.h"
#include "master/core/options.h"
#include "master/core/recovery.h"
#include "master/core/why_store.h"
#include "store/log_store.h"

namespace herd::master {

struct ApiContext {
  Committer* committer = nullptr;
  store::LogStore* store = nullptr;
  Clock* clock = nullptr;
  const MasterOptions* options = nullptr;
  WhyStore* why = nullptr;
  // Null without a link (tests, some simulations) and on a follower until
  // it is promoted (set once, while reads go on).
  std::atomic<LinkShard*> link{nullptr};
  int64_t started_ms = 0;

  absl::Status Authorize(const Principal& who, Action action, const Resource& on) const {
    return options->authorizer->Authorize(who, action, on);
  }

  // The job a reference names: "user/name", or "name" = the caller's job of
  // that name if there is one, else the only job of that name.
  absl::StatusOr<std::string> ResolveJob(const cell::CellState& s, const Principal& caller,
                                         const std::string& ref) const;

  // The live job `ref` names, once `who` may do `action` to it (into *id);
  // FAILED_PRECONDITION if it is dead.
  absl::StatusOr<const cell::Job*> LiveJob(const cell::CellState& s, const Principal& who, const std::string& ref,
                                           Action action, std::string* id) const;

  // fn on the current state (at_revision 0 or the current revision), or on
  // the state at a past revision rebuilt from the store.
  template <typename T>
  absl::StatusOr<T> AtRevision(int64_t at_revision,
                               const std::function<absl::StatusOr<T>(const cell::CellState&)>& fn) const {
    if (at_revision == 0 || at_revision == committer->revision()) {
      return committer->Read([&](const cell::CellState& s) { return fn(s); });
    }
    HERD_ASSIGN_OR_RETURN(cell::CellState past, Recover(*store, at_revision, options->cell_name));
    return fn(past);
  }
};

// The Resource for a job (its id and owner).
Resource JobResource(const cell::Job& job);

// Hides the env values in `spec` (one of `job`'s) unless `who` may read
// its secrets (its owner, or read-all): env is where users put tokens and
// passwords.
void HideSecretsFrom(const ApiContext& ctx, const Principal& who, const cell::Job& job, v1::JobSpec* spec);

}  // namespace herd::master
