#include "master/core/api/stream.h"

#include <optional>

#include "absl/strings/str_cat.h"
#include "base/status.h"

namespace herd::master {

absl::Status StreamApi::Watch(const Principal& who, int64_t from_revision,
                              const std::function<bool(const v1::WatchResponse&)>& send,
                              const std::function<bool()>& cancelled) {
  HERD_RETURN_IF_ERROR(ctx_.Authorize(who, Action::kWatch, Resource{}));
  Committer& committer = *ctx_.committer;
  int64_t after = from_revision > 0 ? from_revision - 1 : committer.durable_revision();
  while (!cancelled()) {
    auto batch = committer.WaitForMutations(after, 500, 1000);
    if (batch.status().code() == absl::StatusCode::kOutOfRange) {
      // Older than the in-memory feed: serve it from the store.
      int64_t upto = committer.FeedStart() - 1;
      v1::WatchResponse resp;
      bool ok = true;
      HERD_RETURN_IF_ERROR(ctx_.store->ReadLog(after + 1, upto, [&](const v1::Mutation& m) {
        *resp.add_mutations() = m;
        after = m.revision();
        if (resp.mutations_size() >= 1000) {
          ok = send(resp);
          resp.Clear();
          if (!ok) return absl::CancelledError("watcher gone");
        }
        return absl::OkStatus();
      }));
      if (resp.mutations_size() > 0 && !send(resp)) return absl::OkStatus();
      if (!ok) return absl::OkStatus();
      continue;
    }
    HERD_RETURN_IF_ERROR(batch.status());
    if (batch->empty()) continue;
    v1::WatchResponse resp;
    for (auto& m : *batch) *resp.add_mutations() = std::move(m);
    after = resp.mutations(resp.mutations_size() - 1).revision();
    if (!send(resp)) return absl::OkStatus();
  }
  return absl::OkStatus();
}

absl::Status StreamApi::ExportCheckpoint(const Principal& who, int64_t up_to_revision,
                                         const std::function<bool(const v1::CheckpointRecord&)>& write) {
  HERD_RETURN_IF_ERROR(ctx_.Authorize(who, Action::kExportCheckpoint, Resource{}));
  const int64_t durable = ctx_.committer->durable_revision();
  const int64_t upto = up_to_revision == 0 ? durable : up_to_revision;
  if (upto > durable) {
    return absl::OutOfRangeError(absl::StrCat("revision ", upto, " is in the future (newest is ", durable, ")"));
  }
  HERD_ASSIGN_OR_RETURN(int64_t first, ctx_.store->FirstRevision());
  if (upto < first) {
    return absl::OutOfRangeError(absl::StrCat("revision ", upto, " was compacted away (oldest is ", first, ")"));
  }
  HERD_ASSIGN_OR_RETURN(std::optional<v1::CellSnapshot> snap, ctx_.store->ReadSnapshot(upto));
  v1::CellSnapshot base;
  if (snap.has_value()) {
    base = std::move(*snap);
  } else {
    base.set_cell(ctx_.options->cell_name);  // the empty cell at revision 0
  }
  v1::CheckpointRecord rec;
  v1::CheckpointHeader* h = rec.mutable_header();
  h->set_cell(ctx_.options->cell_name);
  h->set_snapshot_revision(base.revision());
  h->set_last_revision(upto);
  h->set_created_ms(ctx_.clock->NowMs());
  h->set_herd_version(ctx_.options->version);
  if (!write(rec)) return absl::CancelledError("checkpoint reader went away");
  rec.Clear();
  *rec.mutable_snapshot() = std::move(base);
  const int64_t from = rec.snapshot().revision() + 1;
  if (!write(rec)) return absl::CancelledError("checkpoint reader went away");
  if (from > upto) return absl::OkStatus();
  return ctx_.store->ReadLog(from, upto, [&](const v1::Mutation& m) {
    v1::CheckpointRecord r;
    *r.mutable_mutation() = m;
    return write(r) ? absl::OkStatus() : absl::CancelledError("checkpoint reader went away");
  });
}

}  // namespace herd::master
