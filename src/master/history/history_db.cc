#include "master/history/history_db.h"

#include <sqlite3.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdio>
#include <initializer_list>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "base/status.h"
#include "store/sqlite/sqlite_util.h"

namespace herd::master::history {
namespace {

using store::DbCloser;
using store::ScopedReset;
using store::SqliteError;
using store::Stmt;

constexpr int32_t kApplicationId = 0x48495354;  // "HIST"
constexpr int kSchemaVersion = 1;

constexpr char kSchema[] = R"sql(
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS jobs (
  revision INTEGER NOT NULL, time_ms INTEGER NOT NULL, job TEXT NOT NULL, user TEXT NOT NULL,
  version INTEGER NOT NULL, event TEXT NOT NULL, actor TEXT NOT NULL, reason TEXT NOT NULL,
  spec TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS jobs_by_job ON jobs (job, time_ms);
CREATE INDEX IF NOT EXISTS jobs_by_time ON jobs (time_ms);
CREATE TABLE IF NOT EXISTS task_events (
  revision INTEGER NOT NULL, time_ms INTEGER NOT NULL, job TEXT NOT NULL, user TEXT NOT NULL,
  task_index INTEGER NOT NULL, incarnation INTEGER NOT NULL, event TEXT NOT NULL,
  machine TEXT NOT NULL, phase TEXT NOT NULL, health TEXT NOT NULL, restarts INTEGER NOT NULL,
  exit_code INTEGER NOT NULL, exit_signal INTEGER NOT NULL, oom_killed INTEGER NOT NULL,
  reason TEXT NOT NULL, actor TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS task_events_by_time ON task_events (time_ms);
CREATE INDEX IF NOT EXISTS task_events_by_task ON task_events (job, task_index, time_ms);
CREATE TABLE IF NOT EXISTS machine_events (
  revision INTEGER NOT NULL, time_ms INTEGER NOT NULL, machine TEXT NOT NULL, event TEXT NOT NULL,
  reason TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS machine_events_by_time ON machine_events (time_ms);
CREATE TABLE IF NOT EXISTS usage (
  time_ms INTEGER NOT NULL, period_ms INTEGER NOT NULL, job TEXT NOT NULL, user TEXT NOT NULL,
  task_index INTEGER NOT NULL, machine TEXT NOT NULL, cpu_millis REAL NOT NULL,
  cpu_millis_max INTEGER NOT NULL, memory_bytes REAL NOT NULL, memory_bytes_max INTEGER NOT NULL,
  disk_bytes INTEGER NOT NULL, samples INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS usage_by_time ON usage (time_ms);
CREATE INDEX IF NOT EXISTS usage_by_task ON usage (job, task_index, time_ms);
CREATE TABLE IF NOT EXISTS machine_usage (
  time_ms INTEGER NOT NULL, period_ms INTEGER NOT NULL, machine TEXT NOT NULL,
  cpu_millis REAL NOT NULL, cpu_millis_max INTEGER NOT NULL, memory_bytes REAL NOT NULL,
  memory_bytes_max INTEGER NOT NULL, samples INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS machine_usage_by_time ON machine_usage (time_ms);
CREATE INDEX IF NOT EXISTS machine_usage_by_machine ON machine_usage (machine, time_ms);
)sql";

// Rolls a usage table's rows shorter than the rollup period and older than
// ?2 into rows of ?1 ms: time-weighted averages, so CPU-seconds and
// byte-seconds are the same before and after.
constexpr char kRollupUsage[] = R"sql(
INSERT INTO usage (time_ms, period_ms, job, user, task_index, machine, cpu_millis, cpu_millis_max,
                   memory_bytes, memory_bytes_max, disk_bytes, samples)
SELECT (time_ms / ?1) * ?1, ?1, job, user, task_index, machine, SUM(cpu_millis * period_ms) / ?1,
       MAX(cpu_millis_max), SUM(memory_bytes * period_ms) / ?1, MAX(memory_bytes_max), MAX(disk_bytes),
       SUM(samples)
FROM usage WHERE period_ms < ?1 AND time_ms < ?2
GROUP BY (time_ms / ?1), job, user, task_index, machine)sql";
constexpr char kRollupMachineUsage[] = R"sql(
INSERT INTO machine_usage (time_ms, period_ms, machine, cpu_millis, cpu_millis_max, memory_bytes,
                           memory_bytes_max, samples)
SELECT (time_ms / ?1) * ?1, ?1, machine, SUM(cpu_millis * period_ms) / ?1, MAX(cpu_millis_max),
       SUM(memory_bytes * period_ms) / ?1, MAX(memory_bytes_max), SUM(samples)
FROM machine_usage WHERE period_ms < ?1 AND time_ms < ?2
GROUP BY (time_ms / ?1), machine)sql";

void BindText(sqlite3_stmt* s, int i, const std::string& v) {
  sqlite3_bind_text(s, i, v.data(), static_cast<int>(v.size()), SQLITE_STATIC);
}

// The query connection's gate: reading only.
int ReadOnlyAuthorizer(void*, int action, const char*, const char*, const char*, const char*) {
  switch (action) {
    case SQLITE_SELECT:
    case SQLITE_READ:
    case SQLITE_FUNCTION:
    case SQLITE_RECURSIVE:
      return SQLITE_OK;
    default:
      return SQLITE_DENY;
  }
}

struct Deadline {
  absl::Time until;
};

int PastDeadline(void* arg) { return absl::Now() > static_cast<Deadline*>(arg)->until ? 1 : 0; }

// True if `rest` (what follows the first statement) is only spaces,
// semicolons and comments.
bool OnlyTrailing(absl::string_view rest) {
  size_t i = 0;
  while (i < rest.size()) {
    const char c = rest[i];
    if (std::isspace(static_cast<unsigned char>(c)) || c == ';') {
      ++i;
    } else if (rest.substr(i, 2) == "--") {
      const size_t nl = rest.find('\n', i);
      i = nl == absl::string_view::npos ? rest.size() : nl + 1;
    } else if (rest.substr(i, 2) == "/*") {
      const size_t end = rest.find("*/", i + 2);
      i = end == absl::string_view::npos ? rest.size() : end + 2;
    } else {
      return false;
    }
  }
  return true;
}

// True if `s` is well-formed UTF-8 (no overlong forms, surrogates or code
// points above U+10FFFF).
bool ValidUtf8(absl::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    int len = 0;
    uint32_t cp = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      len = 2;
      cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3;
      cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (i + len > s.size()) return false;
    for (int k = 1; k < len; ++k) {
      const auto cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3F);
    }
    static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMin[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += len;
  }
  return true;
}

std::string Hex(const void* data, int n) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * n);
  const auto* p = static_cast<const unsigned char*>(data);
  for (int i = 0; i < n; ++i) {
    out.push_back(kDigits[p[i] >> 4]);
    out.push_back(kDigits[p[i] & 15]);
  }
  return out;
}

}  // namespace

