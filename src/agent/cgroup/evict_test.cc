// The eviction choice (pure): lowest priority first, never prod, stop once
// the rest fit.
#include "agent/cgroup/evict.h"

#include <gtest/gtest.h>

namespace herd::agent {
namespace {

using V = std::vector<std::string>;
constexpr int64_t kMi = 1 << 20;

TEST(ChooseEvictions, Table) {
  const std::vector<EvictionCandidate> runs = {
      {"prod", 200, 900 * kMi},   {"mon", 360, 10 * kMi},  {"batch-big", 100, 300 * kMi},
      {"batch-small", 100, 50 * kMi}, {"free", 0, 20 * kMi}, {"mid", 116, 200 * kMi},
      {"prod-low-edge", 120, 5 * kMi}, {"mid-top", 119, 1 * kMi},
  };
  struct Case {
    const char* name;
    int64_t shortfall;
    V want;
  } cases[] = {
      {"not short", 0, {}},
      {"negative", -5, {}},
      {"one byte: the lowest priority", 1, {"free"}},
      {"the lowest is not enough: next band, largest first", 21 * kMi, {"free", "batch-big"}},
      {"exactly covered stops", 320 * kMi, {"free", "batch-big"}},
      {"more", 321 * kMi, {"free", "batch-big", "batch-small"}},
      {"everything non-prod, never prod", 100'000 * kMi, {"free", "batch-big", "batch-small", "mid", "mid-top"}},
  };
  for (const Case& c : cases) EXPECT_EQ(ChooseEvictions(runs, c.shortfall), c.want) << c.name;
}

TEST(ChooseEvictions, OnlyProdLeftEvictsNothing) {
  EXPECT_EQ(ChooseEvictions({{"a", 200, kMi}, {"b", 120, kMi}, {"c", 400, kMi}}, 1000 * kMi), V{});
}

TEST(ChooseEvictions, TiesByRunId) {
  EXPECT_EQ(ChooseEvictions({{"b", 5, kMi}, {"a", 5, kMi}, {"c", 5, kMi}}, kMi + 1), (V{"a", "b"}));
}

TEST(MemoryShortfall, Table) {
  struct Case {
    int64_t available, reserve, capacity, usage, want;
  } cases[] = {
      {1000, 256, 0, 0, 0},          // plenty available, no capacity
      {200, 256, 0, 0, 56},          // below the reserve
      {-1, 256, 0, 999, 0},          // unknown available, no capacity
      {1000, 256, 1024, 700, 0},     // usage fits capacity - reserve (768)
      {1000, 256, 1024, 800, 32},    // usage over capacity - reserve
      {100, 256, 1024, 800, 156},    // both: the larger wins
  };
  for (const Case& c : cases) {
    EXPECT_EQ(MemoryShortfall(c.available, c.reserve, c.capacity, c.usage), c.want)
        << c.available << " " << c.reserve << " " << c.capacity << " " << c.usage;
  }
}

}  // namespace
}  // namespace herd::agent
