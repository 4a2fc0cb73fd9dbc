// task_events: parsing, the live tasks at an instant, events for replay.
#include "sim/trace/google2011_tasks.h"

#include <algorithm>
#include <filesystem>
#include <functional>
#include <system_error>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "sim/trace/google2011.h"

namespace herd::sim {
namespace {

constexpr const char* kColumns[] = {"timestamp",       "missing_info",     "job_id",         "task_index",
                                    "machine_id",      "event_type",       "user",           "scheduling_class",
                                    "priority",        "cpu_request",      "memory_request", "disk_request",
                                    "different_machines_restriction"};
constexpr size_t kNumColumns = sizeof(kColumns) / sizeof(kColumns[0]);

absl::Status BadField(absl::string_view where, size_t col, absl::string_view value, absl::string_view want) {
  return absl::InvalidArgumentError(absl::StrCat(where, ": column ", col + 1, " (", kColumns[col], "): '",
                                                 value.substr(0, 40), "' is not ", want));
}

// Integer column; empty -> `empty` when allowed, else an error.
absl::Status ParseInt(absl::string_view where, const std::vector<absl::string_view>& f, size_t col, bool may_be_empty,
                      int64_t* out) {
  if (f[col].empty()) {
    if (may_be_empty) return absl::OkStatus();
    return BadField(where, col, f[col], "given (it is required)");
  }
  if (!absl::SimpleAtoi(f[col], out)) return BadField(where, col, f[col], "an integer");
  return absl::OkStatus();
}

absl::Status ParseDouble(absl::string_view where, const std::vector<absl::string_view>& f, size_t col, double* out) {
  if (f[col].empty()) return absl::OkStatus();  // unknown: stays -1
  if (!absl::SimpleAtod(f[col], out) || *out < 0) return BadField(where, col, f[col], "a non-negative number");
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<TraceEvent> ParseTaskEvent(absl::string_view line, absl::string_view where) {
  std::vector<absl::string_view> f = absl::StrSplit(line, ',');
  if (f.size() != kNumColumns) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": not a task_events row (", f.size(), " columns, want ",
                                                   kNumColumns, "): '", line.substr(0, 120), "'"));
  }
  TraceEvent e;
  int64_t v = -1;
  if (auto st = ParseInt(where, f, 0, false, &e.time_us); !st.ok()) return st;
  if (auto st = ParseInt(where, f, 1, true, &v); !st.ok()) return st;
  e.missing_info = static_cast<int>(v);
  if (auto st = ParseInt(where, f, 2, false, &e.job_id); !st.ok()) return st;
  v = 0;
  if (auto st = ParseInt(where, f, 3, false, &v); !st.ok()) return st;
  if (v < 0 || v > INT32_MAX) return BadField(where, 3, f[3], "a task index");
  e.index = static_cast<int32_t>(v);
  if (auto st = ParseInt(where, f, 4, true, &e.machine_id); !st.ok()) return st;
  v = 0;
  if (auto st = ParseInt(where, f, 5, false, &v); !st.ok()) return st;
  if (v < 0 || v > 8) return BadField(where, 5, f[5], "an event type (0-8)");
  e.type = static_cast<TaskEventType>(v);
  e.user = std::string(f[6]);
  v = -1;
  if (auto st = ParseInt(where, f, 7, true, &v); !st.ok()) return st;
  if (v < -1 || v > 3) return BadField(where, 7, f[7], "a scheduling class (0-3)");
  e.scheduling_class = static_cast<int>(v);
  v = -1;
  if (auto st = ParseInt(where, f, 8, true, &v); !st.ok()) return st;
  if (v < -1 || v > 11) return BadField(where, 8, f[8], "a priority (0-11)");
  e.priority = static_cast<int>(v);
  if (auto st = ParseDouble(where, f, 9, &e.cpu); !st.ok()) return st;
  if (auto st = ParseDouble(where, f, 10, &e.memory); !st.ok()) return st;
  if (auto st = ParseDouble(where, f, 11, &e.disk); !st.ok()) return st;
  v = -1;
  if (auto st = ParseInt(where, f, 12, true, &v); !st.ok()) return st;
  if (v < -1 || v > 1) return BadField(where, 12, f[12], "0 or 1");
  e.different_machines = static_cast<int>(v);
  return e;
}

