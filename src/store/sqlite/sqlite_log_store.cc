#include "store/sqlite/sqlite_log_store.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "base/status.h"
#include "base/errno_status.h"
#include "store/sqlite/sqlite_util.h"

namespace herd::store {
namespace {

constexpr int32_t kApplicationId = 0x48455244;  // "HERD" in the file header
constexpr int kBusyTimeoutMs = 10000;
// ReadLog reads this much per chunk before releasing the lock to call fn.
constexpr size_t kReadChunkRows = 1024;
constexpr size_t kReadChunkBytes = 16 << 20;

// Owns a file descriptor.
class UniqueFd {
 public:
  UniqueFd() = default;
  ~UniqueFd() {
    if (fd_ >= 0) ::close(fd_);
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  void reset(int fd) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }
  int get() const { return fd_; }

 private:
  int fd_ = -1;
};

absl::Status SyncParentDir(const std::string& path) {
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  const std::string dir = parent.empty() ? std::string(".") : parent.string();
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return ErrnoToStatus(errno, absl::StrCat("open directory ", dir));
  int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0) return ErrnoToStatus(errno, absl::StrCat("fsync directory ", dir));
  return absl::OkStatus();
}

}  // namespace

struct SqliteLogStore::Impl {
  std::string path;
  bool read_only = false;
  // Declaration order is destruction order reversed: statements are finalized
  // before the connection closes, and the writer's flock (on its own fd) is
  // released only after SQLite has closed the file.
  UniqueFd lock_fd;
  std::unique_ptr<sqlite3, DbCloser> db;
  absl::Mutex mu;

  // Cached statements for every operation (DESIGN: prepared once).
  Stmt begin_read, begin_write, commit, rollback;
  Stmt last_revision, compacted, first_snapshot;
  Stmt insert_log, read_log, delete_log;
  Stmt put_snapshot, read_snapshot, newest_snapshot_at, delete_snapshots, set_compacted;

  absl::Status Prepare(Stmt& s, const char* sql) {
    int rc = sqlite3_prepare_v3(db.get(), sql, -1, SQLITE_PREPARE_PERSISTENT, s.out(), nullptr);
    if (rc != SQLITE_OK) return SqliteError(db.get(), rc, absl::StrCat("prepare \"", sql, "\""));
    return absl::OkStatus();
  }

  absl::Status Exec(const char* sql) {
    int rc = sqlite3_exec(db.get(), sql, nullptr, nullptr, nullptr);
    if (rc != SQLITE_OK) return SqliteError(db.get(), rc, absl::StrCat("exec \"", sql, "\""));
    return absl::OkStatus();
  }

  // Runs a statement that returns no rows we need.
  absl::Status Run(const Stmt& s, absl::string_view what) {
    ScopedReset reset(s);
    int rc = sqlite3_step(s.get());
    if (rc != SQLITE_DONE && rc != SQLITE_ROW) return SqliteError(db.get(), rc, what);
    return absl::OkStatus();
  }

  // Runs a statement returning one integer (NULL reads as `if_null`).
  absl::StatusOr<int64_t> QueryInt(const Stmt& s, absl::string_view what, int64_t if_null = 0) {
    ScopedReset reset(s);
    int rc = sqlite3_step(s.get());
    if (rc != SQLITE_ROW) {
      if (rc == SQLITE_DONE) return if_null;
      return SqliteError(db.get(), rc, what);
    }
    if (sqlite3_column_type(s.get(), 0) == SQLITE_NULL) return if_null;
    return sqlite3_column_int64(s.get(), 0);
  }

  absl::StatusOr<int64_t> QueryIntSql(const char* sql) {
    Stmt s;
    int rc = sqlite3_prepare_v2(db.get(), sql, -1, s.out(), nullptr);
    if (rc != SQLITE_OK) return SqliteError(db.get(), rc, absl::StrCat("prepare \"", sql, "\""));
    return QueryInt(s, sql);
  }

