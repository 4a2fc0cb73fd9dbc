// `herd scheduler`: the scheduler loop in a process of its own, following a
// master over gRPC (see grpc_adapters.h). Several may run against one
// master; the master commits whichever proposal is still valid first.
#pragma once

#include <string>

#include "pki/pki.h"
#include "sched/framework/options.h"
#include "sched/loop/scheduler_loop.h"

namespace herd::sched {

struct SchedulerServerOptions {
  std::string master = "127.0.0.1:7070";
  // What it presents to the master: a credential of role scheduler (or an
  // admin's).
  pki::Credential credential;
  Options scheduler;  // scheduler.name names it in logs, mutations and diagnoses
  LoopOptions loop;
  std::string log_file;
  int64_t stats_every_ms = 10'000;  // log a stats line this often when it changed
};

// Runs until SIGINT/SIGTERM; returns the process exit code. Logs a final
// "stats: ..." line (passes, proposed, accepted, rejected, ...).
int RunSchedulerServer(const SchedulerServerOptions& options);

}  // namespace herd::sched
