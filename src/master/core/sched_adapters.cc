#include "master/core/sched_adapters.h"

namespace herd::master {

absl::StatusOr<cell::CellState> CommitterChangeSource::Bootstrap() {
  v1::CellSnapshot snap = committer_->Read([](const cell::CellState& s) { return s.ToSnapshot(); });
  return cell::CellState::FromSnapshot(snap);
}

absl::StatusOr<std::vector<v1::Mutation>> CommitterChangeSource::Next(int64_t after, int64_t timeout_ms) {
  return committer_->WaitForMutations(after, timeout_ms, 10'000);
}

}  // namespace herd::master
