// The framework manager (issue #17; the Mesos paper, seed 002): the
// leader's registry of frameworks, their offers and their tasks, behind the
// gRPC Framework API (proto/herd/v1/frameworks.proto, docs/frameworks.md).
//
// Every offer interval an allocation round computes each UP, undrained
// machine's slack from the cell state (capacity minus the limits of every
// task placed there, minus what is offered and not answered yet) and lets
// the DrfAllocator hand it out; offers go to the frameworks' event streams.
// An offer not answered within the offer timeout is rescinded, as are all
// of a framework's offers when its stream ends. A framework task is a
// one-task Herd job (labels herd.framework*, base/framework_labels.h) that
// Accept submits and places in one mutation (JobsSubmitted.place_on: all or
// nothing, checked against the same ledger the built-in scheduler's
// placements are, so neither can over-commit a machine). Task statuses are derived from the
// cell state after each change, each with a uuid, and re-sent until
// acknowledged. A disconnected framework keeps its tasks for its failover
// timeout; then they are killed and it is removed. On takeover a new leader
// rebuilds the registry (inactive, disconnected now) from the live
// framework jobs' labels.
//
// Thread-safe. Tick() does one step of the work; Start() runs it on a
// thread (after each change to the cell, at least every offer interval).
// Tests drive Tick() with a ManualClock.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "herd/v1/frameworks.pb.h"
#include "master/core/api/context.h"
#include "master/core/frameworks/allocator.h"
#include "master/core/frameworks/options.h"

namespace herd::master::frameworks {

// One subscription's events, in order. The stream handler pops them; the
// manager pushes. Closed when replaced by a newer subscription, when the
// framework is removed, or when it falls too far behind.
class EventQueue {
 public:
  explicit EventQueue(size_t max) : max_(max) {}
  // Waits up to `timeout` for an event. False (and *out untouched) on
  // timeout or once closed and drained; closed() tells which.
  bool Next(v1::FrameworkEvent* out, absl::Duration timeout);
  // The next event if one is waiting (never blocks).
  bool TryNext(v1::FrameworkEvent* out) { return Next(out, absl::ZeroDuration()); }
  // Called after each Push and on Close (outside the queue's lock), so a
  // stream served without a thread of its own knows to read again. Set once,
  // before events flow.
  void SetWaker(std::function<void()> wake);
  void Push(v1::FrameworkEvent e);
  void Close(std::string why);
  bool closed() const;
  std::string why_closed() const;
  size_t size() const;

 private:
  const size_t max_;
  mutable absl::Mutex mu_;
  std::deque<v1::FrameworkEvent> events_ ABSL_GUARDED_BY(mu_);
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  std::string why_ ABSL_GUARDED_BY(mu_);
  std::function<void()> wake_ ABSL_GUARDED_BY(mu_);
};

class FrameworkManager {
 public:
  // `committer`, `clock` and `options` (for the authorizer) must outlive it.
  FrameworkManager(Committer* committer, Clock* clock, const MasterOptions* options, ManagerOptions o = {});
  ~FrameworkManager();

  // Rebuilds the registry from the cell state (a new leader), then runs
  // Tick() on a thread until Stop().
  void Start();
  void Stop();
  // The registry from the live framework jobs (Start() calls it).
  void Recover();
  // One step: task statuses from the cell state, offers past their timeout
  // rescinded, frameworks past their failover timeout removed (tasks
  // killed), an allocation round if one is due, heartbeats.
  void Tick();

  struct Subscription {
    std::string framework_id;
    std::shared_ptr<EventQueue> events;
  };
  absl::StatusOr<Subscription> Subscribe(const Principal& who, const v1::SubscribeRequest& req);
  // The stream of `sub` ended (the framework went away or was replaced).
  void Disconnected(const Subscription& sub);
  absl::StatusOr<v1::AcceptResponse> Accept(const Principal& who, const v1::AcceptRequest& req);
  absl::StatusOr<v1::DeclineResponse> Decline(const Principal& who, const v1::DeclineRequest& req);
  absl::StatusOr<v1::KillTaskResponse> KillTask(const Principal& who, const v1::KillTaskRequest& req);
  absl::StatusOr<v1::AcknowledgeResponse> Acknowledge(const Principal& who, const v1::AcknowledgeRequest& req);
  absl::StatusOr<v1::ReconcileResponse> Reconcile(const Principal& who, const v1::ReconcileRequest& req);
  absl::StatusOr<v1::TeardownResponse> Teardown(const Principal& who, const v1::TeardownRequest& req);
  // The frameworks `who` may act for, with what each holds and its
  // dominant share of the cell's up machines.
  absl::StatusOr<v1::ListFrameworksResponse> ListFrameworks(const Principal& who,
                                                            const v1::ListFrameworksRequest& req);