struct HistoryDb::Impl {
  std::unique_ptr<sqlite3, DbCloser> db;
  absl::Mutex mu;  // the writer connection
  std::atomic<int64_t> recorded{0};
  Stmt begin, commit, rollback, set_revision;
  Stmt insert_job, insert_event, insert_machine_event, insert_usage, insert_machine_usage;

  absl::Status Exec(const char* sql) {
    int rc = sqlite3_exec(db.get(), sql, nullptr, nullptr, nullptr);
    if (rc != SQLITE_OK) return SqliteError(db.get(), rc, "exec");
    return absl::OkStatus();
  }
  absl::Status Prepare(Stmt& s, const char* sql) {
    int rc = sqlite3_prepare_v3(db.get(), sql, -1, SQLITE_PREPARE_PERSISTENT, s.out(), nullptr);
    if (rc != SQLITE_OK) return SqliteError(db.get(), rc, absl::StrCat("prepare \"", sql, "\""));
    return absl::OkStatus();
  }
  absl::Status Step(const Stmt& s, absl::string_view what) {
    ScopedReset reset(s);
    int rc = sqlite3_step(s.get());
    if (rc != SQLITE_DONE && rc != SQLITE_ROW) return SqliteError(db.get(), rc, what);
    return absl::OkStatus();
  }
  absl::Status WriteLocked(const Batch& b);
  absl::Status InsertUsage(const UsageRow& u, bool machine);
};

HistoryDb::HistoryDb(Options options, std::unique_ptr<Impl> impl)
    : options_(std::move(options)), impl_(std::move(impl)) {}
HistoryDb::~HistoryDb() = default;