  // Runs body() in a transaction (BEGIN IMMEDIATE when writing, so the write
  // lock is taken up front and the fencing read below cannot go stale).
  // Commits if body returns OK, else rolls back and returns its error.
  template <typename F>
  absl::Status InTx(bool write, F&& body) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    HERD_RETURN_IF_ERROR(Run(write ? begin_write : begin_read, "begin"));
    absl::Status st = body();
    if (st.ok()) {
      st = Run(commit, "commit");
      if (st.ok()) return st;
    }
    if (sqlite3_get_autocommit(db.get()) == 0) Run(rollback, "rollback").IgnoreError();
    return st;
  }

  absl::StatusOr<int64_t> Last() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    return QueryInt(last_revision, "read last revision");
  }
  absl::StatusOr<int64_t> Compacted() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    return QueryInt(compacted, "read compaction point");
  }
  absl::StatusOr<int64_t> First() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    HERD_ASSIGN_OR_RETURN(int64_t c, Compacted());
    if (c == 0) return 0;
    HERD_ASSIGN_OR_RETURN(int64_t first, QueryInt(first_snapshot, "read oldest snapshot", -1));
    if (first < 0) {
      return absl::DataLossError(
          absl::StrCat(path, ": log compacted through revision ", c, " but no snapshot is left"));
    }
    return first;
  }

  absl::Status CheckWritable() const {
    if (read_only) return absl::FailedPreconditionError(absl::StrCat(path, " is open read-only"));
    return absl::OkStatus();
  }

  absl::Status Configure();
  absl::Status CreateOrCheckSchema();
  absl::Status PrepareAll();
};

absl::Status SqliteLogStore::Impl::Configure() {
  sqlite3_extended_result_codes(db.get(), 1);
  sqlite3_busy_timeout(db.get(), kBusyTimeoutMs);
  if (read_only) return absl::OkStatus();
  // WAL: readers (checkpoint export) never block the writer; each commit is
  // one sequential write plus, with synchronous=FULL, one fsync of the WAL.
  Stmt wal;
  int rc = sqlite3_prepare_v2(db.get(), "PRAGMA journal_mode=WAL", -1, wal.out(), nullptr);
  if (rc != SQLITE_OK) return SqliteError(db.get(), rc, "prepare journal_mode");
  rc = sqlite3_step(wal.get());
  if (rc != SQLITE_ROW) return SqliteError(db.get(), rc, "set journal_mode=WAL");
  const char* mode = reinterpret_cast<const char*>(sqlite3_column_text(wal.get(), 0));
  if (mode == nullptr || std::strcmp(mode, "wal") != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, ": cannot switch to WAL mode (got ", mode ? mode : "null", ")"));
  }
  HERD_RETURN_IF_ERROR(Exec("PRAGMA synchronous=FULL"));
  // Truncate the WAL file back to 64 MiB after checkpoints.
  HERD_RETURN_IF_ERROR(Exec("PRAGMA journal_size_limit=67108864"));
  return absl::OkStatus();
}

