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

absl::Status NamesApi::WatchNames(const Principal& who, const v1::WatchNamesRequest& req,
                                  const std::function<bool(const v1::WatchNamesResponse&)>& send,
                                  const std::function<bool()>& cancelled) {
  Committer& committer = *ctx_.committer;
  int64_t after = committer.durable_revision();
  HERD_ASSIGN_OR_RETURN(v1::ResolveResponse first, Records(who, req.name()));
  std::map<std::string, v1::NameRecord> known;
  v1::WatchNamesResponse out;
  out.set_initial(true);
  out.set_revision(first.revision());
  out.set_truncated(first.truncated());
  for (v1::NameRecord& r : *first.mutable_records()) {
    *out.add_changed() = r;
    known[r.name()] = std::move(r);
  }
  if (!send(out)) return absl::OkStatus();
  while (!cancelled()) {
    auto batch = committer.WaitForMutations(after, 500, 1000);
    if (batch.status().code() == absl::StatusCode::kOutOfRange) {
      after = committer.durable_revision();  // fell behind the feed: the state says it all
    } else {
      HERD_RETURN_IF_ERROR(batch.status());
      if (batch->empty()) continue;
      after = batch->back().revision();
    }
    absl::StatusOr<v1::ResolveResponse> now = Records(who, req.name());
    if (absl::IsNotFound(now.status())) now = v1::ResolveResponse();  // the job went away: its names did too
    HERD_RETURN_IF_ERROR(now.status());
    out.Clear();
    out.set_revision(now->revision() > 0 ? now->revision() : after);
    out.set_truncated(now->truncated());
    std::map<std::string, v1::NameRecord> next;
    for (v1::NameRecord& r : *now->mutable_records()) {
      auto it = known.find(r.name());
      if (it == known.end() || !SameNameRecord(it->second, r)) *out.add_changed() = r;
      next[r.name()] = std::move(r);
    }
    for (const auto& [name, r] : known) {
      if (!next.contains(name)) out.add_removed(name);
    }
    known = std::move(next);
    if ((out.changed_size() > 0 || out.removed_size() > 0) && !send(out)) return absl::OkStatus();
  }
  return absl::OkStatus();
}

}  // namespace herd::master
