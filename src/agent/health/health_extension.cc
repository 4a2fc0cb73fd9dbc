#include "agent/health/health_extension.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "base/log.h"

namespace herd::agent {
namespace {

// Workers re-read the clock at least this often, so that a clock that is
// not the machine's (a test's ManualClock) is seen to move.
constexpr int64_t kMaxWaitMs = 1'000;

}  // namespace

HealthExtension::HealthExtension(Options options) : options_(std::move(options)) {}

HealthExtension::~HealthExtension() { Shutdown(); }

int64_t HealthExtension::IntervalMs(const v1::HealthCheck& hc) const {
  return hc.interval_ms() > 0 ? hc.interval_ms() : options_.default_interval_ms;
}
int64_t HealthExtension::TimeoutMs(const v1::HealthCheck& hc) const {
  return hc.timeout_ms() > 0 ? hc.timeout_ms() : options_.default_timeout_ms;
}
int32_t HealthExtension::Threshold(const v1::HealthCheck& hc) const {
  return hc.failure_threshold() > 0 ? hc.failure_threshold() : options_.default_failure_threshold;
}

absl::Status HealthExtension::Init(SupervisorControl* control) {
  control_ = control;
  cancel_fd_.Reset(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!cancel_fd_.valid()) return absl::InternalError("eventfd failed");
  for (int i = 0; i < std::max(1, options_.threads); ++i) workers_.emplace_back([this] { Worker(); });
  return absl::OkStatus();
}

void HealthExtension::Shutdown() {
  {
    absl::MutexLock l(&mu_);
    if (stopping_) return;
    stopping_ = true;
    wake_.SignalAll();
  }
  if (cancel_fd_.valid()) {
    uint64_t one = 1;
    (void)!write(cancel_fd_.get(), &one, sizeof(one));
  }
  for (std::thread& t : workers_) t.join();
  workers_.clear();
}

absl::Status HealthExtension::Prepare(const RunView& run, AttemptSetup* setup) {
  if (!run.spec.has_health_check()) return absl::OkStatus();
  const v1::HealthCheck& hc = run.spec.health_check();
  // A check that can never pass would restart the task forever: refuse it.
  auto named = [&](const std::string& port) -> absl::Status {
    if (std::find(run.spec.port_names().begin(), run.spec.port_names().end(), port) == run.spec.port_names().end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("health check uses port \"", port, "\", which the task does not ask for"));
    }
    return absl::OkStatus();
  };
  switch (hc.kind_case()) {
    case v1::HealthCheck::kHttp:
      return named(hc.http().port());
    case v1::HealthCheck::kTcp:
      return named(hc.tcp().port());
    case v1::HealthCheck::kCommand:
      if (hc.command().argv().empty()) return absl::InvalidArgumentError("health check command is empty");
      return absl::OkStatus();
    case v1::HealthCheck::KIND_NOT_SET:
      return absl::OkStatus();
  }
  return absl::OkStatus();
}

void HealthExtension::Started(const RunView& run, bool recovered) {
  if (!run.spec.has_health_check() || run.spec.health_check().kind_case() == v1::HealthCheck::KIND_NOT_SET) return;
  absl::MutexLock l(&mu_);
  Check& c = checks_[run.spec.run_id()];
  c.spec = run.spec.health_check();
  c.task = run.task;
  ++c.attempt;
  c.live = true;
  c.kill_sent = false;
  c.health.Clear();  // a new attempt starts unknown, with no failures
  // An adopted task already ran its initial delay under the previous agent;
  // it still waits one: the new agent does not know how long ago it started.
  c.next_mono_ms = options_.clock->MonotonicMs() + std::max<int64_t>(0, c.spec.initial_delay_ms());
  wake_.SignalAll();
}

void HealthExtension::Ended(const RunView& run, ExitStatus* exit) {
  absl::MutexLock l(&mu_);
  auto it = checks_.find(run.spec.run_id());
  if (it == checks_.end()) return;
  // Health stays reported as last seen until the next attempt starts.
  ++it->second.attempt;
  it->second.live = false;
  if (options_.slow_checks) options_.slow_checks->Forget(run.spec.run_id());
}

void HealthExtension::Released(const RunView& run) {
  if (options_.slow_checks) options_.slow_checks->Forget(run.spec.run_id());
  absl::MutexLock l(&mu_);
  checks_.erase(run.spec.run_id());
}

void HealthExtension::Describe(const RunView& run, v1::RunStatus* status) const {
  absl::MutexLock l(&mu_);
  auto it = checks_.find(run.spec.run_id());
  if (it != checks_.end()) *status->mutable_health() = it->second.health;
}