absl::Status SqliteLogStore::Impl::CreateOrCheckSchema() {
  // The whole check (and creation) is one transaction: two processes racing
  // to create the schema serialize on the write lock.
  HERD_RETURN_IF_ERROR(Exec(read_only ? "BEGIN" : "BEGIN IMMEDIATE"));
  auto body = [&]() -> absl::Status {
    HERD_ASSIGN_OR_RETURN(int64_t app_id, QueryIntSql("PRAGMA application_id"));
    HERD_ASSIGN_OR_RETURN(int64_t tables, QueryIntSql("SELECT count(*) FROM sqlite_master"));
    if (tables == 0) {
      if (read_only) {
        return absl::FailedPreconditionError(absl::StrCat(path, " is not a Herd store (empty)"));
      }
      HERD_RETURN_IF_ERROR(
          Exec("CREATE TABLE meta(key TEXT PRIMARY KEY, value) WITHOUT ROWID;"
               "CREATE TABLE log(revision INTEGER PRIMARY KEY, data BLOB NOT NULL);"
               "CREATE TABLE snapshots(revision INTEGER PRIMARY KEY, data BLOB NOT NULL);"
               "PRAGMA application_id=1212502596;"));
      HERD_RETURN_IF_ERROR(Exec(absl::StrCat("INSERT INTO meta(key, value) VALUES"
                                             "('schema_version', ",
                                             kSchemaVersion,
                                             "),"
                                             "('compacted_through', 0)")
                                    .c_str()));
      return absl::OkStatus();
    }
    if (app_id != kApplicationId) {
      return absl::FailedPreconditionError(
          absl::StrCat(path, " is not a Herd store (application_id ", app_id, ")"));
    }
    HERD_ASSIGN_OR_RETURN(int64_t version,
                          QueryIntSql("SELECT value FROM meta WHERE key = 'schema_version'"));
    if (version > kSchemaVersion) {
      return absl::FailedPreconditionError(absl::StrCat(
          path, " has schema version ", version, "; this herd reads up to ", kSchemaVersion));
    }
    if (version < 1) {
      return absl::DataLossError(absl::StrCat(path, ": missing or bad schema_version in meta"));
    }
    return absl::OkStatus();
  };
  absl::Status st = body();
  if (st.ok()) return Exec("COMMIT");
  Exec("ROLLBACK").IgnoreError();
  return st;
}

absl::Status SqliteLogStore::Impl::PrepareAll() {
  HERD_RETURN_IF_ERROR(Prepare(begin_read, "BEGIN"));
  HERD_RETURN_IF_ERROR(Prepare(begin_write, "BEGIN IMMEDIATE"));
  HERD_RETURN_IF_ERROR(Prepare(commit, "COMMIT"));
  HERD_RETURN_IF_ERROR(Prepare(rollback, "ROLLBACK"));
  // After a compaction that emptied the log, the last revision is the newest
  // snapshot's (snapshots never lie past the log's end).
  HERD_RETURN_IF_ERROR(Prepare(last_revision,
                               "SELECT max(coalesce((SELECT max(revision) FROM log), 0),"
                               "           coalesce((SELECT max(revision) FROM snapshots), 0))"));
  HERD_RETURN_IF_ERROR(
      Prepare(compacted, "SELECT value FROM meta WHERE key = 'compacted_through'"));
  HERD_RETURN_IF_ERROR(Prepare(first_snapshot, "SELECT min(revision) FROM snapshots"));
  HERD_RETURN_IF_ERROR(Prepare(insert_log, "INSERT INTO log(revision, data) VALUES(?1, ?2)"));
  HERD_RETURN_IF_ERROR(
      Prepare(read_log,
              "SELECT revision, data FROM log WHERE revision >= ?1 AND revision <= ?2 "
              "ORDER BY revision"));
  HERD_RETURN_IF_ERROR(Prepare(delete_log, "DELETE FROM log WHERE revision <= ?1"));
  HERD_RETURN_IF_ERROR(
      Prepare(put_snapshot, "INSERT OR REPLACE INTO snapshots(revision, data) VALUES(?1, ?2)"));
  HERD_RETURN_IF_ERROR(Prepare(read_snapshot,
                               "SELECT revision, data FROM snapshots WHERE revision <= ?1 "
                               "ORDER BY revision DESC LIMIT 1"));
  HERD_RETURN_IF_ERROR(
      Prepare(newest_snapshot_at, "SELECT max(revision) FROM snapshots WHERE revision <= ?1"));
  HERD_RETURN_IF_ERROR(Prepare(delete_snapshots, "DELETE FROM snapshots WHERE revision < ?1"));
  HERD_RETURN_IF_ERROR(Prepare(set_compacted,
                               "UPDATE meta SET value = max(value, ?1) "
                               "WHERE key = 'compacted_through'"));
  return absl::OkStatus();
}

