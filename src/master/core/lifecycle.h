// MasterLifecycle: every part of one master process, and the phases it goes
// through (docs/design.md §11). Both ways to run a master use it -- one
// master on SQLite (leads from the start) and a replica on etcd (follows,
// then leads once it wins the lease) -- and so does the simulator, which
// steps the parts on its own thread instead of starting their threads.
//
//   kNew --Start--> kFollowing --Promote--> kLeading --Demote--> kDemoted
//                        \                      \                   |
//                         +-------Stop-----------+------Stop--------+--> kStopped
//
// Two lists of parts, each started in the order added and stopped in the
// reverse order:
//   - parts every replica runs, leader or not: the history recorder, the API
//     (gRPC, web UI and metrics, DNS);
//   - the leader-only parts: the core's own (MasterCore::LeaderParts: the
//     scheduler loop, the link to the agents, the rollout, batch and
//     reclamation controllers), then the ones the process adds (the
//     Framework API's offers, the alert evaluator). This is the one list of
//     what runs only on the leader: `herd master` logs it when it leads.
//
// Demote stops the leader-only parts, newest first, and leaves the API
// serving reads. A demoted core keeps the writer it was promoted with: a
// replica that lost its lease exits (a newer leader's fence already refuses
// its writes) and comes back as a follower, so Promote after Demote is an
// error rather than a second takeover on a core that may be behind.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "master/core/master_core.h"
#include "master/core/part.h"

namespace herd::master {

class MasterLifecycle {
 public:
  enum class Phase { kNew, kFollowing, kLeading, kDemoted, kStopped };
  // kThreads: Start and Promote start each part's threads (a real master).
  // kStepped: parts are never started; Step() runs one round of every
  // leader-only part on the caller's thread (the simulator, tests).
  enum class Mode { kThreads, kStepped };

  // `core` must outlive the lifecycle; a core made by MasterCore::Create
  // already leads, and Promote() then only starts the leader-only parts.
  explicit MasterLifecycle(MasterCore* core, Mode mode = Mode::kThreads);
  ~MasterLifecycle();  // Stop()
  MasterLifecycle(const MasterLifecycle&) = delete;
  MasterLifecycle& operator=(const MasterLifecycle&) = delete;

  // Before Start(): a part every replica runs.
  void AddPart(MasterPart part);
  // Before Promote(): a part only the leader runs, after the core's own.
  void AddLeaderPart(MasterPart part);

  // kNew -> kFollowing: starts the parts every replica runs, in order. If
  // one fails, those started are stopped again and its error returned
  // (named after the part).
  absl::Status Start();
  // kFollowing -> kLeading: the core takes over from `writer` (if it does
  // not lead yet: MasterCore::Promote), then the leader-only parts start
  // in order. On an error the started ones are stopped again.
  absl::Status Promote(store::LogStore* writer = nullptr, AgentLink* link = nullptr);
  // kLeading -> kDemoted: the leader-only parts stop, newest first.
  void Demote();
  // -> kStopped from any phase: Demote(), then the parts every replica
  // runs stop, newest first. Idempotent.
  void Stop();

  // kStepped: one round of every leader-only part that has a step, in
  // order (the core's: scheduler pass, poll of every machine, rollouts,
  // batch, reclamation).
  absl::Status Step();

  Phase phase() const;
  static const char* PhaseName(Phase p);
  // The leader-only parts, in start order (empty before Promote).
  std::vector<std::string> LeaderPartNames() const;

 private:
  // Starts `parts` in order (kThreads); on an error stops the started ones.
  absl::Status StartAll(std::vector<MasterPart>& parts);
  static void StopAll(std::vector<MasterPart>& parts);

  MasterCore* const core_;
  const Mode mode_;
  mutable absl::Mutex mu_;
  Phase phase_ ABSL_GUARDED_BY(mu_) = Phase::kNew;
  std::vector<MasterPart> parts_;         // every replica's
  std::vector<MasterPart> extra_leader_;  // added by the process, before Promote
  std::vector<MasterPart> leader_;        // while leading: the core's, then extra_leader_
};

}  // namespace herd::master
