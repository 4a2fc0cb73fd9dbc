#include "master/core/api/stream.h"

#include <deque>
#include <optional>

#include "absl/strings/str_cat.h"
#include "base/status.h"

namespace herd::master {
namespace {

constexpr size_t kBatch = 1000;  // mutations per Watch message, and per read of the store

class WatchCursor final : public Cursor<v1::WatchResponse> {
 public:
  WatchCursor(const ApiContext& ctx, int64_t after) : ctx_(ctx), after_(after) {}

  Step Next(v1::WatchResponse* out) override {
    out->Clear();
    Committer& committer = *ctx_.committer;
    auto batch = committer.WaitForMutations(after_, 0, kBatch);
    if (batch.status().code() == absl::StatusCode::kOutOfRange) return FromStore(out, committer.FeedStart() - 1);
    if (!batch.ok()) return End(batch.status());
    if (batch->empty()) return Step::kWait;
    for (auto& m : *batch) *out->add_mutations() = std::move(m);
    after_ = out->mutations(out->mutations_size() - 1).revision();
    return Step::kMessage;
  }
  absl::Status status() const override { return status_; }

 private:
  // Older than the in-memory feed: one chunk of the store, up to `upto`.
  Step FromStore(v1::WatchResponse* out, int64_t upto) {
    const int64_t to = std::min<int64_t>(upto, after_ + static_cast<int64_t>(kBatch));
    absl::Status st = ctx_.store->ReadLog(after_ + 1, to, [&](const v1::Mutation& m) {
      *out->add_mutations() = m;
      return absl::OkStatus();
    });
    if (!st.ok()) return End(st);
    if (out->mutations_size() == 0) {
      return End(absl::OutOfRangeError(absl::StrCat("revision ", after_ + 1, " is no longer in the log")));
    }
    after_ = out->mutations(out->mutations_size() - 1).revision();
    return Step::kMessage;
  }
  Step End(absl::Status st) {
    status_ = std::move(st);
    return Step::kEnd;
  }

  const ApiContext& ctx_;
  int64_t after_;
  absl::Status status_;
};

class CheckpointCursor final : public Cursor<v1::CheckpointRecord> {
 public:
  CheckpointCursor(const ApiContext& ctx, v1::CellSnapshot base, int64_t upto)
      : ctx_(ctx), base_(std::move(base)), next_(base_.revision() + 1), upto_(upto) {}

  Step Next(v1::CheckpointRecord* out) override {
    out->Clear();
    switch (stage_) {
      case Stage::kHeader: {
        v1::CheckpointHeader* h = out->mutable_header();
        h->set_cell(ctx_.options->cell_name);
        h->set_snapshot_revision(base_.revision());
        h->set_last_revision(upto_);
        h->set_created_ms(ctx_.clock->NowMs());
        h->set_herd_version(ctx_.options->version);
        stage_ = Stage::kSnapshot;
        return Step::kMessage;
      }
      case Stage::kSnapshot:
        *out->mutable_snapshot() = std::move(base_);
        stage_ = Stage::kLog;
        return Step::kMessage;
      case Stage::kLog:
        if (pending_.empty() && next_ <= upto_) {
          const int64_t to = std::min<int64_t>(upto_, next_ + static_cast<int64_t>(kBatch) - 1);
          status_ = ctx_.store->ReadLog(next_, to, [&](const v1::Mutation& m) {
            pending_.push_back(m);
            return absl::OkStatus();
          });
          if (!status_.ok()) return Step::kEnd;
          if (pending_.empty()) {
            status_ = absl::DataLossError(absl::StrCat("revisions ", next_, "..", to, " are missing from the log"));
            return Step::kEnd;
          }
          next_ = pending_.back().revision() + 1;
        }
        if (pending_.empty()) return Step::kEnd;  // whole
        *out->mutable_mutation() = std::move(pending_.front());
        pending_.pop_front();
        return Step::kMessage;
    }
    return Step::kEnd;
  }
  absl::Status status() const override { return status_; }

 private:
  enum class Stage { kHeader, kSnapshot, kLog };
  const ApiContext& ctx_;
  v1::CellSnapshot base_;
  int64_t next_;  // the next revision to read from the store
  const int64_t upto_;
  Stage stage_ = Stage::kHeader;
  std::deque<v1::Mutation> pending_;
  absl::Status status_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Cursor<v1::WatchResponse>>> StreamApi::OpenWatch(const Principal& who,
                                                                              int64_t from_revision) {
  HERD_RETURN_IF_ERROR(ctx_.Authorize(who, Action::kWatch, Resource{}));
  const int64_t after = from_revision > 0 ? from_revision - 1 : ctx_.committer->durable_revision();
  return std::make_unique<WatchCursor>(ctx_, after);
}

absl::StatusOr<std::unique_ptr<Cursor<v1::CheckpointRecord>>> StreamApi::OpenCheckpoint(const Principal& who,
                                                                                      int64_t up_to_revision) {
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
  return std::make_unique<CheckpointCursor>(ctx_, std::move(base), upto);
}

absl::Status StreamApi::Watch(const Principal& who, int64_t from_revision,
                              const std::function<bool(const v1::WatchResponse&)>& send,
                              const std::function<bool()>& cancelled) {
  HERD_ASSIGN_OR_RETURN(auto cursor, OpenWatch(who, from_revision));
  return Drain<v1::WatchResponse>(*cursor, *ctx_.committer, send, cancelled);
}

absl::Status StreamApi::ExportCheckpoint(const Principal& who, int64_t up_to_revision,
                                         const std::function<bool(const v1::CheckpointRecord&)>& write) {
  HERD_ASSIGN_OR_RETURN(auto cursor, OpenCheckpoint(who, up_to_revision));
  return Drain<v1::CheckpointRecord>(
      *cursor, *ctx_.committer, write, [] { return false; }, absl::CancelledError("checkpoint reader went away"));
}

}  // namespace herd::master
