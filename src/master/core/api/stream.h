// The master's streams: the change log as it grows (Watch: schedulers,
// replicas, tools) and checkpoints (a snapshot and the log after it, for the
// simulator and for backups). Both ask the Authorizer first: they show the
// whole cell.
#pragma once

#include <cstdint>
#include <functional>

#include "absl/status/status.h"
#include "herd/v1/api.pb.h"
#include "master/core/admission/authorizer.h"
#include "master/core/api/context.h"

namespace herd::master {

class StreamApi {
 public:
  explicit StreamApi(const ApiContext& ctx) : ctx_(ctx) {}

  // Streams durable mutations from `from_revision` (0 = only new ones) to
  // `send` until it returns false or `cancelled()` is true.
  absl::Status Watch(const Principal& who, int64_t from_revision,
                     const std::function<bool(const v1::WatchResponse&)>& send,
                     const std::function<bool()>& cancelled);
  // Writes a checkpoint (header, the newest stored snapshot at or before the
  // revision, then the log after it) record by record.
  absl::Status ExportCheckpoint(const Principal& who, int64_t up_to_revision,
                                const std::function<bool(const v1::CheckpointRecord&)>& write);

 private:
  const ApiContext& ctx_;
};

}  // namespace herd::master
