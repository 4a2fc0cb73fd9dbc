// Recovery: the cell state at a revision = the newest snapshot at or before
// it + the log after it replayed (docs/design.md §4). Used at master start, to read
// state "as of" an old revision, and to load checkpoints.
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "cell/cell_state.h"
#include "store/log_store.h"

namespace herd::master {

// The state at `revision` (0 = the newest). DATA_LOSS if the log does not
// replay cleanly; OUT_OF_RANGE if that revision was compacted away or is in
// the future.
absl::StatusOr<cell::CellState> Recover(store::LogStore& store, int64_t revision = 0,
                                        const std::string& cell_name = "local");

// Brings `state` forward to `revision` (0 = the newest) by replaying the log
// after state.revision(): how a hot follower keeps up and takes over without
// a rebuild. OUT_OF_RANGE if the log it needs was compacted (the caller must
// Recover from a snapshot instead); DATA_LOSS if it does not replay. On error
// `state` may have been partly advanced (still consistent at its revision()).
absl::Status CatchUp(store::LogStore& store, cell::CellState& state, int64_t revision = 0);

}  // namespace herd::master
