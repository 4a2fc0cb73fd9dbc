#include "agent/cgroup/evict.h"

#include <algorithm>

#include "base/priority.h"

namespace herd::agent {

std::vector<std::string> ChooseEvictions(std::vector<EvictionCandidate> runs, int64_t shortfall_bytes) {
  std::vector<std::string> out;
  if (shortfall_bytes <= 0) return out;
  std::erase_if(runs, [](const EvictionCandidate& c) { return IsProd(c.priority); });
  std::sort(runs.begin(), runs.end(), [](const EvictionCandidate& a, const EvictionCandidate& b) {
    if (a.priority != b.priority) return a.priority < b.priority;
    if (a.memory_bytes != b.memory_bytes) return a.memory_bytes > b.memory_bytes;
    return a.run_id < b.run_id;
  });
  int64_t freed = 0;
  for (const EvictionCandidate& c : runs) {
    if (freed >= shortfall_bytes) break;
    out.push_back(c.run_id);
    freed += std::max<int64_t>(0, c.memory_bytes);
  }
  return out;
}

int64_t MemoryShortfall(int64_t mem_available_bytes, int64_t reserve_bytes, int64_t capacity_bytes,
                        int64_t runs_usage_bytes) {
  int64_t shortfall = 0;
  if (mem_available_bytes >= 0) shortfall = std::max(shortfall, reserve_bytes - mem_available_bytes);
  if (capacity_bytes > 0) {
    shortfall = std::max(shortfall, runs_usage_bytes - (capacity_bytes - reserve_bytes));
  }
  return shortfall;
}

}  // namespace herd::agent
