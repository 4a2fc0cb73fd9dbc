// Which runs the agent kills when the machine runs short of memory (Borg
// §6.2: non-compressible resources are reclaimed by killing the lowest
// priority tasks). Pure, so it is tested by tables.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace herd::agent {

struct EvictionCandidate {
  std::string run_id;
  int32_t priority = 0;
  int64_t memory_bytes = 0;  // what killing it frees (its working set)
};

// Runs to kill, in order, to free `shortfall_bytes`: non-prod runs
// (base/priority.h IsProd: never the production or monitoring bands),
// lowest priority first; among equal priorities the largest user first (fewer
// kills), then by run id (deterministic). Stops as soon as the freed memory
// covers the shortfall; if even every non-prod run is not enough, all of them
// (prod runs keep running: the machine stays short). Nothing if
// shortfall_bytes <= 0.
std::vector<std::string> ChooseEvictions(std::vector<EvictionCandidate> runs, int64_t shortfall_bytes);

// How short the machine is, in bytes (<= 0: not short). Two signals, the
// larger wins: the kernel's MemAvailable below the agent's reserve, and
// (when the machine's memory capacity is known) the runs' total usage above
// capacity - reserve.
int64_t MemoryShortfall(int64_t mem_available_bytes, int64_t reserve_bytes, int64_t capacity_bytes,
                        int64_t runs_usage_bytes);

}  // namespace herd::agent
