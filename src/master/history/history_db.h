// HistoryDb: the master's history database (issue #15, Borg's Infrastore):
// what happened in the cell and what its tasks used, kept for days in a
// SQLite file that users query with read-only SQL (`herd query`).
//
// Tables (docs/history.md is the reference for users):
//   jobs            a row per submission, update and kill, with the spec
//   task_events     a row per task event (scheduled, observed, exited, ...)
//   machine_events  a row per machine registering, going down, up, drained
//   usage           a task's CPU and memory, one row per task per period
//   machine_usage   a machine's CPU and memory, one row per period
//
// It is derived data: the cell's log is the truth. One writer (the
// Recorder's thread) writes batches in transactions; queries open their own
// read-only connection (WAL: readers never wait for the writer).
// Maintain() rolls old usage rows up into coarser periods and drops
// everything older than the retention.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "herd/v1/api.pb.h"

namespace herd::master::history {

struct Options {
  std::string path;  // the SQLite file
  // Usage: one row per task (and machine) per interval, averaging the
  // samples its agent reported in it.
  int64_t sample_interval_ms = 60'000;
  // Rows of one interval are kept this long, then rolled up into rows of
  // rollup_ms (time-weighted averages, so CPU-seconds are conserved).
  int64_t raw_keep_ms = 6ll * 3600 * 1000;
  int64_t rollup_ms = 15ll * 60 * 1000;
  // Every row older than this is deleted.
  int64_t retention_ms = 7ll * 24 * 3600 * 1000;
};

struct JobRow {
  int64_t revision = 0, time_ms = 0;
  std::string job, user;
  int64_t version = 0;
  std::string event;  // submitted | updated | killed
  std::string actor, reason;
  std::string spec_json;  // env values hidden; "" for a kill
};

struct TaskEventRow {
  int64_t revision = 0, time_ms = 0;
  std::string job, user;
  int32_t task_index = 0;
  int64_t incarnation = 0;
  // scheduled | preempted | observed | exited | lost | rescheduled |
  // restarted (an update) | moved (an update)
  std::string event;
  std::string machine, phase, health;
  int32_t restarts = 0, exit_code = 0, exit_signal = 0;
  bool oom_killed = false;
  std::string reason, actor;
};

struct MachineEventRow {
  int64_t revision = 0, time_ms = 0;
  std::string machine;
  std::string event;  // registered | down | up | drained | undrained
  std::string reason;
};

struct UsageRow {
  int64_t time_ms = 0;    // the period's start
  int64_t period_ms = 0;  // its length
  std::string job, user;  // "" for a machine's row
  int32_t task_index = 0;
  std::string machine;
  double cpu_millis = 0;      // average rate over the period
  int64_t cpu_millis_max = 0;  // highest sample
  double memory_bytes = 0;    // average working set
  int64_t memory_bytes_max = 0;
  int64_t disk_bytes = 0;  // the last sample's
  int32_t samples = 0;
};

// What the Recorder writes in one transaction; `revision` is the cell
// revision recorded through (0: unchanged).
struct Batch {
  std::vector<JobRow> jobs;
  std::vector<TaskEventRow> task_events;
  std::vector<MachineEventRow> machine_events;
  std::vector<UsageRow> usage;          // tasks'
  std::vector<UsageRow> machine_usage;  // machines' (job empty)
  int64_t revision = 0;
  bool empty() const {
    return jobs.empty() && task_events.empty() && machine_events.empty() && usage.empty() &&
           machine_usage.empty() && revision == 0;
  }
};

struct QueryLimits {
  int32_t max_rows = 1000;
  int64_t max_bytes = 8 << 20;  // the answer's size, roughly
  absl::Duration timeout = absl::Seconds(10);
};

class HistoryDb {
 public:
  // Opens (creating if needed) the database at options.path.
  static absl::StatusOr<std::unique_ptr<HistoryDb>> Open(const Options& options);
  ~HistoryDb();

  const Options& options() const { return options_; }
  // The cell revision recorded through (0: nothing yet).
  int64_t recorded_revision() const;
  absl::Status Write(const Batch& batch);
  // Rolls raw usage older than raw_keep_ms (before now_ms) up into
  // rollup_ms rows, and deletes rows older than retention_ms.
  absl::Status Maintain(int64_t now_ms);
  // Runs one read-only statement on a connection of its own: anything but
  // reading (writes, ATTACH, PRAGMA, extensions) is refused with
  // PERMISSION_DENIED, a bad statement with INVALID_ARGUMENT (SQLite's
  // message), one that runs past limits.timeout with DEADLINE_EXCEEDED.
  // Safe from any thread, concurrently with Write.
  absl::StatusOr<v1::QueryHistoryResponse> Query(absl::string_view sql, const QueryLimits& limits) const;

  static constexpr size_t kMaxSqlBytes = 64 << 10;
  // A query's columns, and one value's bytes; each value also counts this
  // much toward QueryLimits::max_bytes beyond its own bytes (its heap).
  static constexpr int kMaxColumns = 100;
  static constexpr int kMaxValueBytes = 256 << 10;
  static constexpr int64_t kValueOverhead = 48;

 private:
  struct Impl;
  explicit HistoryDb(Options options, std::unique_ptr<Impl> impl);
  const Options options_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace herd::master::history
