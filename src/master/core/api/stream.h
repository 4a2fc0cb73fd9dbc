// The master's streams: the change log as it grows (Watch: schedulers,
// replicas, tools) and checkpoints (a snapshot and the log after it, for the
// simulator and for backups). Both ask the Authorizer first: they show the
// whole cell. Each is a Cursor (cursor.h) the server drives without a
// thread per stream; Watch and ExportCheckpoint drive one on the caller's
// thread.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "herd/v1/api.pb.h"
#include "master/core/admission/authorizer.h"
#include "master/core/api/context.h"
#include "master/core/api/cursor.h"

namespace herd::master {

class StreamApi {
 public:
  explicit StreamApi(const ApiContext& ctx) : ctx_(ctx) {}

  // Durable mutations from `from_revision` (0 = only new ones) on, at most
  // 1,000 a message; older than the in-memory feed they come from the store.
  absl::StatusOr<std::unique_ptr<Cursor<v1::WatchResponse>>> OpenWatch(const Principal& who, int64_t from_revision);
  // A checkpoint (header, the newest stored snapshot at or before the
  // revision, then the log after it) record by record; it ends once whole.
  absl::StatusOr<std::unique_ptr<Cursor<v1::CheckpointRecord>>> OpenCheckpoint(const Principal& who,
                                                                               int64_t up_to_revision);

  // OpenWatch, sent to `send` until it returns false or `cancelled()`.
  absl::Status Watch(const Principal& who, int64_t from_revision,
                     const std::function<bool(const v1::WatchResponse&)>& send,
                     const std::function<bool()>& cancelled);
  // OpenCheckpoint, written whole (CANCELLED if `write` returns false).
  absl::Status ExportCheckpoint(const Principal& who, int64_t up_to_revision,
                                const std::function<bool(const v1::CheckpointRecord&)>& write);

 private:
  const ApiContext& ctx_;
};

}  // namespace herd::master
