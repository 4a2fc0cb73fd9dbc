// What a master is configured with (herd master's flags, the simulator's
// driver, tests).
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "master/core/admission/authorizer.h"
#include "master/core/committer.h"
#include "master/core/frameworks/options.h"
#include "master/core/link/link_shard.h"
#include "master/core/batch/batch_controller.h"
#include "master/core/reclaim/reclaimer.h"
#include "master/core/rollout/rollout_controller.h"
#include "metrics/registry.h"
#include "pki/pki.h"
#include "sched/framework/options.h"
#include "sched/loop/scheduler_loop.h"

namespace herd::master {

struct MasterOptions {
  std::string cell_name = "local";
  std::string version = "dev";
  Committer::Options committer;
  LinkShard::Options link;
  RolloutController::Options rollout;
  BatchController::Options batch;
  // Reservations (issue #16; herd master --reclaim): off unless enabled.
  Reclaimer::Options reclaim;
  // The Framework API's offers, timeouts and role weights (issue #17).
  frameworks::ManagerOptions frameworks;
  sched::Options scheduler;
  sched::LoopOptions scheduler_loop;
  // false: no in-process scheduler; an external `herd scheduler` proposes
  // placements through Propose (herd master --scheduler external).
  bool run_scheduler = true;
  bool run_link = true;
  // Asked by every API handler before it acts (admission/authorizer.h).
  // herd master uses CellPolicy; the simulator and tests of one part allow
  // everything.
  std::shared_ptr<const Authorizer> authorizer = std::make_shared<AllowAll>();
  // The master's own credential: signs access grants (herd exec, herd logs).
  // Without one, GrantAccess is refused.
  std::optional<pki::Credential> credential;
  // The cell's CA, if this master issues user credentials (herd user add).
  std::optional<pki::Authority> authority;
  // Where the master's metrics go (master_metrics.h); null: none. Must
  // outlive the MasterCore.
  metrics::Registry* metrics = nullptr;
  // The DNS domain tasks' names live under (docs/naming.md):
  // 0.hello.alice.local.herd. Also in Resolve's answers.
  std::string dns_domain = "herd";
  // Tasks (not DEAD) one user may have, at every priority -- priority 0, which
  // quota leaves unlimited, included (#33 M6). Admins are not held to it.
  // 0: no limit (the simulator's default); herd master sets 100,000.
  int64_t max_tasks_per_user = 0;
};

}  // namespace herd::master
