// Devices (GPUs and the like) as the scheduler sees them. An extended
// resource named "<kind>_milli" (e.g. openb's "gpu_milli") counts devices of
// kDeviceMillis each: a machine with capacity gpu_milli=8000 has 8 GPUs. A
// request below one device is a share of one device (it must fit on a single
// device: 0.5 GPU cannot be made of two 0.25 halves); a request of one device
// or more takes that many whole devices (rounded up). Other extended
// resources stay pooled counts.
//
// The cell records what each task asked for, not which device it got, so the
// scheduler derives a machine's devices from its tasks at the start of each
// pass in one canonical way (whole-device tasks first, then shares by best
// fit, largest first) and places its own tasks onto them as it goes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "base/resources.h"

namespace herd::sched {

inline constexpr int64_t kDeviceMillis = 1000;

// True for extended resources counted per device ("<kind>_milli").
bool IsDeviceResource(absl::string_view name);

// Devices needed for a request of `milli` (whole devices), 0 for a share.
inline int64_t WholeDevices(int64_t milli) {
  return milli >= kDeviceMillis ? (milli + kDeviceMillis - 1) / kDeviceMillis : 0;
}

// One device resource of one machine: free milli-units per device.
struct DeviceSet {
  std::string name;
  std::vector<int32_t> free;

  int64_t TotalFree() const;
  int64_t FullyFree() const;  // devices with nothing on them
  // Could a request of `milli` go here?
  bool Fits(int64_t milli) const;
  // Places it (best fit for a share, the lowest fully free devices for whole
  // ones); false, changing nothing, when it does not fit.
  bool Take(int64_t milli);
};

// All device resources of one machine. Empty for most machines.
struct Devices {
  std::vector<DeviceSet> sets;

  bool empty() const { return sets.empty(); }
  const DeviceSet* Find(absl::string_view name) const;
  // Every device resource of `need` fits (resources the machine does not
  // count per device are not checked here).
  bool Fits(const ResourceVector& need) const;
  // The first device resource of `need` that does not fit, or "" (a view
  // of the name in `need`).
  absl::string_view Shortfall(const ResourceVector& need) const;
  // Takes every device resource of `need`; false when one does not fit (the
  // sets may then be partly taken: callers check Fits first).
  bool Take(const ResourceVector& need);
  int64_t TotalFree() const;
  int64_t Capacity() const;  // milli-units

  // A machine's devices from its capacity, empty when it has none.
  static Devices ForCapacity(const ResourceVector& capacity);
  // Places `requests` canonically: whole-device requests first (largest
  // first), then shares by best fit, largest first. A request that does not
  // fit (the cell over-committed its devices, or a share packing no
  // heuristic reproduces) leaves that set with nothing free: conservative.
  void PlaceAll(std::vector<ResourceVector> requests);
};

}  // namespace herd::sched