void HealthExtension::Worker() {
  absl::MutexLock l(&mu_);
  while (!stopping_) {
    const int64_t now = options_.clock->MonotonicMs();
    auto due = checks_.end();
    int64_t next = std::numeric_limits<int64_t>::max();
    for (auto it = checks_.begin(); it != checks_.end(); ++it) {
      const Check& c = it->second;
      if (!c.live || c.in_flight) continue;
      if (c.next_mono_ms < next) {
        next = c.next_mono_ms;
        due = it;
      }
    }
    if (due == checks_.end() || next > now) {
      int64_t wait_ms = std::min(kMaxWaitMs, due == checks_.end() ? kMaxWaitMs : next - now);
      wake_.WaitWithTimeout(&mu_, absl::Milliseconds(wait_ms));
      continue;
    }
    const std::string run_id = due->first;
    Check& c = due->second;
    c.in_flight = true;
    const Check copy = c;
    ProbeResult result;
    mu_.Unlock();
    const auto start = std::chrono::steady_clock::now();  // probes run on real time
    result = Probe(run_id, copy);
    if (options_.slow_checks && copy.spec.latency_bound_ms() > 0) {
      const int64_t took = std::chrono::duration_cast<std::chrono::milliseconds>(
                               std::chrono::steady_clock::now() - start).count();
      options_.slow_checks->Record(run_id, took, copy.spec.latency_bound_ms());
    }
    mu_.Lock();
    auto it = checks_.find(run_id);
    if (it == checks_.end()) continue;
    it->second.in_flight = false;
    // Intervals are measured from the end of a probe: a slow endpoint is
    // not probed back to back.
    it->second.next_mono_ms = options_.clock->MonotonicMs() + IntervalMs(it->second.spec);
    if (!stopping_ && it->second.attempt == copy.attempt) Record(run_id, copy.attempt, result);
    wake_.SignalAll();  // another worker may have skipped this check while it was in flight
  }
}

ProbeResult HealthExtension::Probe(const std::string& run_id, const Check& check) {
  const v1::HealthCheck& hc = check.spec;
  const int64_t timeout = TimeoutMs(hc);
  auto port_of = [&](const std::string& name) -> std::optional<int32_t> {
    return options_.ports ? options_.ports(run_id, name) : std::nullopt;
  };
  switch (hc.kind_case()) {
    case v1::HealthCheck::kHttp: {
      std::optional<int32_t> port = port_of(hc.http().port());
      if (!port) return {false, absl::StrCat("no port \"", hc.http().port(), "\" allocated")};
      return ProbeHttp(*port, hc.http().path(), timeout, cancel_fd_.get());
    }
    case v1::HealthCheck::kTcp: {
      std::optional<int32_t> port = port_of(hc.tcp().port());
      if (!port) return {false, absl::StrCat("no port \"", hc.tcp().port(), "\" allocated")};
      return ProbeTcp(*port, timeout, cancel_fd_.get());
    }
    case v1::HealthCheck::kCommand: {
      InRunOptions in;
      in.shim_path = options_.shim_path;
      in.task = check.task;
      in.argv.assign(hc.command().argv().begin(), hc.command().argv().end());
      return ProbeCommand(in, timeout, cancel_fd_.get());
    }
    case v1::HealthCheck::KIND_NOT_SET:
      break;
  }
  return {true, ""};
}

void HealthExtension::Record(const std::string& run_id, uint64_t attempt, const ProbeResult& result) {
  Check& c = checks_.at(run_id);
  v1::Health& h = c.health;
  const v1::Health::State old_state = h.state();
  const int32_t old_failures = h.consecutive_failures();
  h.set_message(result.message);
  if (result.healthy) {
    h.set_state(v1::Health::HEALTHY);
    h.set_consecutive_failures(0);
  } else {
    h.set_consecutive_failures(h.consecutive_failures() + 1);
    HERD_LOG_DEBUG("run {}: health check failed ({} in a row): {}", run_id, h.consecutive_failures(),
                   result.message);
    if (h.consecutive_failures() >= Threshold(c.spec)) {
      h.set_state(v1::Health::UNHEALTHY);
      if (!c.kill_sent && control_ != nullptr) {
        c.kill_sent = true;
        HERD_LOG_WARN("run {}: unhealthy after {} failed checks: {}", run_id, h.consecutive_failures(),
                      result.message);
        control_->KillAttempt(run_id, absl::StrCat("unhealthy: ", result.message), /*evict=*/false);
      }
    }
  }
  if (h.state() != old_state || h.consecutive_failures() != old_failures) {
    if (control_ != nullptr) control_->Changed();
  }
}

}  // namespace herd::agent