absl::StatusOr<std::vector<std::string>> TracePartFiles(const std::string& dir_or_file) {
  std::error_code ec;
  if (std::filesystem::is_regular_file(dir_or_file, ec)) return std::vector<std::string>{dir_or_file};
  if (!std::filesystem::is_directory(dir_or_file, ec)) {
    return absl::NotFoundError(absl::StrCat(dir_or_file, ": no such file or directory"));
  }
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir_or_file, ec)) {
    if (entry.is_regular_file() && entry.path().filename().string()[0] != '.') files.push_back(entry.path().string());
  }
  if (ec) return absl::NotFoundError(absl::StrCat(dir_or_file, ": ", ec.message()));
  if (files.empty()) return absl::NotFoundError(absl::StrCat(dir_or_file, ": no part files in the directory"));
  std::sort(files.begin(), files.end());
  return files;
}

namespace {

// Reads every row of every part in order; fn returns false to stop.
absl::Status ForEachEvent(const std::string& dir_or_file, const std::function<bool(const TraceEvent&)>& fn) {
  absl::StatusOr<std::vector<std::string>> files = TracePartFiles(dir_or_file);
  if (!files.ok()) return files.status();
  bool stop = false;
  for (const std::string& path : *files) {
    absl::Status bad;
    absl::Status st = ReadGzipLines(path, [&](absl::string_view line, int64_t n) {
      if (line.empty()) return true;
      absl::StatusOr<TraceEvent> e = ParseTaskEvent(line, absl::StrCat(path, ":", n));
      if (!e.ok()) {
        bad = e.status();
        return false;
      }
      if (!fn(*e)) stop = true;
      return !stop;
    });
    if (!bad.ok()) return bad;
    if (!st.ok()) return st;
    if (stop) break;
  }
  return absl::OkStatus();
}

enum class Phase : uint8_t { kPending, kRunning, kDead, kIgnored };

struct Fields {
  double cpu = -1, memory = -1, disk = -1;
  int priority = -1, scheduling_class = -1, different_machines = -1;
  std::string user;
  bool user_known = false;

  // Latest wins (rows at or before the instant).
  void Overwrite(const TraceEvent& e) {
    if (e.cpu >= 0) cpu = e.cpu;
    if (e.memory >= 0) memory = e.memory;
    if (e.disk >= 0) disk = e.disk;
    if (e.priority >= 0) priority = e.priority;
    if (e.scheduling_class >= 0) scheduling_class = e.scheduling_class;
    if (e.different_machines >= 0) different_machines = e.different_machines;
    if (!e.user.empty()) {
      user = e.user;
      user_known = true;
    }
  }
  // Earliest wins (rows after the instant fill what is still unknown).
  void Fill(const TraceEvent& e) {
    if (cpu < 0) cpu = e.cpu;
    if (memory < 0) memory = e.memory;
    if (disk < 0) disk = e.disk;
    if (priority < 0) priority = e.priority;
    if (scheduling_class < 0) scheduling_class = e.scheduling_class;
    if (different_machines < 0) different_machines = e.different_machines;
    if (!user_known && !e.user.empty()) {
      user = e.user;
      user_known = true;
    }
  }
  bool Complete() const {
    return cpu >= 0 && memory >= 0 && disk >= 0 && priority >= 0 && scheduling_class >= 0 &&
           different_machines >= 0 && user_known;
  }
};

struct TaskState {
  Phase phase = Phase::kIgnored;
  int64_t machine = -1;
  int64_t last_us = -1;
  Fields fields;
};

}  // namespace

