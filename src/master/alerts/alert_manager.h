// Alarms (issue #15, Torca's alarms): rules on abnormal events in the cell,
// evaluated by the leading master, listed by `herd alerts` and handed to
// sinks (a command, a webhook). docs/alerts.md is the user's reference.
//
// Rules on events, read from the committed change feed: a task in a crash
// loop (the agent gave up restarting it there), a task OOM-killed, a
// machine marked down, evictions and preemptions above a rate. Rules on
// state, checked every few seconds: tasks pending longer than a limit, a
// user's usage near a quota, a job's rolling update failed. An alarm fires once per (rule, subject) and
// stays firing while its condition holds; an event's alarm resolves after
// a quiet period without another. Each firing and each resolution is one
// notification to every sink, sent from a thread of its own so that a slow
// sink holds up nothing.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "base/clock.h"
#include "cell/cell_state.h"
#include "herd/v1/api.pb.h"
#include "herd/v1/mutation.pb.h"

namespace herd::master {
class Committer;
}

namespace herd::master::alerts {

struct Rules {
  bool crash_loop = true;
  bool oom = true;
  bool machine_down = true;
  bool rollout_failed = true;  // a job's rolling update stopped (failed, not rolled back yet or not by itself)
  int64_t pending_ms = 10 * 60'000;  // a task pending longer than this (0: off)
  int32_t evictions = 10;            // more than this many in evictions_window_ms (0: off)
  int64_t evictions_window_ms = 10 * 60'000;
  double quota = 0.9;  // usage above this share of a quota's dimension (0: off)
  int64_t quiet_ms = 10 * 60'000;  // an event's alarm resolves after this long without another
  // Sinks: each notification is a JSON object ({"status": "firing" |
  // "resolved", "cell": ..., "alert": {...}}) on the command's stdin, or
  // POSTed to the URL.
  std::vector<std::vector<std::string>> commands;
  std::vector<std::string> webhooks;
};

// Parses an alert rules file (YAML); errors name the file, line and key.
absl::StatusOr<Rules> ParseRules(const std::string& text, const std::string& file);

// Where notifications go (tests use their own).
class Sink {
 public:
  virtual ~Sink() = default;
  virtual absl::Status Send(const std::string& json) = 0;
  virtual std::string Name() const = 0;
};
std::unique_ptr<Sink> CommandSink(std::vector<std::string> argv);
std::unique_ptr<Sink> WebhookSink(std::string url);

class AlertManager {
 public:
  // `clock` must outlive it.
  AlertManager(Rules rules, std::string cell, Clock* clock);
  ~AlertManager();
  void AddSink(std::unique_ptr<Sink> sink);

  // Starts watching `committer` from its current revision (events before
  // it do not fire again) and checking its state every `scan_ms`.
  void Start(Committer* committer, int64_t scan_ms = 2000);
  void Stop();

  // The evaluation itself (Start's thread calls these; tests call them
  // directly).
  void Observe(const v1::Mutation& m);
  void Scan(const cell::CellState& state);

  // Firing alarms, newest first; with `all`, also those resolved within
  // the last day.
  v1::ListAlertsResponse List(bool all) const;

  static constexpr size_t kMaxQueued = 1000;   // notifications waiting for the sinks
  static constexpr size_t kMaxAlerts = 10'000;  // kept, firing or resolved
  static constexpr size_t kMaxMessageBytes = 1024;
  // A job's tasks firing one rule (crash_loop, oom) beyond this many fold
  // into one alarm on the job, so one big failing job cannot crowd out
  // every other alarm; and task alarms may fill only this share of the
  // sinks' queue, keeping room for the cell's (machine_down, evictions...).
  static constexpr size_t kMaxTaskAlarmsPerJob = 100;
  static constexpr size_t kMaxQueuedForTasks = kMaxQueued * 3 / 4;

 private:
  using Key = std::pair<std::string, std::string>;  // (rule, subject)
  // Fires (or, if firing, counts) the alarm; notifies when it starts.
  void Fire(const std::string& rule, const std::string& subject, const std::string& message, int64_t now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Resolve(const Key& key, int64_t now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Notify(const v1::Alert& a, const char* status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Trim(int64_t now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Loop(int64_t scan_ms, int64_t after);
  void SendLoop();

  const Rules rules_;
  const std::string cell_;
  Clock* const clock_;
  std::vector<std::unique_ptr<Sink>> sinks_;
  Committer* committer_ = nullptr;
  std::thread thread_, sender_;

  mutable absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::map<Key, v1::Alert> alerts_ ABSL_GUARDED_BY(mu_);
  // Rules whose state Scan decides: the subjects that matched this scan.
  std::deque<int64_t> evictions_ ABSL_GUARDED_BY(mu_);  // times, within the window
  // OOM kills already counted: (task, incarnation, restarts).
  std::set<std::tuple<std::string, int64_t, int32_t>> ooms_ ABSL_GUARDED_BY(mu_);
  std::deque<std::string> queue_ ABSL_GUARDED_BY(mu_);
  int64_t dropped_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace herd::master::alerts
