#include "sched/framework/registry.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/check.h"

namespace herd::sched {
namespace {

absl::Status CheckName(absl::string_view kind, absl::string_view name) {
  bool ok = !name.empty() && name.size() <= 40 && name.front() != '-' && name.back() != '-';
  for (char c : name) ok &= (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
  if (!ok) {
    return absl::InvalidArgumentError(
        absl::StrCat(kind, " plugin name '", name, "': 1-40 lower-case letters, digits and '-'"));
  }
  return absl::OkStatus();
}

template <typename Entry>
std::string Names(const std::vector<Entry>& entries) {
  return absl::StrJoin(entries, ", ", [](std::string* out, const Entry& e) { out->append(e.name); });
}

}  // namespace

void ScoreWeights::Set(absl::string_view score, double weight) {
  for (auto& [name, w] : set_) {
    if (name == score) {
      w = weight;
      return;
    }
  }
  set_.emplace_back(std::string(score), weight);
}

std::optional<double> ScoreWeights::Find(absl::string_view score) const {
  for (const auto& [name, w] : set_) {
    if (name == score) return w;
  }
  return std::nullopt;
}

const Registry& Registry::BuiltIn() {
  static const Registry* r = [] {
    auto* reg = new Registry();
    RegisterBuiltinPlugins(*reg);
    return reg;
  }();
  return *r;
}

absl::Status Registry::AddFilter(FilterEntry entry) {
  if (absl::Status st = CheckName("filter", entry.name); !st.ok()) return st;
  if (!entry.make) return absl::InvalidArgumentError(absl::StrCat("filter plugin '", entry.name, "' has no make"));
  if (FindFilter(entry.name) != nullptr) {
    return absl::AlreadyExistsError(absl::StrCat("filter plugin '", entry.name, "' is registered already"));
  }
  filters_.push_back(std::move(entry));
  return absl::OkStatus();
}

absl::Status Registry::AddScore(ScoreEntry entry) {
  if (absl::Status st = CheckName("score", entry.name); !st.ok()) return st;
  if (!entry.make || !entry.default_weight) {
    return absl::InvalidArgumentError(absl::StrCat("score plugin '", entry.name, "' needs make and default_weight"));
  }
  if (FindScore(entry.name) != nullptr) {
    return absl::AlreadyExistsError(absl::StrCat("score plugin '", entry.name, "' is registered already"));
  }
  scores_.push_back(std::move(entry));
  return absl::OkStatus();
}

const FilterEntry* Registry::FindFilter(absl::string_view name) const {
  for (const FilterEntry& e : filters_) {
    if (e.name == name) return &e;
  }
  return nullptr;
}

const ScoreEntry* Registry::FindScore(absl::string_view name) const {
  for (const ScoreEntry& e : scores_) {
    if (e.name == name) return &e;
  }
  return nullptr;
}

std::string Registry::FilterNames() const { return Names(filters_); }
std::string Registry::ScoreNames() const { return Names(scores_); }

}  // namespace herd::sched