SqliteLogStore::SqliteLogStore(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
SqliteLogStore::~SqliteLogStore() = default;

absl::StatusOr<std::unique_ptr<SqliteLogStore>> SqliteLogStore::Open(const std::string& path) {
  return OpenImpl(path, /*read_only=*/false);
}

absl::StatusOr<std::unique_ptr<SqliteLogStore>> SqliteLogStore::OpenReadOnly(
    const std::string& path) {
  return OpenImpl(path, /*read_only=*/true);
}

absl::StatusOr<std::unique_ptr<SqliteLogStore>> SqliteLogStore::OpenImpl(const std::string& path,
                                                                         bool read_only) {
  auto impl = std::make_unique<Impl>();
  impl->path = path;
  impl->read_only = read_only;
  struct stat st;
  bool existed = ::stat(path.c_str(), &st) == 0;
  if (read_only && !existed) return absl::NotFoundError(absl::StrCat("no store at ", path));

  int flags = (read_only ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE) |
              SQLITE_OPEN_NOMUTEX;  // impl->mu serializes all use of the connection
  sqlite3* raw = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &raw, flags, nullptr);
  impl->db.reset(raw);
  if (rc != SQLITE_OK) return SqliteError(raw, rc, absl::StrCat("open ", path));

  if (!read_only) {
    // One writer per file. flock(2) locks are independent of the POSIX locks
    // SQLite uses, and this fd stays open until after SQLite closes.
    impl->lock_fd.reset(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (impl->lock_fd.get() < 0) return ErrnoToStatus(errno, absl::StrCat("open ", path));
    if (::flock(impl->lock_fd.get(), LOCK_EX | LOCK_NB) != 0) {
      if (errno == EWOULDBLOCK) {
        return absl::FailedPreconditionError(
            absl::StrCat(path, " is open for writing by another process"));
      }
      return ErrnoToStatus(errno, absl::StrCat("flock ", path));
    }
  }
  HERD_RETURN_IF_ERROR(impl->Configure());
  HERD_RETURN_IF_ERROR(impl->CreateOrCheckSchema());
  if (!existed) HERD_RETURN_IF_ERROR(SyncParentDir(path));
  HERD_RETURN_IF_ERROR(impl->PrepareAll());
  return std::unique_ptr<SqliteLogStore>(new SqliteLogStore(std::move(impl)));
}

const std::string& SqliteLogStore::path() const { return impl_->path; }
bool SqliteLogStore::read_only() const { return impl_->read_only; }

absl::Status SqliteLogStore::Append(absl::Span<const v1::Mutation> mutations) {
  HERD_RETURN_IF_ERROR(impl_->CheckWritable());
  if (mutations.empty()) return absl::OkStatus();
  const int64_t first = mutations.front().revision();
  std::vector<std::string> blobs(mutations.size());
  for (size_t i = 0; i < mutations.size(); ++i) {
    const int64_t expect = first + static_cast<int64_t>(i);
    if (mutations[i].revision() != expect) {
      return absl::FailedPreconditionError(absl::StrCat(
          "append out of order: revision ", mutations[i].revision(), ", expected ", expect));
    }
    if (!mutations[i].SerializeToString(&blobs[i])) {
      return absl::InvalidArgumentError(
          absl::StrCat("cannot serialize mutation at revision ", expect));
    }
  }
  Impl& d = *impl_;
  absl::MutexLock lock(&d.mu);
  return d.InTx(/*write=*/true, [&]() -> absl::Status {
    // The fence: read under the write lock, so nothing can slip in between.
    HERD_ASSIGN_OR_RETURN(int64_t last, d.Last());
    if (first != last + 1) {
      return absl::FailedPreconditionError(
          absl::StrCat("append out of order: revision ", first, ", expected ", last + 1));
    }
    for (size_t i = 0; i < blobs.size(); ++i) {
      ScopedReset reset(d.insert_log);
      sqlite3_bind_int64(d.insert_log.get(), 1, first + static_cast<int64_t>(i));
      sqlite3_bind_blob64(d.insert_log.get(), 2, blobs[i].data(), blobs[i].size(), SQLITE_STATIC);
      int rc = sqlite3_step(d.insert_log.get());
      if (rc != SQLITE_DONE) {
        return SqliteError(d.db.get(), rc,
                           absl::StrCat("append revision ", first + static_cast<int64_t>(i)));
      }
    }
    return absl::OkStatus();
  });
}

absl::StatusOr<int64_t> SqliteLogStore::LastRevision() {
  absl::MutexLock lock(&impl_->mu);
  return impl_->Last();
}

absl::StatusOr<int64_t> SqliteLogStore::FirstRevision() {
  Impl& d = *impl_;
  absl::MutexLock lock(&d.mu);
  int64_t first = 0;
  HERD_RETURN_IF_ERROR(d.InTx(/*write=*/false, [&]() -> absl::Status {
    HERD_ASSIGN_OR_RETURN(first, d.First());
    return absl::OkStatus();
  }));
  return first;
}

absl::Status SqliteLogStore::WriteSnapshot(const v1::CellSnapshot& snapshot) {
  HERD_RETURN_IF_ERROR(impl_->CheckWritable());
  std::string blob;
  if (!snapshot.SerializeToString(&blob)) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot serialize snapshot at revision ", snapshot.revision()));
  }
  Impl& d = *impl_;
  absl::MutexLock lock(&d.mu);
  return d.InTx(/*write=*/true, [&]() -> absl::Status {
    HERD_ASSIGN_OR_RETURN(int64_t first, d.First());
    HERD_ASSIGN_OR_RETURN(int64_t last, d.Last());
    if (snapshot.revision() > last || snapshot.revision() < first) {
      return absl::FailedPreconditionError(
          absl::StrCat("snapshot at revision ", snapshot.revision(), " is outside the log [", first,
                       ", ", last, "]"));
    }
    ScopedReset reset(d.put_snapshot);
    sqlite3_bind_int64(d.put_snapshot.get(), 1, snapshot.revision());
    sqlite3_bind_blob64(d.put_snapshot.get(), 2, blob.data(), blob.size(), SQLITE_STATIC);
    int rc = sqlite3_step(d.put_snapshot.get());
    if (rc != SQLITE_DONE) {
      return SqliteError(d.db.get(), rc,
                         absl::StrCat("write snapshot at revision ", snapshot.revision()));
    }
    return absl::OkStatus();
  });
}

