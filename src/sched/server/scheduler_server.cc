#include "base/signals.h"
#include "sched/server/scheduler_server.h"

#include <algorithm>

#include "base/clock.h"
#include "base/log.h"
#include "rpc/rpc.h"
#include "sched/server/grpc_adapters.h"

namespace herd::sched {
namespace {

void LogStats(const std::string& what, const SchedulerLoop::Stats& s) {
  HERD_LOG_INFO("{}: passes {}, proposed {}, accepted {}, rejected {}, reloads {}, errors {}, revision {}, pending {}",
                what, s.passes, s.proposed, s.accepted, s.rejected, s.bootstraps, s.errors, s.revision, s.pending);
}

bool Same(const SchedulerLoop::Stats& a, const SchedulerLoop::Stats& b) {
  return a.passes == b.passes && a.proposed == b.proposed && a.bootstraps == b.bootstraps && a.errors == b.errors &&
         a.revision == b.revision;
}

}  // namespace

int RunSchedulerServer(const SchedulerServerOptions& options) {
  InitLogging("scheduler", options.log_file);
  std::shared_ptr<grpc::Channel> channel = rpc::Channel(options.master, options.credential, rpc::MasterIdentity());
  const std::string& name = options.scheduler.name;
  // The master knows who this is from its credential; it acts for nobody else.
  GrpcChangeSource source(channel, "", GrpcChangeSource::Options{});
  GrpcProposalSink sink(channel, "");
  LoopOptions loop_options = options.loop;
  loop_options.log_passes = true;
  // Bootstrap itself waits for the master to come back; retry promptly.
  loop_options.max_error_backoff_ms = std::min<int64_t>(loop_options.max_error_backoff_ms, 1'000);
  SchedulerLoop loop(&source, &sink, RealClock::Get(), options.scheduler, loop_options);
  HERD_LOG_INFO(
      "scheduler '{}' for the master at {}: policy {}, order {}, equivalence classes {}, score cache {}, "
      "relaxed randomization {}",
      name, options.master, PackingPolicyName(options.scheduler.policy),
      options.scheduler.order == QueueOrder::kDrf ? "drf" : "round-robin",
      options.scheduler.equivalence_classes ? "on" : "off", options.scheduler.score_cache ? "on" : "off",
      options.scheduler.relaxed_randomization ? "on" : "off");

  InstallStopSignalHandlers();
  loop.Start();
  SchedulerLoop::Stats logged;
  while (true) {
    if (WaitForStopSignal(options.stats_every_ms) != 0) break;
    SchedulerLoop::Stats s = loop.stats();
    if (!Same(s, logged)) LogStats("stats", s);
    logged = s;
  }
  HERD_LOG_INFO("scheduler stopping");
  loop.Stop();
  LogStats("final stats", loop.stats());
  return 0;
}

}  // namespace herd::sched
