#include "master/core/frameworks/allocator.h"

#include <gtest/gtest.h>

namespace herd::master::frameworks {
namespace {

ResourceVector R(int64_t cpu_millis, int64_t memory_gib) {
  ResourceVector r;
  r.cpu_millis = cpu_millis;
  r.memory_bytes = memory_gib << 30;
  return r;
}

// Frameworks that take one task of their shape from each offer that fits it
// and give the rest back, as the Mesos paper's example: offers go round
// until a round launches nothing. Returns tasks launched per framework.
std::map<std::string, int> RunToFixpoint(DrfAllocator& a, std::map<std::string, ResourceVector> demand,
                                         ResourceVector machine, int64_t now = 0) {
  std::map<std::string, int> tasks;
  ResourceVector used;
  for (int round = 0; round < 100; ++round) {
    std::vector<MachineSlack> slack = {{"m0", machine - used, {}}};
    std::vector<Offer> offers = a.Round(slack, machine, now);
    bool launched = false;
    for (const Offer& o : offers) {
      const ResourceVector& want = demand.at(o.framework);
      if (want.FitsIn(o.resources)) {
        ++tasks[o.framework];
        used += want;
        a.Recover(o.framework, o.resources - want);
        launched = true;
      } else {
        a.Recover(o.framework, o.resources);
      }
    }
    if (!launched) break;
  }
  return tasks;
}

TEST(DrfAllocator, TheMesosPapersExample) {
  // 9 CPUs and 18 GB; A's tasks <1 CPU, 4 GB>, B's <3 CPUs, 1 GB>: DRF
  // equalises dominant shares at 2/3, A with 3 tasks (memory) and B with 2
  // (CPU).
  DrfAllocator a;
  ASSERT_TRUE(a.AddFramework("A", "").ok());
  ASSERT_TRUE(a.AddFramework("B", "").ok());
  std::map<std::string, int> tasks = RunToFixpoint(a, {{"A", R(1000, 4)}, {"B", R(3000, 1)}}, R(9000, 18));
  EXPECT_EQ(tasks["A"], 3);
  EXPECT_EQ(tasks["B"], 2);
  EXPECT_NEAR(a.DominantShare("A", R(9000, 18)), 2.0 / 3, 1e-9);
  EXPECT_NEAR(a.DominantShare("B", R(9000, 18)), 2.0 / 3, 1e-9);
}

TEST(DrfAllocator, TheLowestDominantShareGetsTheNextOffer) {
  DrfAllocator a;
  ASSERT_TRUE(a.AddFramework("x", "").ok());
  ASSERT_TRUE(a.AddFramework("y", "").ok());
  const ResourceVector total = R(10'000, 100);
  a.Allocate("x", R(1'000, 40));  // dominant: memory 40%
  a.Allocate("y", R(3'000, 1));   // dominant: CPU 30%
  std::vector<Offer> o = a.Round({{"m1", R(2'000, 8), {}}}, total, 0);
  ASSERT_EQ(o.size(), 1u);
  EXPECT_EQ(o[0].framework, "y");
  EXPECT_EQ(o[0].resources, R(2'000, 8));
  EXPECT_EQ(a.Held("y"), R(5'000, 9));  // an outstanding offer counts as held
  // Declined: given back.
  a.Recover("y", o[0].resources);
  EXPECT_EQ(a.Held("y"), R(3'000, 1));
}

TEST(DrfAllocator, WeightsDivideShares) {
  DrfAllocator a;
  ASSERT_TRUE(a.SetRole("big", 2, {}).ok());
  ASSERT_TRUE(a.AddFramework("b", "big").ok());
  ASSERT_TRUE(a.AddFramework("s", "small").ok());
  std::map<std::string, int> tasks = RunToFixpoint(a, {{"b", R(1000, 1)}, {"s", R(1000, 1)}}, R(9000, 90));
  EXPECT_EQ(tasks["b"], 6);  // twice the other's
  EXPECT_EQ(tasks["s"], 3);
  EXPECT_FALSE(a.SetRole("bad", 0, {}).ok());
  EXPECT_FALSE(a.SetRole("", 1, {}).ok());
}

TEST(DrfAllocator, ARoleBelowItsGuaranteeComesFirst) {
  DrfAllocator a;
  ASSERT_TRUE(a.SetRole("prod", 1, R(4000, 4)).ok());
  ASSERT_TRUE(a.AddFramework("p", "prod").ok());
  ASSERT_TRUE(a.AddFramework("q", "other").ok());
  a.Allocate("p", R(3000, 3));  // a larger share than q's, but under its guarantee
  std::vector<Offer> o = a.Round({{"m", R(1000, 1), {}}}, R(10'000, 10), 0);
  ASSERT_EQ(o.size(), 1u);
  EXPECT_EQ(o[0].framework, "p");
  // At its guarantee: plain DRF again.
  o = a.Round({{"m", R(1000, 1), {}}}, R(10'000, 10), 0);
  ASSERT_EQ(o.size(), 1u);
  EXPECT_EQ(o[0].framework, "q");
}

TEST(DrfAllocator, FiltersAreHonoured) {
  DrfAllocator a;
  ASSERT_TRUE(a.AddFramework("f", "").ok());
  ASSERT_TRUE(a.AddFramework("g", "").ok());
  const ResourceVector total = R(8000, 8);
  // f refuses m1 until t=5000; g wants machines with gpu=a100 only.
  a.Decline("f", "m1", 5000);
  a.RequireAttributes("g", {{"gpu", "a100"}});
  std::vector<MachineSlack> slack = {{"m1", R(1000, 1), {{"gpu", "t4"}}}};
  EXPECT_TRUE(a.Round(slack, total, 4999).empty());  // neither may have it
  std::vector<Offer> o = a.Round(slack, total, 5000);  // f's filter expired
  ASSERT_EQ(o.size(), 1u);
  EXPECT_EQ(o[0].framework, "f");
  a.Recover("f", o[0].resources);
  a.Allocate("f", R(4000, 4));  // f now far ahead in share
  o = a.Round({{"m2", R(1000, 1), {{"gpu", "a100"}}}}, total, 5000);
  ASSERT_EQ(o.size(), 1u);
  EXPECT_EQ(o[0].framework, "g");
  // An inactive (disconnected) framework gets nothing.
  a.Recover("g", o[0].resources);
  a.SetActive("g", false);
  o = a.Round({{"m2", R(1000, 1), {{"gpu", "a100"}}}}, total, 5000);
  ASSERT_EQ(o.size(), 1u);
  EXPECT_EQ(o[0].framework, "f");
}

TEST(DrfAllocator, SlackTooSmallIsNotOfferedAndRecoverNeverGoesNegative) {
  DrfAllocator a;
  ASSERT_TRUE(a.AddFramework("f", "").ok());
  EXPECT_FALSE(a.AddFramework("f", "").ok());
  ResourceVector tiny = R(5, 1);
  EXPECT_TRUE(a.Round({{"m", tiny, {}}}, R(1000, 1), 0).empty());
  a.Recover("f", R(1000, 1));
  EXPECT_EQ(a.Held("f"), ResourceVector());
  a.RemoveFramework("f");
  EXPECT_FALSE(a.HasFramework("f"));
  EXPECT_EQ(a.Held("f"), ResourceVector());
}

}  // namespace
}  // namespace herd::master::frameworks
