// The health extension: runs a run's HealthCheck (TaskRun.health_check:
// HTTP GET, TCP connect or a command) every interval_ms against the current
// attempt, and after failure_threshold failures in a row ends the attempt
// (SupervisorControl::KillAttempt, "unhealthy: <last result>") so that the
// run's restart policy restarts it. Reports RunStatus.health.
//
// Probes run on the extension's own threads (a few workers share every
// run's checks, earliest due first), never on the supervisor's loop: the
// hooks only record which attempt runs. HTTP and TCP probes go to 127.0.0.1
// and the port allocated to the named port (a PortLookup, normally
// PortsExtension::PortOf); commands run beside the task through herd-shim
// --enter (agent/exec), in its cgroups, namespaces, directory and user.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "agent/health/probes.h"
#include "agent/runtime/process.h"
#include "agent/supervisor/extension.h"
#include "agent/supervisor/slow_checks.h"
#include "base/clock.h"

namespace herd::agent {

class HealthExtension : public Extension {
 public:
  using PortLookup = std::function<std::optional<int32_t>(const std::string& run_id, const std::string& port_name)>;

  struct Options {
    PortLookup ports;
    // herd-shim, for command checks; empty: next to the running executable.
    std::string shim_path;
    // Probes that may run at once (a slow endpoint holds a worker for up to
    // its timeout).
    int threads = 2;
    // Defaults for unset HealthCheck fields.
    int64_t default_interval_ms = 10'000;
    int64_t default_timeout_ms = 1'000;
    int32_t default_failure_threshold = 3;
    // When checks are due (initial delay, interval). A probe's own timeout
    // bounds real I/O and always runs on real time.
    Clock* clock = RealClock::Get();
    // Where checks with a latency_bound_ms record how long they took (for
    // the interference control); may be null.
    std::shared_ptr<SlowChecks> slow_checks;
  };

  explicit HealthExtension(Options options);
  ~HealthExtension() override;

  absl::string_view name() const override { return "health"; }
  absl::Status Init(SupervisorControl* control) override;
  void Shutdown() override;
  absl::Status Prepare(const RunView& run, AttemptSetup* setup) override;
  void Started(const RunView& run, bool recovered) override;
  void Ended(const RunView& run, ExitStatus* exit) override;
  void Released(const RunView& run) override;
  void Describe(const RunView& run, v1::RunStatus* status) const override;

 private:
  struct Check {
    v1::HealthCheck spec;
    ProcessId task;
    uint64_t attempt = 0;  // changes with every Started/Ended: stale results are dropped
    bool live = false;     // an attempt runs: probe it
    bool in_flight = false;
    bool kill_sent = false;  // this attempt was already declared unhealthy
    int64_t next_mono_ms = 0;
    v1::Health health;
  };

  void Worker();
  // The probe of one check (runs without mu_).
  ProbeResult Probe(const std::string& run_id, const Check& check);
  void Record(const std::string& run_id, uint64_t attempt, const ProbeResult& result)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  int64_t IntervalMs(const v1::HealthCheck& hc) const;
  int64_t TimeoutMs(const v1::HealthCheck& hc) const;
  int32_t Threshold(const v1::HealthCheck& hc) const;

  const Options options_;
  SupervisorControl* control_ = nullptr;
  Fd cancel_fd_;  // eventfd, readable once shutting down: aborts probes in flight

  mutable absl::Mutex mu_;
  absl::CondVar wake_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::map<std::string, Check> checks_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> workers_;
};

}  // namespace herd::agent
