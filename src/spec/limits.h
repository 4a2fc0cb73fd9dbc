// Upper bounds on what one job spec may ask for. A value past a limit is
// almost always a typo (64Ti of memory meant as 64Gi), so specs that exceed
// them are rejected with a message naming the limit.
#pragma once

#include <cstdint>

#include "base/priority.h"

namespace herd::spec {

inline constexpr int64_t kMaxCpuMillis = 1000 * 1000;                          // 1000 cores
inline constexpr int64_t kMaxMemoryBytes = int64_t{64} << 40;                  // 64Ti
inline constexpr int64_t kMaxDiskBytes = int64_t{1} << 50;                     // 1Pi
inline constexpr int64_t kMaxPorts = 64;                                       // per task
inline constexpr int64_t kMaxExtended = 1'000'000;                             // per resource
inline constexpr int64_t kMaxTasks = 100'000;                                  // per job
inline constexpr int64_t kMaxPriorityValue = kMaxPriority;                     // 450
inline constexpr int64_t kMaxGraceMs = 3'600'000;                              // 1h
inline constexpr int64_t kMaxBackoffMs = 3'600'000;                            // 1h
inline constexpr int64_t kMaxRestarts = 10'000;
inline constexpr int64_t kMaxConstraintWeight = 1000;
inline constexpr int64_t kMaxNameLength = 63;      // port names
inline constexpr int64_t kMaxLabelValueLength = 1024;

// Defaults applied by the parser when a field is absent.
inline constexpr int64_t kDefaultGraceMs = 10'000;
inline constexpr int64_t kDefaultBackoffMs = 1'000;
inline constexpr int64_t kDefaultMaxBackoffMs = 60'000;

}  // namespace herd::spec