absl::StatusOr<std::vector<TraceTask>> TasksAt(const std::string& dir_or_file, int64_t at_us, TasksAtStats* stats) {
  absl::flat_hash_map<std::pair<int64_t, int32_t>, TaskState> tasks;
  TasksAtStats s;
  bool first = true;
  absl::Status st = ForEachEvent(dir_or_file, [&](const TraceEvent& e) {
    s.window_start_us = first ? e.time_us : std::min(s.window_start_us, e.time_us);
    s.window_end_us = first ? e.time_us : std::max(s.window_end_us, e.time_us);
    first = false;
    ++s.rows;
    auto key = std::make_pair(e.job_id, e.index);
    if (e.time_us <= at_us) {
      TaskState& t = tasks[key];
      switch (e.type) {
        case TaskEventType::kSubmit:
        case TaskEventType::kUpdatePending:
          t.phase = Phase::kPending;
          t.machine = -1;
          break;
        case TaskEventType::kSchedule:
        case TaskEventType::kUpdateRunning:
          t.phase = Phase::kRunning;
          if (e.machine_id >= 0 || e.type == TaskEventType::kSchedule) t.machine = e.machine_id;
          break;
        default:  // evict, fail, finish, kill, lost
          t.phase = Phase::kDead;
          t.machine = -1;
      }
      t.last_us = e.time_us;
      t.fields.Overwrite(e);
      return true;
    }
    auto it = tasks.find(key);
    if (it == tasks.end()) {
      // First seen after the instant: infer its state at the instant.
      TaskState t;
      switch (e.type) {
        case TaskEventType::kSubmit:
          t.phase = Phase::kIgnored;
          break;
        case TaskEventType::kSchedule:
        case TaskEventType::kUpdatePending:
          t.phase = Phase::kPending;
          break;
        case TaskEventType::kKill:
          t.phase = e.machine_id >= 0 ? Phase::kRunning : Phase::kPending;
          break;
        default:  // evict, fail, finish, lost, update-running
          t.phase = Phase::kRunning;
      }
      if (t.phase == Phase::kRunning) t.machine = e.machine_id;
      if (t.phase != Phase::kIgnored) t.fields.Fill(e);
      tasks.emplace(key, std::move(t));
      return true;
    }
    TaskState& t = it->second;
    if ((t.phase == Phase::kPending || t.phase == Phase::kRunning) && !t.fields.Complete()) t.fields.Fill(e);
    return true;
  });
  if (!st.ok()) return st;
  if (first) return absl::InvalidArgumentError(absl::StrCat(dir_or_file, ": no task events"));
  if (at_us < s.window_start_us) {
    return absl::OutOfRangeError(absl::StrCat(dir_or_file, ": time ", at_us, " is before the files' first event at ",
                                              s.window_start_us, " (their window is ", s.window_start_us, "-",
                                              s.window_end_us, " us)"));
  }
  std::vector<TraceTask> out;
  for (const auto& [key, t] : tasks) {
    if (t.phase != Phase::kPending && t.phase != Phase::kRunning) continue;
    if (t.fields.cpu < 0 || t.fields.memory < 0) {
      ++s.unknown_requests;
      continue;
    }
    TraceTask task;
    task.job_id = key.first;
    task.index = key.second;
    task.running = t.phase == Phase::kRunning;
    task.machine_id = task.running ? t.machine : -1;
    task.priority = std::max(0, t.fields.priority);
    task.scheduling_class = std::max(0, t.fields.scheduling_class);
    task.user = t.fields.user;
    task.cpu = t.fields.cpu;
    task.memory = t.fields.memory;
    task.disk = std::max(0.0, t.fields.disk);
    task.different_machines = t.fields.different_machines == 1;
    task.last_event_us = t.last_us;
    if (t.last_us < 0) ++s.inferred;
    ++(task.running ? s.running : s.pending);
    out.push_back(std::move(task));
  }
  std::sort(out.begin(), out.end(), [](const TraceTask& a, const TraceTask& b) {
    return a.job_id != b.job_id ? a.job_id < b.job_id : a.index < b.index;
  });
  s.live = static_cast<int64_t>(out.size());
  if (stats != nullptr) *stats = s;
  return out;
}

absl::StatusOr<std::vector<TraceEvent>> EventsBetween(const std::string& dir_or_file, int64_t t0_us, int64_t t1_us) {
  std::vector<TraceEvent> out;
  absl::Status st = ForEachEvent(dir_or_file, [&](const TraceEvent& e) {
    if (e.time_us >= t1_us) return false;
    if (e.time_us >= t0_us) out.push_back(e);
    return true;
  });
  if (!st.ok()) return st;
  return out;
}

}  // namespace herd::sim
