// Extensions: what the supervisor does for a run beyond starting, watching,
// restarting and stopping its processes. Containers (cgroups), ports, health
// checks and packages each plug in here, so the supervisor's state machine
// stays one readable piece and each concern is tested on its own.
//
// Threading: every hook except Describe/DescribeMachine runs on the
// supervisor's loop thread with the supervisor's lock held, so a hook must be
// quick (no network, no waiting on a child). Work that takes long (fetching a
// package, probing a health endpoint) runs on the extension's own threads;
// it reports back through SupervisorControl, which never blocks and may be
// called from any thread, including from inside a hook. Describe and
// DescribeMachine run on the caller's thread of Observe()/a poll and must
// only read the extension's own (locked) state.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "agent/runtime/process.h"
#include "agent/supervisor/run_dir.h"
#include "herd/v1/agent.pb.h"

namespace herd::agent {

// What an extension sees of a run.
struct RunView {
  const v1::TaskRun& spec;
  const RunDir& dir;
  v1::Task::Phase phase;
  ProcessId task;  // the current attempt's task, once the shim reported it
  bool desired;
};

// What extensions add to an attempt before it starts.
struct AttemptSetup {
  // Options for herd-shim, placed before "--" (see shim_protocol.h), e.g.
  // {"--cgroup", "/sys/fs/cgroup/memory/herd/a/ls/RUN/cgroup.procs"}.
  std::vector<std::string> shim_args;
  // Added to the task's environment (after TaskRun.env, before HERD_*).
  std::map<std::string, std::string> env;
  // ${NAME} -> value in the task's argv and environment values, e.g.
  // "port.http" -> "20001". Unknown ${...} are left as they are.
  std::map<std::string, std::string> substitutions;
};

// How extensions act on runs. Thread-safe and non-blocking: actions are
// queued and carried out by the loop thread.
class SupervisorControl {
 public:
  virtual ~SupervisorControl() = default;
  // Ends the current attempt of `run_id` now: SIGKILL to every process of it
  // (KillAll, else its process group). The attempt is then reported with
  // `reason` as its message ("unhealthy: ...", "killed: machine out of
  // memory ..."). With `evict`, the run is over whatever its restart policy
  // (terminal, RunStatus.evicted = true): the master places it elsewhere.
  // Otherwise the restart policy decides, as for any failure. Ignored if the
  // run has no live attempt.
  virtual void KillAttempt(const std::string& run_id, std::string reason, bool evict) = 0;
  // Something an extension waited for is ready (see Prepare's UNAVAILABLE):
  // runs waiting to start are tried again now.
  virtual void Retry() = 0;
  // The observed state changed in a way only the extension knows (health,
  // usage): wakes WaitForChange() callers.
  virtual void Changed() = 0;
};

class Extension {
 public:
  virtual ~Extension() = default;
  virtual absl::string_view name() const = 0;

  // Once, before recovery. `control` outlives the extension's use of it
  // (until Shutdown).
  virtual absl::Status Init(SupervisorControl* control) { return absl::OkStatus(); }
  // Before the supervisor goes away: stop the extension's threads. Tasks
  // keep running; state on disk stays for the next agent.
  virtual void Shutdown() {}

  // A run found on disk when the agent started (its task may still run: the
  // phase says). Rebuild what the extension keeps per run (allocated ports,
  // package references, its cgroup) from the run directory.
  virtual void Recovered(const RunView& run) {}

  // Before each attempt of a run (the first and every restart), after its
  // directory exists. OK: go on. UNAVAILABLE: not ready yet (a package is
  // being fetched): the run stays STARTING and Prepare is asked again after
  // SupervisorControl::Retry() (or within a second). FAILED_PRECONDITION or
  // INVALID_ARGUMENT: the run cannot ever start here (digest mismatch, bad
  // spec); it becomes terminal with the status message. Any other error fails
  // this attempt and the restart policy decides.
  virtual absl::Status Prepare(const RunView& run, AttemptSetup* setup) { return absl::OkStatus(); }

  // The current attempt's task runs: just started, or adopted after the
  // agent restarted (then `recovered`).
  virtual void Started(const RunView& run, bool recovered) {}

  // The current attempt ended (or was found ended after a restart). May
  // refine how it is reported: e.g. mark `exit->oom` when the kernel's OOM
  // killer ended it.
  virtual void Ended(const RunView& run, ExitStatus* exit) {}

  // Kills every process of the run (SIGKILL). True if the extension did
  // (cgroups: the whole cgroup); false leaves it to the supervisor, which
  // kills the task's process group.
  virtual bool KillAll(const RunView& run) { return false; }

  // An update changed the run in place (run.spec has the new limits,
  // priority, grace period and restart policy): apply what the extension
  // enforces (cgroup limits) to the running attempt, if any.
  virtual void Updated(const RunView& run) {}

  // The run is forgotten (its processes are gone): release what it holds.
  virtual void Released(const RunView& run) {}

  // Adds what the extension knows to a run's status (usage, health, ports).
  virtual void Describe(const RunView& run, v1::RunStatus* status) const {}
  // Adds machine-wide facts to a poll reply (usage, cache, cgroup version).
  virtual void DescribeMachine(v1::PollResponse* response) const {}

  // Every Options::tick_ms on the loop thread, with every run the supervisor
  // knows. For sampling usage, noticing memory shortage, starting probes.
  virtual void Tick(const std::vector<RunView>& runs) {}
};

}  // namespace herd::agent