  // For tests and metrics.
  size_t frameworks() const;
  size_t outstanding_offers() const;
  ResourceVector Held(const std::string& framework_id) const;
  bool connected(const std::string& framework_id) const;

  // The job a framework task is: "fw-<framework id>-<task id>".
  static std::string JobName(const std::string& framework_id, const std::string& task_id);

 private:
  struct TaskRec {
    std::string job;          // "user/name"
    ResourceVector held;      // counted in the allocator while live
    v1::FrameworkTaskState last = v1::TASK_STATE_UNSPECIFIED;
    bool killing = false;     // we asked for its job to be killed (lost)
  };
  struct Framework {
    v1::FrameworkInfo info;
    std::shared_ptr<EventQueue> events;  // null while disconnected
    int64_t disconnected_ms = 0;
    std::map<std::string, TaskRec> tasks;  // live (not terminal), by task id
    // Updates not acknowledged yet, by task id (the latest one of each),
    // with when each was last sent.
    std::map<std::string, std::pair<v1::FrameworkTaskStatus, int64_t>> unacked;
    int64_t last_heartbeat_ms = 0;
  };
  struct OfferRec {
    std::string framework;
    std::string machine;
    ResourceVector resources;
    int64_t expires_ms = 0;
  };

  absl::StatusOr<Framework*> Find(const Principal& who, const std::string& id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status MayAct(const Principal& who, const std::string& user) const;
  // Accept's bounds on the request's counts (offers, tasks, filters).
  absl::Status CheckAcceptLimits(const v1::AcceptRequest& req) const;
  static v1::JobSpec TaskSpec(const Framework& f, const std::string& fid, const v1::FrameworkTask& t);
  // Whether `who` may register a framework of `user` in `role` / at
  // `priority` (#33): PERMISSION_DENIED naming what is missing if not.
  absl::Status MayUseRole(const Principal& who, const std::string& user, const std::string& role) const;
  absl::Status MayUsePriority(const Principal& who, const std::string& user, int32_t priority) const;
  void Send(Framework& f, v1::FrameworkEvent e) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Update(Framework& f, const std::string& task_id, const std::string& job, v1::FrameworkTaskState state,
              std::string message, std::string machine, int32_t exit_code, int64_t now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RescindOffer(const std::string& offer_id, bool tell) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RescindAll(const std::string& framework_id, bool tell) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Kills the framework's live jobs and forgets it.
  void Remove(const std::string& framework_id, const std::string& why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The statuses of the framework tasks whose jobs are in `jobs` (null:
  // of all of them) from the cell state; an update for each that changed.
  void ObserveTasks(int64_t now, const std::set<std::string>* jobs = nullptr) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Tick() with only `jobs` observed (null: all), for the loop that knows
  // from the change feed which jobs changed.
  // True if resources came back that an early round will offer.
  bool Step(const std::set<std::string>* jobs);
  void AddTask(Framework& f, const std::string& framework_id, const std::string& task_id, TaskRec rec)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void AllocationRound(int64_t now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status KillJobs(const std::vector<std::string>& jobs, const std::string& reason);
  std::string NewId(size_t hex_digits) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Loop();

  Committer* const committer_;
  Clock* const clock_;
  ApiContext ctx_;  // for PrepareSpec (authorization, validation)
  const ManagerOptions opts_;

  mutable absl::Mutex mu_;
  DrfAllocator alloc_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, Framework> fws_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, OfferRec> offers_ ABSL_GUARDED_BY(mu_);
  // Every live framework task by its job: job -> (framework id, task id).
  std::map<std::string, std::pair<std::string, std::string>> by_job_ ABSL_GUARDED_BY(mu_);
  int64_t next_round_ms_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t last_round_ms_ ABSL_GUARDED_BY(mu_) = 0;
  // Resources came back (a task ended, an offer was answered or rescinded)
  // since the last round: the next may come early (min_round_gap_ms).
  bool freed_ ABSL_GUARDED_BY(mu_) = false;
  std::mt19937_64 rng_ ABSL_GUARDED_BY(mu_);

  absl::Mutex stop_mu_;
  bool stopping_ ABSL_GUARDED_BY(stop_mu_) = false;
  std::thread thread_;
};

}  // namespace herd::master::frameworks
