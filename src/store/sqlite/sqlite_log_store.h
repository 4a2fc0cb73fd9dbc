// SqliteLogStore: the embedded LogStore backend (docs/design.md §4), one SQLite
// database file in WAL mode. The on-disk schema and the durability argument
// are in docs/store.md.
//
// A read-write store holds an exclusive flock(2) on the database file, so a
// second master on the same file fails at Open instead of racing the first.
// Every append is also fenced inside its transaction on the previous revision
// read from disk, the way the etcd backend fences on the leader's key.
//
// Read-only stores (OpenReadOnly) take no lock and may be opened by other
// processes while the master writes, e.g. `herd checkpoint export --data DIR`;
// WAL mode gives each statement a consistent view. Their mutating methods fail
// with FAILED_PRECONDITION.
//
// Thread-safety: every method may be called from any thread; calls are
// serialized on one connection by an internal mutex. ReadLog runs `fn`
// without holding it.
#pragma once

#include <memory>
#include <string>

#include "store/log_store.h"

namespace herd::store {

class SqliteLogStore final : public LogStore {
 public:
  // The on-disk schema this code reads and writes (meta 'schema_version').
  static constexpr int kSchemaVersion = 1;

  // Opens `path` for reading and writing, creating the file and the schema if
  // missing. FAILED_PRECONDITION if another process has it open for writing,
  // if it is not a Herd store, or if it was written by a newer schema.
  static absl::StatusOr<std::unique_ptr<SqliteLogStore>> Open(const std::string& path);

  // Opens an existing store read-only (NOT_FOUND if `path` does not exist).
  static absl::StatusOr<std::unique_ptr<SqliteLogStore>> OpenReadOnly(const std::string& path);

  ~SqliteLogStore() override;
  SqliteLogStore(const SqliteLogStore&) = delete;
  SqliteLogStore& operator=(const SqliteLogStore&) = delete;

  absl::Status Append(absl::Span<const v1::Mutation> mutations) override;
  absl::StatusOr<int64_t> LastRevision() override;
  absl::StatusOr<int64_t> FirstRevision() override;
  absl::Status WriteSnapshot(const v1::CellSnapshot& snapshot) override;
  absl::StatusOr<std::optional<v1::CellSnapshot>> ReadSnapshot(int64_t max_revision) override;
  absl::Status ReadLog(int64_t from, int64_t to,
                       const std::function<absl::Status(const v1::Mutation&)>& fn) override;
  absl::Status Compact(int64_t revision) override;

  const std::string& path() const;
  bool read_only() const;

 private:
  struct Impl;
  explicit SqliteLogStore(std::unique_ptr<Impl> impl);
  static absl::StatusOr<std::unique_ptr<SqliteLogStore>> OpenImpl(const std::string& path,
                                                                  bool read_only);
  std::unique_ptr<Impl> impl_;
};

}  // namespace herd::store