absl::StatusOr<std::optional<v1::CellSnapshot>> SqliteLogStore::ReadSnapshot(int64_t max_revision) {
  Impl& d = *impl_;
  absl::MutexLock lock(&d.mu);
  ScopedReset reset(d.read_snapshot);
  sqlite3_bind_int64(d.read_snapshot.get(), 1, max_revision);
  int rc = sqlite3_step(d.read_snapshot.get());
  if (rc == SQLITE_DONE) return std::optional<v1::CellSnapshot>();
  if (rc != SQLITE_ROW) return SqliteError(d.db.get(), rc, "read snapshot");
  const int64_t revision = sqlite3_column_int64(d.read_snapshot.get(), 0);
  const void* data = sqlite3_column_blob(d.read_snapshot.get(), 1);
  const int size = sqlite3_column_bytes(d.read_snapshot.get(), 1);
  std::optional<v1::CellSnapshot> snapshot(std::in_place);
  if (!snapshot->ParseFromArray(data, size)) {
    return absl::DataLossError(absl::StrCat(d.path, ": snapshot at revision ", revision,
                                            " is corrupt (unparseable CellSnapshot)"));
  }
  if (snapshot->revision() != revision) {
    return absl::DataLossError(absl::StrCat(d.path, ": snapshot row ", revision,
                                            " holds a snapshot of revision ",
                                            snapshot->revision()));
  }
  return snapshot;
}

