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
inline constexpr int64_t kMaxUpdateWaitMs = 86'400'000;  // 1 day: update.min_healthy_time, progress_deadline
inline constexpr int64_t kMaxConstraintWeight = 1000;
inline constexpr int64_t kMaxNameLength = 63;      // port names
inline constexpr int64_t kMaxLabelValueLength = 1024;
// Counts inside one job or request (issue #33, M6: 200k labels, 100k
// constraints or 50k jobs in one request went through and cost the master
// hundreds of MB).
inline constexpr int64_t kMaxLabels = 64;            // per job
inline constexpr int64_t kMaxConstraints = 128;      // per job, hard and soft
inline constexpr int64_t kMaxPackages = 32;          // per task
inline constexpr int64_t kMaxDomainLimits = 16;      // max_per_domain entries
inline constexpr int64_t kMaxJobsPerRequest = 10'000;
// What a task's command line and environment may hold (Linux's own limit
// for one string is 128 KiB, for all of them together a few MiB): a spec
// past these is a mistake or an attack on the master's memory.
inline constexpr int64_t kMaxArgs = 4096;                 // command + args
inline constexpr int64_t kMaxArgBytes = 32 << 10;         // one argument
inline constexpr int64_t kMaxEnvVars = 1024;
inline constexpr int64_t kMaxEnvNameBytes = 256;
inline constexpr int64_t kMaxEnvValueBytes = 32 << 10;    // one value
inline constexpr int64_t kMaxCommandBytes = 256 << 10;    // argv and env together
inline constexpr int64_t kMaxSpecFileBytes = 4 << 20;     // a spec file as read

// Defaults applied by the parser when a field is absent.
inline constexpr int64_t kDefaultGraceMs = 10'000;
inline constexpr int64_t kDefaultBackoffMs = 1'000;
inline constexpr int64_t kDefaultMaxBackoffMs = 60'000;

}  // namespace herd::spec
