// The agent's process supervisor: keeps the task runs the master wants on
// this machine running, declaratively.
//
// Every attempt of a run is started under its own herd-shim (see
// runtime/shim_protocol.h), which outlives the agent: destroying the
// Supervisor (or killing the agent) leaves tasks running, and a new
// Supervisor on the same root directory re-adopts them after checking each
// shim's identity (pid + start time, never a bare pid), and learns from the
// shim's exit file how tasks that ended in the meantime ended. See
// docs/agent.md.
//
// At-most-once runs (TaskRun.at_most_once) live under the machine's lease
// from the master (RenewLease, from the agent's polls): it is kept in
// ROOT/lease, where each such run's herd-shim reads it and stops its task
// once it has expired -- also while no agent runs. The Supervisor starts or
// restarts such a run only while the lease is valid.
//
// Thread-safe. One loop thread watches the shims (pidfds in an epoll set),
// their run directories (inotify, for task.pid) and timers (backoff, stop
// grace, log retention); the public methods only update the desired state and
// read the observed state, so they return quickly.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "agent/runtime/process.h"
#include "agent/supervisor/extension.h"
#include "agent/supervisor/run_dir.h"
#include "agent/supervisor/run_table.h"
#include "base/clock.h"
#include "herd/v1/agent.pb.h"

namespace herd::agent {

class Supervisor final : public RunTable {
 public:
  struct Options {
    // Runs live in root_dir/runs/RUN_ID/ (created if missing). One
    // Supervisor per root_dir at a time (enforced with a lock file).
    std::string root_dir;
    // herd-shim; empty: "herd-shim" next to the running executable.
    std::string shim_path;
    Clock* clock = RealClock::Get();
    // Run directories (logs) of runs that were stopped are deleted this long
    // after the run was removed; checked every gc_interval_ms.
    int64_t log_retention_ms = 24 * 3600 * 1000;
    int64_t gc_interval_ms = 10 * 60 * 1000;
    // Grace used when a TaskRun's grace_period_ms is 0.
    int64_t default_grace_period_ms = 10'000;
    // stdout/stderr rotate when a file would pass this size (0: never; the
    // task then writes its files directly); log_keep rotated files are kept
    // per stream.
    int64_t log_max_bytes = 0;
    int32_t log_keep = 3;
    // A run whose attempts failed this many times in a row, each soon after
    // starting, is reported crash_looping (the master moves it).
    int32_t crash_loop_failures = 5;
    // Containers, ports, health checks, packages (extension.h), called in
    // this order. Shared so tests can keep a handle on one.
    std::vector<std::shared_ptr<Extension>> extensions;
    // How often extensions' Tick runs.
    int64_t tick_ms = 1'000;
    // Attempts started per pass of the loop. A start takes milliseconds
    // under the state lock; between passes the lock is free, so a backlog of
    // thousands of starts never keeps a poll reply (Observe) or a stop
    // waiting for more than one pass.
    int max_starts_per_pass = 8;
  };

  // Recovers every run found under root_dir (adopting live shims after an
  // identity check; reading the exit of those that ended while no agent ran;
  // resuming interrupted backoffs and stops) and starts the loop thread.
  // Until the first SetDesired, recovered runs count as desired.
  static absl::StatusOr<std::unique_ptr<Supervisor>> Create(Options options);

  // Stops the loop. Leaves tasks running: the agent may be restarting or
  // being upgraded, and the next Supervisor adopts them.
  ~Supervisor() override;

  Supervisor(const Supervisor&) = delete;
  Supervisor& operator=(const Supervisor&) = delete;

  // The complete set of runs wanted on this machine. Starts desired runs that
  // are missing (they show as STARTING at once; the start itself happens on
  // the loop thread) and stops runs no longer desired: SIGTERM to the task's
  // process group, SIGKILL after the run's grace period; once its processes
  // are gone a stopped run is forgotten (its directory and logs stay until
  // the retention expires). A run already known by its run_id is left alone
  // (the spec is not compared), so repeating a call changes nothing --
  // unless it comes with another job_version: an update changed it in
  // place, and its limits, priority, grace period and restart policy are
  // taken (extensions hear of it through Extension::Updated) without a
  // restart. A later incarnation of a task whose earlier run here is still
  // stopping starts once that one's processes are gone.
  void SetDesired(const std::vector<v1::TaskRun>& desired) override;

  // Every known run, sorted by run_id: desired ones (including terminal ones,
  // reported until the master stops desiring them) and ones being stopped
  // (desired = false). If `version` is given it receives the state version
  // the result corresponds to (for WaitForChange).
  std::vector<v1::RunStatus> Observe(uint64_t* version = nullptr) const override;