absl::Status SqliteLogStore::ReadLog(int64_t from, int64_t to,
                                     const std::function<absl::Status(const v1::Mutation&)>& fn) {
  Impl& d = *impl_;
  int64_t next = std::max<int64_t>(from, 1);
  std::vector<v1::Mutation> chunk;
  while (next <= to) {
    chunk.clear();
    bool done = false;
    {
      absl::MutexLock lock(&d.mu);
      // One read transaction per chunk: the compaction point and the rows
      // come from the same snapshot of the file.
      HERD_RETURN_IF_ERROR(d.InTx(/*write=*/false, [&]() -> absl::Status {
        HERD_ASSIGN_OR_RETURN(int64_t compacted, d.Compacted());
        if (next <= compacted) {
          return absl::OutOfRangeError(absl::StrCat(
              "revision ", next, " was compacted; the log now starts after ", compacted));
        }
        ScopedReset reset(d.read_log);
        sqlite3_bind_int64(d.read_log.get(), 1, next);
        sqlite3_bind_int64(d.read_log.get(), 2, to);
        size_t bytes = 0;
        while (chunk.size() < kReadChunkRows && bytes < kReadChunkBytes) {
          int rc = sqlite3_step(d.read_log.get());
          if (rc == SQLITE_DONE) {
            done = true;
            break;
          }
          if (rc != SQLITE_ROW) return SqliteError(d.db.get(), rc, "read log");
          const int64_t revision = sqlite3_column_int64(d.read_log.get(), 0);
          const int64_t expect = next + static_cast<int64_t>(chunk.size());
          if (revision != expect) {
            return absl::DataLossError(absl::StrCat(d.path, ": revision ", expect,
                                                    " is missing from the log (next is ", revision,
                                                    ")"));
          }
          const void* data = sqlite3_column_blob(d.read_log.get(), 1);
          const int size = sqlite3_column_bytes(d.read_log.get(), 1);
          bytes += static_cast<size_t>(size);
          v1::Mutation& m = chunk.emplace_back();
          if (!m.ParseFromArray(data, size)) {
            return absl::DataLossError(absl::StrCat(d.path, ": log entry at revision ", revision,
                                                    " is corrupt (unparseable Mutation)"));
          }
          if (m.revision() != revision) {
            return absl::DataLossError(absl::StrCat(
                d.path, ": log row ", revision, " holds a mutation of revision ", m.revision()));
          }
        }
        return absl::OkStatus();
      }));
    }
    for (const v1::Mutation& m : chunk) HERD_RETURN_IF_ERROR(fn(m));
    if (done || chunk.empty()) break;
    next = chunk.back().revision() + 1;
  }
  return absl::OkStatus();
}

absl::Status SqliteLogStore::Compact(int64_t revision) {
  HERD_RETURN_IF_ERROR(impl_->CheckWritable());
  Impl& d = *impl_;
  absl::MutexLock lock(&d.mu);
  return d.InTx(/*write=*/true, [&]() -> absl::Status {
    int64_t keep = -1;
    {
      ScopedReset reset(d.newest_snapshot_at);
      sqlite3_bind_int64(d.newest_snapshot_at.get(), 1, revision);
      HERD_ASSIGN_OR_RETURN(keep, d.QueryInt(d.newest_snapshot_at, "find compaction point", -1));
    }
    if (keep < 0) return absl::OkStatus();  // no snapshot at or before `revision`
    {
      ScopedReset reset(d.delete_snapshots);
      sqlite3_bind_int64(d.delete_snapshots.get(), 1, keep);
      HERD_RETURN_IF_ERROR(d.Run(d.delete_snapshots, "compact snapshots"));
    }
    {
      ScopedReset reset(d.delete_log);
      sqlite3_bind_int64(d.delete_log.get(), 1, keep);
      HERD_RETURN_IF_ERROR(d.Run(d.delete_log, "compact log"));
    }
    ScopedReset reset(d.set_compacted);
    sqlite3_bind_int64(d.set_compacted.get(), 1, keep);
    return d.Run(d.set_compacted, "record compaction point");
  });
}

}  // namespace herd::store
