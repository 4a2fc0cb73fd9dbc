// LogStore: the durable home of the cell state (docs/design.md §4) -- an
// append-only log of mutations plus periodic snapshots. State at revision R is
// the newest snapshot at or before R with the log after it replayed up to R.
//
// Backends: memory (tests, simulator), SQLite (embedded; herd up and single
// master cells) and etcd (replicated masters: appends fenced on the leader's
// key). An append is conditional on the previous revision, so two writers
// can never interleave or overwrite each other.
//
// Thread-safety: implementations are safe to call from several threads, but
// the master funnels appends through one writer (GroupCommitLog).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "herd/v1/mutation.pb.h"
#include "herd/v1/objects.pb.h"

namespace herd::store {

class LogStore {
 public:
  virtual ~LogStore() = default;

  // Appends `mutations`, whose revisions must be consecutive and start at
  // LastRevision() + 1 (else FAILED_PRECONDITION and nothing is written).
  // All or nothing; durable (survives kill -9 and power loss) when it
  // returns OK. An empty span is a no-op.
  virtual absl::Status Append(absl::Span<const v1::Mutation> mutations) = 0;

  // Revision of the newest mutation in the log; 0 when empty. If the log was
  // compacted past its end, the newest snapshot's revision.
  virtual absl::StatusOr<int64_t> LastRevision() = 0;

  // Oldest revision that can still be reconstructed: 0 when the log is
  // complete from the start (never compacted), else the oldest snapshot's
  // revision (= the compaction point).
  virtual absl::StatusOr<int64_t> FirstRevision() = 0;

  // Stores a snapshot of the state at snapshot.revision(), which must lie in
  // [FirstRevision(), LastRevision()] (else FAILED_PRECONDITION): a snapshot
  // older than the compacted log would make FirstRevision() promise states
  // whose log is gone. Writing a snapshot for an existing revision replaces
  // it. Durable when it returns OK.
  virtual absl::Status WriteSnapshot(const v1::CellSnapshot& snapshot) = 0;

  // The newest snapshot with revision <= max_revision, or nullopt if none.
  virtual absl::StatusOr<std::optional<v1::CellSnapshot>> ReadSnapshot(int64_t max_revision) = 0;

  // Calls fn for each mutation with from <= revision <= to, in order, without
  // gaps; `to` past LastRevision() reads to the end. If part of the range was
  // compacted away (from <= the compaction point, see Compact), returns
  // OUT_OF_RANGE before calling fn, rather than silently skipping mutations:
  // a reader that fell behind must restart from a snapshot (a Compact that
  // overtakes a running scan stops it with OUT_OF_RANGE too). A non-OK status
  // from fn stops the scan and is returned. fn may call back into the store.
  virtual absl::Status ReadLog(int64_t from, int64_t to,
                               const std::function<absl::Status(const v1::Mutation&)>& fn) = 0;

  // Drops snapshots older than the newest snapshot at or before `revision`,
  // and the log entries at or before that snapshot's revision (the compaction
  // point; FirstRevision() becomes it). States older than it can no longer be
  // read. A no-op if there is no snapshot at or before `revision`.
  virtual absl::Status Compact(int64_t revision) = 0;
};

// The in-memory backend: same semantics, nothing durable.
class MemoryLogStore final : public LogStore {
 public:
  MemoryLogStore();
  ~MemoryLogStore() override;
  absl::Status Append(absl::Span<const v1::Mutation> mutations) override;
  absl::StatusOr<int64_t> LastRevision() override;
  absl::StatusOr<int64_t> FirstRevision() override;
  absl::Status WriteSnapshot(const v1::CellSnapshot& snapshot) override;
  absl::StatusOr<std::optional<v1::CellSnapshot>> ReadSnapshot(int64_t max_revision) override;
  absl::Status ReadLog(int64_t from, int64_t to,
                       const std::function<absl::Status(const v1::Mutation&)>& fn) override;
  absl::Status Compact(int64_t revision) override;

  // Starts an empty store from `snapshot` (e.g. a checkpoint's): the log
  // continues at snapshot.revision() + 1, and nothing older can be read.
  // FAILED_PRECONDITION if the store is not empty.
  absl::Status Restore(const v1::CellSnapshot& snapshot);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace herd::store