  // Path of a run's stdout (or stderr) file, also after the run was stopped
  // while its directory is retained. NOT_FOUND if unknown.
  absl::StatusOr<std::string> LogPath(absl::string_view run_id, bool stderr_stream) const;

  // Machine-wide facts from the extensions (usage, package cache, cgroup
  // version) for a poll reply.
  void DescribeMachine(v1::PollResponse* response) const override;

  // The run's current attempt's task, if it runs (for herd exec).
  absl::StatusOr<ProcessId> TaskOf(absl::string_view run_id) const;

  // Blocks until the observed state's version differs from `last_version` or
  // `timeout_ms` passed; returns the current version.
  uint64_t WaitForChange(uint64_t last_version, int64_t timeout_ms) const override;
  uint64_t Version() const override;

  // Wall time (ms) this Supervisor was created (PollResponse.agent_started_ms).
  int64_t started_ms() const override { return started_ms_; }

  // Renews the lease (RunTable::RenewLease): ROOT/lease is rewritten, and
  // at-most-once runs held for want of a lease may start.
  void RenewLease(int64_t contact_age_ms, int64_t lease_ms) override;
  // Whether the lease is valid now (for tests and the log).
  bool LeaseValid() const;
  std::string LeasePath() const;

 private:
  struct Run;
  class Control;
  struct Action {
    std::string run_id;  // empty: retry waiting starts
    std::string reason;
    bool evict = false;
  };

  explicit Supervisor(Options options);
  RunView ViewOf(const Run& run) const;
  void KillAllLocked(Run& run) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RunActionsLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Asks the extensions to set up an attempt; false if it cannot start now
  // (then the run is waiting, failed or terminal).
  bool PrepareAttemptLocked(Run& run, AttemptSetup* setup) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status Init();
  void RecoverRunLocked(const std::string& run_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Loop();
  int NextTimeoutMsLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void HandleInotifyLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ReconcileLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void StartAttemptLocked(Run& run) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status EnsureOnDiskLocked(Run& run) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void WatchShimLocked(Run& run, Fd pidfd) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ReadTaskPidLocked(Run& run) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void OnShimExitLocked(Run& run) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void AttemptEndedLocked(Run& run, const ExitStatus& exit) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void StopLocked(Run& run) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Forgets a run whose processes are gone (destroys the Run).
  void RemoveLocked(const std::string& run_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void PersistLocked(const Run& run) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void CollectGarbageLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ChangedLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  v1::RunStatus StatusOf(const Run& run) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  int64_t GraceMs(const Run& run) const;
  // At-most-once runs start only under a valid lease (CLOCK_MONOTONIC).
  bool HeldForLeaseLocked(const Run& run, int64_t steady_now_ms) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void SayHeldForLeaseLocked(Run& run) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A STARTING run says why it does not start yet (once per message).
  void SayWaitingLocked(Run& run, std::string message) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Takes what an update may change in place from `spec`; true (changed).
  bool UpdateInPlaceLocked(Run& run, const v1::TaskRun& spec) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Wake();
  std::string RunPath(absl::string_view run_id) const;

  const Options options_;
  const int64_t started_ms_;
  Fd lock_fd_;
  Fd epoll_fd_;
  Fd wake_fd_;     // eventfd
  Fd inotify_fd_;  // run directories, for task.pid

  mutable absl::Mutex mu_;
  mutable absl::CondVar changed_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t version_ ABSL_GUARDED_BY(mu_) = 1;
  uint64_t next_token_ ABSL_GUARDED_BY(mu_) = 16;
  std::map<std::string, std::unique_ptr<Run>> runs_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uint64_t, std::string> token_to_run_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<int, std::string> watch_to_run_ ABSL_GUARDED_BY(mu_);
  int64_t next_gc_mono_ms_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t next_tick_mono_ms_ ABSL_GUARDED_BY(mu_) = 0;
  bool starts_left_ ABSL_GUARDED_BY(mu_) = false;  // the last pass hit max_starts_per_pass
  // When the lease for at-most-once runs ends, on CLOCK_MONOTONIC (0:
  // none), as in ROOT/lease; and this boot's id (written with it).
  int64_t lease_deadline_ms_ ABSL_GUARDED_BY(mu_) = 0;
  std::string boot_id_;
  absl::Mutex lease_write_mu_ ABSL_ACQUIRED_BEFORE(mu_);  // one writer of ROOT/lease
  bool lease_write_warned_ ABSL_GUARDED_BY(lease_write_mu_) = false;

  // Extensions' requests, queued without mu_ (they may come from inside a
  // hook) and carried out by the loop.
  std::unique_ptr<Control> control_;
  absl::Mutex actions_mu_ ABSL_ACQUIRED_AFTER(mu_);
  std::vector<Action> actions_ ABSL_GUARDED_BY(actions_mu_);

  std::thread loop_;
};

}  // namespace herd::agent
