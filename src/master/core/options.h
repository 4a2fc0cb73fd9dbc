// What a master is configured with (herd master's flags, the simulator's
// driver, tests).
#pragma once

#include <memory>
#include <string>

#include "master/core/admission/authorizer.h"
#include "master/core/committer.h"
#include "master/core/link/link_shard.h"
#include "sched/framework/options.h"
#include "sched/loop/scheduler_loop.h"

namespace herd::master {

struct MasterOptions {
  std::string cell_name = "local";
  std::string version = "dev";
  Committer::Options committer;
  LinkShard::Options link;
  sched::Options scheduler;
  sched::LoopOptions scheduler_loop;
  // false: no in-process scheduler; an external `herd scheduler` proposes
  // placements through Propose (herd master --scheduler external).
  bool run_scheduler = true;
  bool run_link = true;
  // Asked by every API handler before it acts (admission/authorizer.h).
  std::shared_ptr<const Authorizer> authorizer = std::make_shared<AllowAll>();
};

}  // namespace herd::master
