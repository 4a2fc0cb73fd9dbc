#include "master/core/frameworks/allocator.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"

namespace herd::master::frameworks {

const ResourceVector DrfAllocator::kNone;

double DominantShareOf(const ResourceVector& r, const ResourceVector& total) {
  double share = 0;
  auto dim = [&share](int64_t have, int64_t all) {
    if (all > 0) share = std::max(share, static_cast<double>(have) / static_cast<double>(all));
  };
  dim(r.cpu_millis, total.cpu_millis);
  dim(r.memory_bytes, total.memory_bytes);
  dim(r.disk_bytes, total.disk_bytes);
  for (const auto& [name, all] : total.extended) dim(r.Extended(name), all);
  return share;
}

absl::Status DrfAllocator::SetRole(const std::string& role, double weight, const ResourceVector& guarantee) {
  if (role.empty()) return absl::InvalidArgumentError("a role needs a name");
  if (!(weight > 0) || weight > 1e6) return absl::InvalidArgumentError(absl::StrCat("role ", role, ": weight must be in (0, 1e6]"));
  if (guarantee.AnyNegative()) return absl::InvalidArgumentError(absl::StrCat("role ", role, ": negative guarantee"));
  roles_[role] = {weight, guarantee};
  return absl::OkStatus();
}

absl::Status DrfAllocator::AddFramework(const std::string& id, const std::string& role) {
  if (id.empty()) return absl::InvalidArgumentError("a framework needs an id");
  if (frameworks_.contains(id)) return absl::AlreadyExistsError(absl::StrCat("framework ", id, " is registered"));
  Framework f;
  f.role = role.empty() ? "*" : role;
  f.order = next_order_++;
  frameworks_.emplace(id, std::move(f));
  return absl::OkStatus();
}

void DrfAllocator::RemoveFramework(const std::string& id) { frameworks_.erase(id); }

void DrfAllocator::Allocate(const std::string& id, const ResourceVector& r) {
  if (auto it = frameworks_.find(id); it != frameworks_.end()) it->second.held += r;
}

void DrfAllocator::Recover(const std::string& id, const ResourceVector& r) {
  auto it = frameworks_.find(id);
  if (it == frameworks_.end()) return;
  ResourceVector& h = it->second.held;
  h -= r;
  // Never below zero in a dimension (a late or duplicate recovery).
  h.cpu_millis = std::max<int64_t>(0, h.cpu_millis);
  h.memory_bytes = std::max<int64_t>(0, h.memory_bytes);
  h.disk_bytes = std::max<int64_t>(0, h.disk_bytes);
  h.ports = std::max<int64_t>(0, h.ports);
  for (auto& [name, v] : std::vector<std::pair<std::string, int64_t>>(h.extended)) {
    if (v < 0) h.SetExtended(name, 0);
  }
}

void DrfAllocator::Decline(const std::string& id, const std::string& machine, int64_t until_ms) {
  if (auto it = frameworks_.find(id); it != frameworks_.end()) it->second.declined[machine] = until_ms;
}

void DrfAllocator::RequireAttributes(const std::string& id, std::map<std::string, std::string> attributes) {
  if (auto it = frameworks_.find(id); it != frameworks_.end()) it->second.required = std::move(attributes);
}

void DrfAllocator::SetActive(const std::string& id, bool active) {
  if (auto it = frameworks_.find(id); it != frameworks_.end()) it->second.active = active;
}

const ResourceVector& DrfAllocator::Held(const std::string& id) const {
  auto it = frameworks_.find(id);
  return it == frameworks_.end() ? kNone : it->second.held;
}

double DrfAllocator::Weight(const std::string& role) const {
  auto it = roles_.find(role);
  return it == roles_.end() ? 1.0 : it->second.weight;
}

double DrfAllocator::DominantShare(const std::string& id, const ResourceVector& total) const {
  auto it = frameworks_.find(id);
  if (it == frameworks_.end()) return 0;
  return DominantShareOf(it->second.held, total) / Weight(it->second.role);
}

bool DrfAllocator::UnderGuarantee(const std::string& role) const {
  auto it = roles_.find(role);
  if (it == roles_.end() || it->second.guarantee.IsZero()) return false;
  ResourceVector held;
  for (const auto& [id, f] : frameworks_) {
    if (f.role == role) held += f.held;
  }
  return !it->second.guarantee.FitsIn(held);
}

bool DrfAllocator::Eligible(const Framework& f, const MachineSlack& m, int64_t now_ms) const {
  if (!f.active) return false;
  if (auto d = f.declined.find(m.machine); d != f.declined.end() && d->second > now_ms) return false;
  for (const auto& [key, value] : f.required) {
    auto a = m.attributes.find(key);
    if (a == m.attributes.end() || a->second != value) return false;
  }
  return true;
}

std::vector<Offer> DrfAllocator::Round(const std::vector<MachineSlack>& slack, const ResourceVector& total,
                                       int64_t now_ms) {
  std::vector<Offer> out;
  for (auto& [id, f] : frameworks_) {
    // Expired filters go.
    for (auto it = f.declined.begin(); it != f.declined.end();) {
      it = it->second <= now_ms ? f.declined.erase(it) : std::next(it);
    }
  }
  for (const MachineSlack& m : slack) {
    if (m.free.cpu_millis < options_.min_cpu_millis || m.free.memory_bytes < options_.min_memory_bytes) continue;
    std::string best;
    bool best_guaranteed = false;
    double best_share = std::numeric_limits<double>::infinity();
    int64_t best_order = std::numeric_limits<int64_t>::max();
    for (const auto& [id, f] : frameworks_) {
      if (!Eligible(f, m, now_ms)) continue;
      const bool guaranteed = UnderGuarantee(f.role);
      const double share = DominantShareOf(f.held, total) / Weight(f.role);
      // Shares within rounding of each other are equal (0.3 / 3 is not
      // exactly 0.1): the tie goes to the framework registered first.
      const bool tie = std::abs(share - best_share) <= 1e-9;
      const bool better = best.empty() || (guaranteed && !best_guaranteed) ||
                          (guaranteed == best_guaranteed &&
                           (tie ? f.order < best_order : share < best_share));
      if (better) {
        best = id;
        best_guaranteed = guaranteed;
        best_share = share;
        best_order = f.order;
      }
    }
    if (best.empty()) continue;
    frameworks_.at(best).held += m.free;
    out.push_back({best, m.machine, m.free});
  }
  return out;
}

}  // namespace herd::master::frameworks
