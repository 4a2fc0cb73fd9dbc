#include "sched/framework/devices.h"

#include <algorithm>

#include "absl/strings/match.h"

namespace herd::sched {

bool IsDeviceResource(absl::string_view name) { return absl::EndsWith(name, "_milli") && name.size() > 6; }

int64_t DeviceSet::TotalFree() const {
  int64_t n = 0;
  for (int32_t f : free) n += f;
  return n;
}

int64_t DeviceSet::FullyFree() const {
  return std::count(free.begin(), free.end(), static_cast<int32_t>(kDeviceMillis));
}

bool DeviceSet::Fits(int64_t milli) const {
  if (milli <= 0) return true;
  if (const int64_t whole = WholeDevices(milli); whole > 0) return FullyFree() >= whole;
  for (int32_t f : free) {
    if (f >= milli) return true;
  }
  return false;
}

bool DeviceSet::Take(int64_t milli) {
  if (milli <= 0) return true;
  if (!Fits(milli)) return false;
  if (int64_t whole = WholeDevices(milli); whole > 0) {
    for (int32_t& f : free) {
      if (whole == 0) break;
      if (f == kDeviceMillis) {
        f = 0;
        --whole;
      }
    }
    return true;
  }
  int32_t* best = nullptr;
  for (int32_t& f : free) {
    if (f >= milli && (best == nullptr || f < *best)) best = &f;
  }
  *best -= static_cast<int32_t>(milli);
  return true;
}

const DeviceSet* Devices::Find(absl::string_view name) const {
  for (const DeviceSet& s : sets) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

absl::string_view Devices::Shortfall(const ResourceVector& need) const {
  for (const auto& [name, milli] : need.extended) {
    const DeviceSet* s = Find(name);
    if (s != nullptr && !s->Fits(milli)) return name;
  }
  return {};
}

bool Devices::Fits(const ResourceVector& need) const { return Shortfall(need).empty(); }

bool Devices::Take(const ResourceVector& need) {
  bool ok = true;
  for (DeviceSet& s : sets) {
    const int64_t milli = need.Extended(s.name);
    if (milli > 0) ok = s.Take(milli) && ok;
  }
  return ok;
}

int64_t Devices::TotalFree() const {
  int64_t n = 0;
  for (const DeviceSet& s : sets) n += s.TotalFree();
  return n;
}

int64_t Devices::Capacity() const {
  int64_t n = 0;
  for (const DeviceSet& s : sets) n += static_cast<int64_t>(s.free.size()) * kDeviceMillis;
  return n;
}

Devices Devices::ForCapacity(const ResourceVector& capacity) {
  Devices d;
  for (const auto& [name, milli] : capacity.extended) {
    if (!IsDeviceResource(name) || milli < kDeviceMillis) continue;
    d.sets.push_back({name, std::vector<int32_t>(static_cast<size_t>(milli / kDeviceMillis),
                                                 static_cast<int32_t>(kDeviceMillis))});
  }
  return d;
}

void Devices::PlaceAll(std::vector<ResourceVector> requests) {
  for (DeviceSet& s : sets) {
    std::vector<int64_t> whole, shares;
    for (const ResourceVector& r : requests) {
      const int64_t milli = r.Extended(s.name);
      if (milli <= 0) continue;
      (WholeDevices(milli) > 0 ? whole : shares).push_back(milli);
    }
    std::sort(whole.begin(), whole.end(), std::greater<>());
    std::sort(shares.begin(), shares.end(), std::greater<>());
    bool ok = true;
    for (int64_t m : whole) ok = ok && s.Take(m);
    for (int64_t m : shares) ok = ok && s.Take(m);
    if (!ok) std::fill(s.free.begin(), s.free.end(), 0);
  }
}

}  // namespace herd::sched
