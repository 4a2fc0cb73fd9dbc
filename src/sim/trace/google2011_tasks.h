// The Google cluster trace v2.1 (clusterdata-2011-2) task tables, turned into
// Herd's own types. task_events: CSV, no header, gzip, possibly split into
// part files (read in name order, which is time order). Columns: timestamp
// (us), missing_info, job_id, task_index, machine_id, event_type, user,
// scheduling_class, priority (0-11), cpu_request, memory_request,
// disk_request, different_machines_restriction. An empty field is unknown.
// See docs/traces.md for the mapping onto Herd and what is approximated.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "herd/v1/objects.pb.h"

namespace herd::sim {

enum class TaskEventType : int {
  kSubmit = 0,
  kSchedule = 1,
  kEvict = 2,
  kFail = 3,
  kFinish = 4,
  kKill = 5,
  kLost = 6,
  kUpdatePending = 7,
  kUpdateRunning = 8,
};

// One task_events row. Numeric fields the row leaves empty are negative
// (requests, priority, scheduling_class, machine_id: -1; different_machines:
// -1 unknown, 0 or 1).
struct TraceEvent {
  int64_t time_us = 0;
  int64_t job_id = 0;
  int32_t index = 0;
  TaskEventType type = TaskEventType::kSubmit;
  int64_t machine_id = -1;
  int missing_info = -1;
  std::string user;  // the trace's hashed user, as given
  int scheduling_class = -1;
  int priority = -1;
  double cpu = -1, memory = -1, disk = -1;  // normalised: 1.0 = the largest machine
  int different_machines = -1;
};

// A task live at one instant, with its latest known requests.
struct TraceTask {
  int64_t job_id = 0;
  int32_t index = 0;
  bool running = false;     // true: scheduled and not ended; false: pending
  int64_t machine_id = -1;  // where it runs; -1 when pending or unknown
  int priority = 0;         // trace priority 0-11 (0 when never given)
  int scheduling_class = 0; // 0-3 (0 when never given)
  std::string user;         // the trace's hashed user
  double cpu = 0, memory = 0, disk = 0;  // normalised; disk 0 when never given
  bool different_machines = false;
  // Time of its last event at or before the instant; -1 when the task has no
  // event there and its state was inferred from its first later event (it was
  // submitted in an earlier part of the trace).
  int64_t last_event_us = -1;
};

struct TasksAtStats {
  int64_t rows = 0;               // rows read
  int64_t live = 0;               // tasks returned
  int64_t running = 0;
  int64_t pending = 0;
  int64_t inferred = 0;           // of them, state inferred from a later event
  int64_t unknown_requests = 0;   // live tasks skipped: cpu or memory never known
  int64_t window_start_us = 0;    // first and last timestamps in the files
  int64_t window_end_us = 0;
};

// The files to read for `dir_or_file`: the file itself, or the directory's
// regular files in name order. NotFound when there is none.
absl::StatusOr<std::vector<std::string>> TracePartFiles(const std::string& dir_or_file);

// The tasks live at `at_us`, in (job_id, index) order.
//
// A task's state at `at_us` is the one its events at or before at_us leave
// it in: submit -> pending; schedule -> running (on the row's machine);
// evict, fail, finish, kill, lost -> dead (not returned; a later submit makes
// it pending again); update-pending -> pending; update-running -> running.
// A task with no event at or before at_us but with later ones was live at
// at_us when its first later event implies so (the files are a complete time
// slice, so it existed before their window began): schedule or
// update-pending -> it was pending; evict, fail, finish, lost or
// update-running -> running on that row's machine; kill -> running when the
// row names a machine, else pending; submit -> it did not exist.
//
// Fields (requests, priority, class, user, flag) come from the latest row at
// or before at_us that gives them, else from the earliest later row that
// does. Tasks whose cpu or memory request is never given are skipped and
// counted in stats->unknown_requests.
//
// Errors: NotFound for missing files; InvalidArgument naming file:line for a
// malformed row; OutOfRange when at_us is before the files' first event
// (their window), since nothing can then be said about earlier tasks.
absl::StatusOr<std::vector<TraceTask>> TasksAt(const std::string& dir_or_file, int64_t at_us,
                                               TasksAtStats* stats = nullptr);

// Every row with t0_us <= time < t1_us, in file order, for replay. Reading
// stops at the first row at or after t1_us (rows are in time order).
absl::StatusOr<std::vector<TraceEvent>> EventsBetween(const std::string& dir_or_file, int64_t t0_us,
                                                      int64_t t1_us);

// Parses one task_events row (exposed for tests). `where` prefixes errors.
absl::StatusOr<TraceEvent> ParseTaskEvent(absl::string_view line, absl::string_view where);

// Units for turning normalised trace requests into Herd resources; the same
// as CellOptions in workload/synthetic.h (a machine of normalised size 1.0
// has 48 cores and 192 GiB; MakeMachines gives every machine 2 TiB of disk).
struct ScaleOptions {
  int64_t cpu_millis_per_unit = 48'000;
  int64_t memory_bytes_per_unit = 192LL << 30;
  int64_t disk_bytes_per_unit = 2LL << 40;
};

// The Herd priority for a trace priority 0-11: 0->0, 1->25 (free);
// 2..7->100,103,...,115 (batch); 8->116 (mid); 9->200, 11->250
// (production); 10->360 (monitoring). Out of range values are clamped.
int32_t HerdPriority(int trace_priority);

// A valid Herd user name for the trace's hashed user: "u" + 10 hex digits of
// a 64-bit FNV-1a hash. The same input always gives the same name.
std::string HerdUserName(absl::string_view trace_user);

// Task constraints by (job_id, task_index).
using TraceConstraints = std::map<std::pair<int64_t, int32_t>, std::vector<v1::Constraint>>;

// How a job's Herd task indexes map back to the trace.
struct TraceJobIndex {
  int64_t job_id = 0;
  std::string job;                      // "user/name"
  std::vector<int32_t> trace_index;     // Herd index i -> trace task_index
  std::vector<int64_t> machine_id;      // Herd index i -> trace machine (-1 pending)
};

// Groups tasks by job into JobSpecs (in job_id order): name "g<job_id>", user
// HerdUserName(user), one task per task present (indexes renumbered densely in
// trace-index order; `index` receives the mapping), resources from the job's
// most common request with per-task overrides for tasks that differ,
// priority HerdPriority(most common priority), appclass LATENCY_SENSITIVE
// when scheduling_class >= 2, different_machines when any task has the
// flag, command ["/bin/true"]. CPU rounds up to at least 1 millicore, memory
// to at least 1 MiB. With `constraints`, the job gets those of its
// lowest-indexed task that has any.
std::vector<v1::JobSpec> JobsFromTasks(const std::vector<TraceTask>& tasks, const ScaleOptions& scale = {},
                                       std::vector<TraceJobIndex>* index = nullptr,
                                       const TraceConstraints* constraints = nullptr);

// task_constraints: CSV, no header, gzip, part files. Columns: timestamp,
// job_id, task_index, comparison_operator (0 ==, 1 !=, 2 <, 3 >),
// attribute_name, attribute_value. Rows after at_us are ignored. Attribute
// names are the trace's hashes, made valid Herd attribute keys by mapping
// '+' to '-' and '=' to '_'; "== empty" becomes NOT_EXISTS and "!= empty"
// EXISTS (the trace treats an absent attribute as empty). They only match
// machines that carry the trace's machine_attributes, which Herd's loaders
// do not produce (the sample has neither table).
absl::StatusOr<TraceConstraints> LoadTaskConstraints(const std::string& dir_or_file, int64_t at_us);

// The attribute key LoadTaskConstraints uses for a trace attribute name.
std::string HerdAttributeKey(absl::string_view trace_attribute);

}  // namespace herd::sim
