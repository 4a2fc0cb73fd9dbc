#include <algorithm>
#include <map>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "store/log_store.h"

namespace herd::store {

struct MemoryLogStore::Impl {
  std::mutex mu;
  std::map<int64_t, v1::Mutation> log;
  std::map<int64_t, v1::CellSnapshot> snapshots;
  int64_t last = 0;
  // Log entries at or before this revision were dropped by Compact.
  int64_t compacted = 0;

  int64_t First() const { return compacted == 0 ? 0 : snapshots.begin()->first; }
};

MemoryLogStore::MemoryLogStore() : impl_(std::make_unique<Impl>()) {}
MemoryLogStore::~MemoryLogStore() = default;

absl::Status MemoryLogStore::Append(absl::Span<const v1::Mutation> mutations) {
  std::lock_guard l(impl_->mu);
  int64_t expect = impl_->last + 1;
  for (const auto& m : mutations) {
    if (m.revision() != expect) {
      return absl::FailedPreconditionError(
          absl::StrCat("append out of order: revision ", m.revision(), ", expected ", expect));
    }
    ++expect;
  }
  for (const auto& m : mutations) impl_->log.emplace(m.revision(), m);
  impl_->last = expect - 1;
  return absl::OkStatus();
}

absl::StatusOr<int64_t> MemoryLogStore::LastRevision() {
  std::lock_guard l(impl_->mu);
  return impl_->last;
}

absl::StatusOr<int64_t> MemoryLogStore::FirstRevision() {
  std::lock_guard l(impl_->mu);
  return impl_->First();
}

absl::Status MemoryLogStore::WriteSnapshot(const v1::CellSnapshot& snapshot) {
  std::lock_guard l(impl_->mu);
  if (snapshot.revision() > impl_->last || snapshot.revision() < impl_->First()) {
    return absl::FailedPreconditionError(absl::StrCat("snapshot at revision ", snapshot.revision(),
                                                      " is outside the log [", impl_->First(), ", ",
                                                      impl_->last, "]"));
  }
  impl_->snapshots[snapshot.revision()] = snapshot;
  return absl::OkStatus();
}

absl::StatusOr<std::optional<v1::CellSnapshot>> MemoryLogStore::ReadSnapshot(int64_t max_revision) {
  std::lock_guard l(impl_->mu);
  auto it = impl_->snapshots.upper_bound(max_revision);
  if (it == impl_->snapshots.begin()) return std::optional<v1::CellSnapshot>();
  --it;
  return std::optional<v1::CellSnapshot>(it->second);
}

absl::Status MemoryLogStore::ReadLog(int64_t from, int64_t to,
                                     const std::function<absl::Status(const v1::Mutation&)>& fn) {
  std::vector<v1::Mutation> copy;
  {
    std::lock_guard l(impl_->mu);
    from = std::max<int64_t>(from, 1);
    if (from > to) return absl::OkStatus();
    if (from <= impl_->compacted) {
      return absl::OutOfRangeError(absl::StrCat(
          "revision ", from, " was compacted; the log now starts after ", impl_->compacted));
    }
    for (auto it = impl_->log.lower_bound(from); it != impl_->log.end() && it->first <= to; ++it) {
      copy.push_back(it->second);
    }
  }
  for (const auto& m : copy) {
    if (auto st = fn(m); !st.ok()) return st;
  }
  return absl::OkStatus();
}

absl::Status MemoryLogStore::Restore(const v1::CellSnapshot& snapshot) {
  std::lock_guard l(impl_->mu);
  if (impl_->last != 0 || !impl_->log.empty() || !impl_->snapshots.empty()) {
    return absl::FailedPreconditionError("restore needs an empty store");
  }
  impl_->snapshots[snapshot.revision()] = snapshot;
  impl_->last = snapshot.revision();
  impl_->compacted = snapshot.revision();
  return absl::OkStatus();
}

absl::Status MemoryLogStore::Compact(int64_t revision) {
  std::lock_guard l(impl_->mu);
  auto it = impl_->snapshots.upper_bound(revision);
  if (it == impl_->snapshots.begin()) return absl::OkStatus();
  --it;
  int64_t keep = it->first;
  impl_->snapshots.erase(impl_->snapshots.begin(), it);
  impl_->log.erase(impl_->log.begin(), impl_->log.upper_bound(keep));
  impl_->compacted = std::max(impl_->compacted, keep);
  return absl::OkStatus();
}

}  // namespace herd::store
