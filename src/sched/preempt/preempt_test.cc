#include "sched/preempt/preempt.h"

#include <gtest/gtest.h>

#include "testing/builders.h"

namespace herd::sched {
namespace {

using namespace herd::testing;  // NOLINT

class PreemptTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(s_.Apply(Register(MachineBuilder("m").Cpu(4000).Memory(4LL << 30).Build())).ok());
  }
  void Run(const std::string& name, int32_t prio, int64_t cpu) {
    ASSERT_TRUE(s_.Apply(Submit(JobBuilder(name).Priority(prio).Cpu(cpu).Memory(1 << 20).Build())).ok());
    ASSERT_TRUE(s_.Apply(Schedule("alice/" + name, 0, "m")).ok());
  }
  std::vector<std::string> Victims(int32_t prio, int64_t cpu) {
    ResourceVector need{.cpu_millis = cpu, .memory_bytes = 1 << 20};
    const cell::Machine& m = *s_.FindMachine("m");
    auto p = FindVictims(prio, IsProd(prio), need, m.FreeFor(prio), m, evicted_);
    std::vector<std::string> out;
    if (!p) return {"none"};
    for (const cell::Task* t : p->victims) out.push_back(t->job()->spec.name());
    return out;
  }
  cell::CellState s_;
  absl::flat_hash_set<const cell::Task*> evicted_;
};

TEST_F(PreemptTest, LowestPriorityFirstAndOnlyWhatIsNeeded) {
  Run("free", 0, 1000);
  Run("batch", 100, 1000);
  Run("mid", 116, 2000);
  EXPECT_EQ(Victims(200, 1000), (std::vector<std::string>{"free"}));
  EXPECT_EQ(Victims(200, 2000), (std::vector<std::string>{"free", "batch"}));
  // free(1000)+batch(1000) is not enough, mid(2000) is needed; then batch is
  // given back since free+mid suffice.
  EXPECT_EQ(Victims(200, 3000), (std::vector<std::string>{"free", "mid"}));
  EXPECT_EQ(Victims(100, 1000), (std::vector<std::string>{"free"}));
  EXPECT_EQ(Victims(100, 2000), (std::vector<std::string>{"none"}));
}

TEST_F(PreemptTest, ProductionNeverPreemptsProduction) {
  Run("prod", 150, 4000);
  EXPECT_EQ(Victims(300, 1000), (std::vector<std::string>{"none"}));
  EXPECT_EQ(Victims(400, 1000), (std::vector<std::string>{"prod"}));  // monitoring may
}

TEST_F(PreemptTest, AlreadyEvictedTasksAreNotChosenTwiceAndFreedIsReported) {
  Run("a", 0, 2000);
  Run("b", 0, 2000);
  const cell::Task* a = s_.FindTask("alice/a", 0);
  evicted_.insert(a);
  ResourceVector need{.cpu_millis = 2000, .memory_bytes = 1 << 20};
  const cell::Machine& m = *s_.FindMachine("m");
  auto p = FindVictims(200, true, need, m.Free() + a->resources(), m, evicted_);
  ASSERT_TRUE(p.has_value());
  EXPECT_TRUE(p->victims.empty());  // a's room is already free
  auto q = FindVictims(200, true, ResourceVector{.cpu_millis = 4000}, m.Free() + a->resources(), m, evicted_);
  ASSERT_TRUE(q.has_value());
  ASSERT_EQ(q->victims.size(), 1u);
  EXPECT_EQ(q->freed.cpu_millis, 2000);
}

}  // namespace
}  // namespace herd::sched