absl::StatusOr<std::unique_ptr<HistoryDb>> HistoryDb::Open(const Options& options) {
  if (options.path.empty()) return absl::InvalidArgumentError("history: no database path");
  if (options.sample_interval_ms < 1000 || options.rollup_ms < options.sample_interval_ms ||
      options.raw_keep_ms < options.rollup_ms || options.retention_ms < options.raw_keep_ms) {
    return absl::InvalidArgumentError(absl::StrCat(
        "history: need 1s <= sample interval (", options.sample_interval_ms, " ms) <= rollup period (",
        options.rollup_ms, " ms) <= raw keep (", options.raw_keep_ms, " ms) <= retention (", options.retention_ms,
        " ms)"));
  }
  auto impl = std::make_unique<Impl>();
  sqlite3* raw = nullptr;
  int rc = sqlite3_open_v2(options.path.c_str(), &raw, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
                           nullptr);
  impl->db.reset(raw);
  if (rc != SQLITE_OK) return SqliteError(raw, rc, absl::StrCat("open ", options.path));
  sqlite3_busy_timeout(raw, 10'000);
  {
    Stmt s;
    rc = sqlite3_prepare_v2(raw, "PRAGMA application_id", -1, s.out(), nullptr);
    if (rc != SQLITE_OK) return SqliteError(raw, rc, absl::StrCat("open ", options.path));
    const int32_t id = sqlite3_step(s.get()) == SQLITE_ROW ? sqlite3_column_int(s.get(), 0) : 0;
    if (id != 0 && id != kApplicationId) {
      return absl::FailedPreconditionError(
          absl::StrCat("history: ", options.path, " is a SQLite file of something else (application_id ", id, ")"));
    }
  }
  // Derived data: a power cut may lose the last batches, which the
  // Recorder writes again from the cell's log (the recorded revision is
  // committed with them).
  HERD_RETURN_IF_ERROR(impl->Exec("PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"));
  HERD_RETURN_IF_ERROR(impl->Exec(kSchema));
  HERD_RETURN_IF_ERROR(impl->Exec(absl::StrCat("PRAGMA application_id=", kApplicationId,
                                               "; PRAGMA user_version=", kSchemaVersion, ";")
                                      .c_str()));
  HERD_RETURN_IF_ERROR(impl->Prepare(impl->begin, "BEGIN IMMEDIATE"));
  HERD_RETURN_IF_ERROR(impl->Prepare(impl->commit, "COMMIT"));
  HERD_RETURN_IF_ERROR(impl->Prepare(impl->rollback, "ROLLBACK"));
  HERD_RETURN_IF_ERROR(
      impl->Prepare(impl->set_revision, "INSERT OR REPLACE INTO meta (key, value) VALUES ('revision', ?1)"));
  HERD_RETURN_IF_ERROR(impl->Prepare(impl->insert_job,
                                     "INSERT INTO jobs (revision, time_ms, job, user, version, event, actor, reason, "
                                     "spec) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)"));
  HERD_RETURN_IF_ERROR(impl->Prepare(
      impl->insert_event,
      "INSERT INTO task_events (revision, time_ms, job, user, task_index, incarnation, event, machine, phase, "
      "health, restarts, exit_code, exit_signal, oom_killed, reason, actor) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, "
      "?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)"));
  HERD_RETURN_IF_ERROR(impl->Prepare(
      impl->insert_machine_event,
      "INSERT INTO machine_events (revision, time_ms, machine, event, reason) VALUES (?1, ?2, ?3, ?4, ?5)"));
  HERD_RETURN_IF_ERROR(impl->Prepare(
      impl->insert_usage,
      "INSERT INTO usage (time_ms, period_ms, job, user, task_index, machine, cpu_millis, cpu_millis_max, "
      "memory_bytes, memory_bytes_max, disk_bytes, samples) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, "
      "?12)"));
  HERD_RETURN_IF_ERROR(impl->Prepare(
      impl->insert_machine_usage,
      "INSERT INTO machine_usage (time_ms, period_ms, machine, cpu_millis, cpu_millis_max, memory_bytes, "
      "memory_bytes_max, samples) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)"));
  {
    Stmt s;
    rc = sqlite3_prepare_v2(raw, "SELECT value FROM meta WHERE key = 'revision'", -1, s.out(), nullptr);
    if (rc != SQLITE_OK) return SqliteError(raw, rc, "read the recorded revision");
    if (sqlite3_step(s.get()) == SQLITE_ROW) impl->recorded.store(sqlite3_column_int64(s.get(), 0));
  }
  return std::unique_ptr<HistoryDb>(new HistoryDb(options, std::move(impl)));
}

int64_t HistoryDb::recorded_revision() const { return impl_->recorded.load(std::memory_order_acquire); }

absl::Status HistoryDb::Impl::InsertUsage(const UsageRow& u, bool machine) {
  if (machine) {
    sqlite3_stmt* s = insert_machine_usage.get();
    sqlite3_bind_int64(s, 1, u.time_ms);
    sqlite3_bind_int64(s, 2, u.period_ms);
    BindText(s, 3, u.machine);
    sqlite3_bind_double(s, 4, u.cpu_millis);
    sqlite3_bind_int64(s, 5, u.cpu_millis_max);
    sqlite3_bind_double(s, 6, u.memory_bytes);
    sqlite3_bind_int64(s, 7, u.memory_bytes_max);
    sqlite3_bind_int(s, 8, u.samples);
    return Step(insert_machine_usage, "insert machine usage");
  }
  sqlite3_stmt* s = insert_usage.get();
  sqlite3_bind_int64(s, 1, u.time_ms);
  sqlite3_bind_int64(s, 2, u.period_ms);
  BindText(s, 3, u.job);
  BindText(s, 4, u.user);
  sqlite3_bind_int(s, 5, u.task_index);
  BindText(s, 6, u.machine);
  sqlite3_bind_double(s, 7, u.cpu_millis);
  sqlite3_bind_int64(s, 8, u.cpu_millis_max);
  sqlite3_bind_double(s, 9, u.memory_bytes);
  sqlite3_bind_int64(s, 10, u.memory_bytes_max);
  sqlite3_bind_int64(s, 11, u.disk_bytes);
  sqlite3_bind_int(s, 12, u.samples);
  return Step(insert_usage, "insert usage");
}

absl::Status HistoryDb::Impl::WriteLocked(const Batch& b) {
  for (const JobRow& j : b.jobs) {
    sqlite3_stmt* s = insert_job.get();
    sqlite3_bind_int64(s, 1, j.revision);
    sqlite3_bind_int64(s, 2, j.time_ms);
    BindText(s, 3, j.job);
    BindText(s, 4, j.user);
    sqlite3_bind_int64(s, 5, j.version);
    BindText(s, 6, j.event);
    BindText(s, 7, j.actor);
    BindText(s, 8, j.reason);
    BindText(s, 9, j.spec_json);
    HERD_RETURN_IF_ERROR(Step(insert_job, "insert job"));
  }
  for (const TaskEventRow& e : b.task_events) {
    sqlite3_stmt* s = insert_event.get();
    sqlite3_bind_int64(s, 1, e.revision);
    sqlite3_bind_int64(s, 2, e.time_ms);
    BindText(s, 3, e.job);
    BindText(s, 4, e.user);
    sqlite3_bind_int(s, 5, e.task_index);
    sqlite3_bind_int64(s, 6, e.incarnation);
    BindText(s, 7, e.event);
    BindText(s, 8, e.machine);
    BindText(s, 9, e.phase);
    BindText(s, 10, e.health);
    sqlite3_bind_int(s, 11, e.restarts);
    sqlite3_bind_int(s, 12, e.exit_code);
    sqlite3_bind_int(s, 13, e.exit_signal);
    sqlite3_bind_int(s, 14, e.oom_killed ? 1 : 0);
    BindText(s, 15, e.reason);
    BindText(s, 16, e.actor);
    HERD_RETURN_IF_ERROR(Step(insert_event, "insert task event"));
  }
  for (const MachineEventRow& e : b.machine_events) {
    sqlite3_stmt* s = insert_machine_event.get();
    sqlite3_bind_int64(s, 1, e.revision);
    sqlite3_bind_int64(s, 2, e.time_ms);
    BindText(s, 3, e.machine);
    BindText(s, 4, e.event);
    BindText(s, 5, e.reason);
    HERD_RETURN_IF_ERROR(Step(insert_machine_event, "insert machine event"));
  }
  for (const UsageRow& u : b.usage) HERD_RETURN_IF_ERROR(InsertUsage(u, false));
  for (const UsageRow& u : b.machine_usage) HERD_RETURN_IF_ERROR(InsertUsage(u, true));
  if (b.revision > 0) {
    sqlite3_bind_int64(set_revision.get(), 1, b.revision);
    HERD_RETURN_IF_ERROR(Step(set_revision, "set the recorded revision"));
  }
  return absl::OkStatus();
}

absl::Status HistoryDb::Write(const Batch& batch) {
  if (batch.empty()) return absl::OkStatus();
  absl::MutexLock l(&impl_->mu);
  HERD_RETURN_IF_ERROR(impl_->Step(impl_->begin, "begin"));
  absl::Status st = impl_->WriteLocked(batch);
  if (st.ok()) st = impl_->Step(impl_->commit, "commit");
  if (!st.ok()) {
    (void)impl_->Step(impl_->rollback, "rollback");
    return st;
  }
  if (batch.revision > 0) impl_->recorded.store(batch.revision, std::memory_order_release);
  return absl::OkStatus();
}

absl::Status HistoryDb::Maintain(int64_t now_ms) {
  absl::MutexLock l(&impl_->mu);
  sqlite3* db = impl_->db.get();
  const int64_t period = options_.rollup_ms;
  // Whole rollup periods only, so no period is rolled up twice.
  const int64_t cut = std::max<int64_t>(0, (now_ms - options_.raw_keep_ms) / period * period);
  const int64_t expired = now_ms - options_.retention_ms;
  HERD_RETURN_IF_ERROR(impl_->Step(impl_->begin, "begin"));
  auto run = [&](const std::string& sql, std::initializer_list<int64_t> args) -> absl::Status {
    Stmt s;
    int rc = sqlite3_prepare_v2(db, sql.c_str(), -1, s.out(), nullptr);
    if (rc != SQLITE_OK) return SqliteError(db, rc, "prepare maintenance");
    int i = 0;
    for (int64_t a : args) sqlite3_bind_int64(s.get(), ++i, a);
    rc = sqlite3_step(s.get());
    if (rc != SQLITE_DONE) return SqliteError(db, rc, "maintenance");
    return absl::OkStatus();
  };
  absl::Status st = run(kRollupUsage, {period, cut});
  if (st.ok()) st = run("DELETE FROM usage WHERE period_ms < ?1 AND time_ms < ?2", {period, cut});
  if (st.ok()) st = run(kRollupMachineUsage, {period, cut});
  if (st.ok()) st = run("DELETE FROM machine_usage WHERE period_ms < ?1 AND time_ms < ?2", {period, cut});
  for (const char* table : {"jobs", "task_events", "machine_events", "usage", "machine_usage"}) {
    if (st.ok()) st = run(absl::StrCat("DELETE FROM ", table, " WHERE time_ms < ?1"), {expired});
  }
  if (st.ok()) st = impl_->Step(impl_->commit, "commit");
  if (!st.ok()) (void)impl_->Step(impl_->rollback, "rollback");
  return st;
}

absl::StatusOr<v1::QueryHistoryResponse> HistoryDb::Query(absl::string_view sql, const QueryLimits& limits) const {
  if (sql.size() > kMaxSqlBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("query: the statement is ", sql.size(), " bytes; the limit is ", kMaxSqlBytes));
  }
  sqlite3* raw = nullptr;
  int rc = sqlite3_open_v2(options_.path.c_str(), &raw, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, nullptr);
  std::unique_ptr<sqlite3, DbCloser> db(raw);
  if (rc != SQLITE_OK) return SqliteError(raw, rc, "open the history for reading");
  sqlite3_busy_timeout(raw, 5'000);
  // No extensions, no writable schema tricks, no attaching other files,
  // strings and blobs of at most 1 MiB (zeroblob(1e9) would otherwise take
  // a gigabyte), bounded time.
  sqlite3_db_config(raw, SQLITE_DBCONFIG_ENABLE_LOAD_EXTENSION, 0, nullptr);
  sqlite3_db_config(raw, SQLITE_DBCONFIG_DEFENSIVE, 1, nullptr);
  sqlite3_limit(raw, SQLITE_LIMIT_ATTACHED, 0);
  sqlite3_limit(raw, SQLITE_LIMIT_LENGTH, kMaxValueBytes);
  sqlite3_limit(raw, SQLITE_LIMIT_COLUMN, kMaxColumns);
  sqlite3_limit(raw, SQLITE_LIMIT_LIKE_PATTERN_LENGTH, 100);
  sqlite3_limit(raw, SQLITE_LIMIT_SQL_LENGTH, static_cast<int>(kMaxSqlBytes));
  sqlite3_set_authorizer(raw, ReadOnlyAuthorizer, nullptr);
  Deadline deadline{absl::Now() + limits.timeout};
  sqlite3_progress_handler(raw, 10'000, PastDeadline, &deadline);

  Stmt stmt;
  const char* tail = nullptr;
  rc = sqlite3_prepare_v2(raw, sql.data(), static_cast<int>(sql.size()), stmt.out(), &tail);
  if (rc == SQLITE_AUTH) {
    return absl::PermissionDeniedError(
        absl::StrCat("query: herd query only reads (SELECT or WITH ... SELECT): ", sqlite3_errmsg(raw)));
  }
  if (rc == SQLITE_INTERRUPT) return absl::DeadlineExceededError("query: ran out of time while preparing");
  if (rc != SQLITE_OK) return absl::InvalidArgumentError(absl::StrCat("query: ", sqlite3_errmsg(raw)));
  if (stmt.get() == nullptr) return absl::InvalidArgumentError("query: no statement");
  if (tail != nullptr && !OnlyTrailing(absl::string_view(tail, sql.data() + sql.size() - tail))) {
    return absl::InvalidArgumentError("query: one statement at a time");
  }
  if (!sqlite3_stmt_readonly(stmt.get())) {
    return absl::PermissionDeniedError("query: herd query only reads (SELECT or WITH ... SELECT)");
  }
  v1::QueryHistoryResponse out;
  const int columns = sqlite3_column_count(stmt.get());
  for (int c = 0; c < columns; ++c) out.add_columns(sqlite3_column_name(stmt.get(), c));
  // The answer's size, counted before each value is copied (a value costs
  // its bytes and about kValueOverhead of heap), so no row can take more
  // than the budget: a row of 100 one-MiB columns would otherwise be copied
  // whole before the check.
  int64_t bytes = 0;
  bool full = false;
  while (!full) {
    rc = sqlite3_step(stmt.get());
    if (rc == SQLITE_DONE) break;
    if (rc != SQLITE_ROW) {
      if ((rc & 0xff) == SQLITE_INTERRUPT) {
        return absl::DeadlineExceededError(absl::StrCat("query: still running after ", absl::FormatDuration(limits.timeout),
                                                        "; narrow it (a time range, LIMIT)"));
      }
      return absl::InvalidArgumentError(absl::StrCat("query: ", sqlite3_errmsg(raw)));
    }
    if (out.rows_size() >= limits.max_rows) {
      out.set_truncated(true);
      break;
    }
    v1::QueryRow* row = out.add_rows();
    for (int c = 0; c < columns && !full; ++c) {
      const int type = sqlite3_column_type(stmt.get(), c);
      const int64_t n = type == SQLITE_TEXT || type == SQLITE_BLOB ? sqlite3_column_bytes(stmt.get(), c) : 8;
      const int64_t cost = kValueOverhead + (type == SQLITE_BLOB ? 2 * n : n);
      if (bytes + cost > limits.max_bytes) {
        full = true;
        break;
      }
      bytes += cost;
      v1::QueryValue* v = row->add_values();
      switch (type) {
        case SQLITE_INTEGER:
          v->set_integer(sqlite3_column_int64(stmt.get(), c));
          break;
        case SQLITE_FLOAT:
          v->set_real(sqlite3_column_double(stmt.get(), c));
          break;
        case SQLITE_TEXT: {
          const auto* text = reinterpret_cast<const char*>(sqlite3_column_text(stmt.get(), c));
          const absl::string_view s(text, static_cast<size_t>(n));
          // Protobuf strings must be UTF-8: other bytes go as hex.
          if (ValidUtf8(s)) {
            v->set_text(std::string(s));
          } else {
            v->set_hex(Hex(text, static_cast<int>(n)));
          }
          break;
        }
        case SQLITE_BLOB:
          v->set_hex(Hex(sqlite3_column_blob(stmt.get(), c), static_cast<int>(n)));
          break;
        default:
          v->set_is_null(true);
      }
    }
    if (full) {
      out.mutable_rows()->RemoveLast();  // no half rows
      out.set_truncated(true);
    }
  }
  out.set_recorded_revision(recorded_revision());
  return out;
}

}  // namespace herd::master::history
