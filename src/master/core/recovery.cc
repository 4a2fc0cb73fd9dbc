#include "master/core/recovery.h"

#include "absl/strings/str_cat.h"
#include "base/status.h"

namespace herd::master {

absl::StatusOr<cell::CellState> Recover(store::LogStore& store, int64_t revision, const std::string& cell_name) {
  HERD_ASSIGN_OR_RETURN(int64_t last, store.LastRevision());
  if (revision == 0) revision = last;
  if (revision > last) {
    return absl::OutOfRangeError(absl::StrCat("revision ", revision, " is in the future (newest is ", last, ")"));
  }
  HERD_ASSIGN_OR_RETURN(int64_t first, store.FirstRevision());
  if (revision < first) {
    return absl::OutOfRangeError(absl::StrCat("revision ", revision, " was compacted away (oldest kept is ", first, ")"));
  }
  HERD_ASSIGN_OR_RETURN(std::optional<v1::CellSnapshot> snap, store.ReadSnapshot(revision));
  cell::CellState state(cell_name);
  if (snap.has_value()) {
    HERD_ASSIGN_OR_RETURN(state, cell::CellState::FromSnapshot(*snap));
  }
  HERD_RETURN_IF_ERROR(CatchUp(store, state, revision));
  return state;
}

absl::Status CatchUp(store::LogStore& store, cell::CellState& state, int64_t revision) {
  if (revision == 0) {
    HERD_ASSIGN_OR_RETURN(revision, store.LastRevision());
  }
  if (state.revision() < revision) {
    HERD_RETURN_IF_ERROR(store.ReadLog(state.revision() + 1, revision, [&](const v1::Mutation& m) {
      absl::Status st = state.Apply(m);
      if (!st.ok()) {
        return absl::DataLossError(absl::StrCat("log does not replay at revision ", m.revision(), ": ", st.message()));
      }
      return absl::OkStatus();
    }));
  }
  if (state.revision() != revision) {
    return absl::DataLossError(absl::StrCat("log ends at revision ", state.revision(), ", expected ", revision));
  }
  return absl::OkStatus();
}

}  // namespace herd::master
