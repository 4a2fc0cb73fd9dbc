// The checkpoint file format (`herd checkpoint export`, `herd sim`): the
// magic line "HERDCKPT1\n", then records, each a varint length and a
// serialized herd.v1.CheckpointRecord: a header, a snapshot, then mutations
// in revision order. Streams only: callers open the files.
#pragma once

#include <istream>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "herd/v1/mutation.pb.h"

namespace herd::cell {

inline constexpr absl::string_view kCheckpointMagic = "HERDCKPT1\n";

struct Checkpoint {
  v1::CheckpointHeader header;
  v1::CellSnapshot snapshot;
  std::vector<v1::Mutation> log;  // after the snapshot, in revision order
};

// Reads a whole checkpoint. `name` is used in errors. INVALID_ARGUMENT if it
// is not a checkpoint; DATA_LOSS if it is truncated or corrupt, or its log
// does not follow its snapshot without gaps.
absl::StatusOr<Checkpoint> ReadCheckpoint(std::istream& in, absl::string_view name);

// Writes records one by one (the magic line first).
class CheckpointWriter {
 public:
  explicit CheckpointWriter(std::ostream* out);
  absl::Status Write(const v1::CheckpointRecord& record);

 private:
  std::ostream* out_;
  bool started_ = false;
};

}  // namespace herd::cell
