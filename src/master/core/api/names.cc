#include "master/core/api/names.h"

#include <map>
#include <string>

#include "absl/strings/match.h"
#include "base/status.h"
#include "master/core/naming/names.h"

namespace herd::master {

absl::StatusOr<v1::ResolveResponse> NamesApi::Records(const Principal& who, const std::string& name) {
  return ctx_.committer->Read([&](const cell::CellState& s) -> absl::StatusOr<v1::ResolveResponse> {
    absl::StatusOr<NameTarget> target = FindName(s, name, ctx_.options->dns_domain);
    if (absl::IsNotFound(target.status()) && !absl::StrContains(name, '/')) {
      // JOB alone, as every verb takes it: the caller's, else the only one.
      if (absl::StatusOr<std::string> id = ctx_.ResolveJob(s, who, name); id.ok()) {
        target = NameTarget{s.FindJob(*id), -1};
      }
    }
    if (!target.ok()) {
      // Ask all the same: whether a name exists is what the caller may learn.
      HERD_RETURN_IF_ERROR(ctx_.Authorize(who, Action::kResolveName, Resource{}));
      return target.status();
    }
    HERD_RETURN_IF_ERROR(ctx_.Authorize(who, Action::kResolveName, JobResource(*target->job)));
    v1::ResolveResponse r;
    r.set_truncated(NameRecords(s, *target, ctx_.options->dns_domain, r.mutable_records()));
    r.set_revision(s.revision());
    return r;
  });
}

absl::StatusOr<v1::ResolveResponse> NamesApi::Resolve(const Principal& who, const v1::ResolveRequest& req) {
  return Records(who, req.name());
}

namespace {

class NamesCursor final : public Cursor<v1::WatchNamesResponse> {
 public:
  using RecordsFn = std::function<absl::StatusOr<v1::ResolveResponse>()>;
  NamesCursor(Committer* committer, RecordsFn records, v1::ResolveResponse first, int64_t after)
      : committer_(committer), records_(std::move(records)), first_(std::move(first)), after_(after) {}

  Step Next(v1::WatchNamesResponse* out) override {
    out->Clear();
    if (!sent_first_) {
      sent_first_ = true;
      out->set_initial(true);
      out->set_revision(first_.revision());
      out->set_truncated(first_.truncated());
      for (v1::NameRecord& r : *first_.mutable_records()) {
        *out->add_changed() = r;
        known_[r.name()] = std::move(r);
      }
      return Step::kMessage;
    }
    const int64_t durable = committer_->durable_revision();
    if (durable <= after_) return Step::kWait;
    after_ = durable;
    absl::StatusOr<v1::ResolveResponse> now = records_();
    if (absl::IsNotFound(now.status())) now = v1::ResolveResponse();  // the job went away: its names did too
    if (!now.ok()) {
      status_ = now.status();
      return Step::kEnd;
    }
    out->set_revision(now->revision() > 0 ? now->revision() : after_);
    out->set_truncated(now->truncated());
    std::map<std::string, v1::NameRecord> next;
    for (v1::NameRecord& r : *now->mutable_records()) {
      auto it = known_.find(r.name());
      if (it == known_.end() || !SameNameRecord(it->second, r)) *out->add_changed() = r;
      next[r.name()] = std::move(r);
    }
    for (const auto& [name, r] : known_) {
      if (!next.contains(name)) out->add_removed(name);
    }
    known_ = std::move(next);
    return out->changed_size() > 0 || out->removed_size() > 0 ? Step::kMessage : Step::kWait;
  }
  absl::Status status() const override { return status_; }

 private:
  Committer* const committer_;
  const RecordsFn records_;
  v1::ResolveResponse first_;
  int64_t after_;
  bool sent_first_ = false;
  std::map<std::string, v1::NameRecord> known_;
  absl::Status status_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Cursor<v1::WatchNamesResponse>>> NamesApi::OpenWatchNames(
    const Principal& who, const v1::WatchNamesRequest& req) {
  const int64_t after = ctx_.committer->durable_revision();
  HERD_ASSIGN_OR_RETURN(v1::ResolveResponse first, Records(who, req.name()));
  return std::make_unique<NamesCursor>(
      ctx_.committer, [this, who, name = req.name()] { return Records(who, name); }, std::move(first), after);
}

absl::Status NamesApi::WatchNames(const Principal& who, const v1::WatchNamesRequest& req,
                                  const std::function<bool(const v1::WatchNamesResponse&)>& send,
                                  const std::function<bool()>& cancelled) {
  HERD_ASSIGN_OR_RETURN(auto cursor, OpenWatchNames(who, req));
  return Drain<v1::WatchNamesResponse>(*cursor, *ctx_.committer, send, cancelled);
}

}  // namespace herd::master
