// Small owners and error mapping for SQLite, shared by the embedded store
// and the master's history database.
#pragma once

#include <sqlite3.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace herd::store {

// An absl::Status for a SQLite result code: busy and I/O errors are
// UNAVAILABLE, corruption DATA_LOSS, a full disk RESOURCE_EXHAUSTED,
// read-only and constraint failures FAILED_PRECONDITION.
inline absl::Status SqliteError(sqlite3* db, int rc, absl::string_view what) {
  std::string msg =
      absl::StrCat("sqlite ", what, ": ", db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc),
                   " (code ", rc, ")");
  switch (rc & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
    case SQLITE_IOERR:
    case SQLITE_CANTOPEN:
    case SQLITE_PROTOCOL:
      return absl::UnavailableError(msg);
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
      return absl::DataLossError(msg);
    case SQLITE_FULL:
      return absl::ResourceExhaustedError(msg);
    case SQLITE_READONLY:
    case SQLITE_CONSTRAINT:
      return absl::FailedPreconditionError(msg);
    case SQLITE_PERM:
    case SQLITE_AUTH:
      return absl::PermissionDeniedError(msg);
    default:
      return absl::InternalError(msg);
  }
}

// Owns a prepared statement.
class Stmt {
 public:
  Stmt() = default;
  ~Stmt() { sqlite3_finalize(stmt_); }
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;
  sqlite3_stmt* get() const { return stmt_; }
  sqlite3_stmt** out() { return &stmt_; }

 private:
  sqlite3_stmt* stmt_ = nullptr;
};

// Resets a cached statement and clears its bindings on scope exit, so no
// statement stays active (holding a read snapshot) between calls.
class ScopedReset {
 public:
  explicit ScopedReset(const Stmt& s) : stmt_(s.get()) {}
  ~ScopedReset() {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
  }
  ScopedReset(const ScopedReset&) = delete;
  ScopedReset& operator=(const ScopedReset&) = delete;

 private:
  sqlite3_stmt* stmt_;
};

struct DbCloser {
  void operator()(sqlite3* db) const { sqlite3_close_v2(db); }
};

}  // namespace herd::store
