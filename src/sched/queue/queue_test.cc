#include "sched/queue/queue.h"

#include <gtest/gtest.h>

#include "sched/scheduler.h"
#include "testing/builders.h"

namespace herd::sched {
namespace {

using namespace herd::testing;  // NOLINT

std::vector<std::string> Names(const std::vector<const cell::Task*>& v) {
  std::vector<std::string> out;
  for (const cell::Task* t : v) out.push_back(t->job()->id + "/" + std::to_string(t->index()));
  return out;
}

TEST(Queue, HighPriorityFirstThenRoundRobinAcrossUsers) {
  cell::CellState s;
  ASSERT_TRUE(s.Apply(Submit(JobBuilder("big", "alice").Tasks(4).Priority(100).Build())).ok());
  ASSERT_TRUE(s.Apply(Submit(JobBuilder("small", "bob").Tasks(2).Priority(100).Build())).ok());
  ASSERT_TRUE(s.Apply(Submit(JobBuilder("urgent", "carol").Tasks(1).Priority(200).Build())).ok());
  EXPECT_EQ(Names(OrderPending(s, 0)),
            (std::vector<std::string>{"carol/urgent/0", "alice/big/0", "bob/small/0", "alice/big/1",
                                      "bob/small/1", "alice/big/2", "alice/big/3"}));
  // The next pass lets the other user go first.
  EXPECT_EQ(Names(OrderPending(s, 1))[1], "bob/small/0");
}

// Counts placed tasks per user after one pass.
std::map<std::string, int> PlacedPerUser(const cell::CellState& s, QueueOrder order) {
  Options o;
  o.order = order;
  o.policy = PackingPolicy::kBestFit;
  PassResult r = Scheduler(o).RunPass(s);
  std::map<std::string, int> n;
  for (const auto& p : r.proposals) ++n[s.FindJob(p.job())->spec.user()];
  return n;
}

// The Mesos seed's example: 9 CPUs and 18 GB; user A's tasks need <1 CPU,
// 4 GB>, user B's <3 CPU, 1 GB>. DRF equalises dominant shares: A gets 3
// tasks, B gets 2.
TEST(Queue, DrfOnTheMesosExample) {
  cell::CellState s;
  ASSERT_TRUE(s.Apply(Register(MachineBuilder("m").Cpu(9000).Memory(18LL << 30).Build())).ok());
  ASSERT_TRUE(s.Apply(Submit(JobBuilder("a", "usera").Tasks(10).Cpu(1000).Memory(4LL << 30).Build())).ok());
  ASSERT_TRUE(s.Apply(Submit(JobBuilder("b", "userb").Tasks(10).Cpu(3000).Memory(1LL << 30).Build())).ok());
  auto n = PlacedPerUser(s, QueueOrder::kDrf);
  EXPECT_EQ(n["usera"], 3);
  EXPECT_EQ(n["userb"], 2);
}

// The seed's larger example, where DRF and round-robin differ: 100 CPUs and
// 100 GB; F1 <4 CPU, 1 GB>, F2 <1 CPU, 8 GB>. DRF: F1 20 tasks, F2 10.
TEST(Queue, DrfDiffersFromRoundRobin) {
  cell::CellState s;
  ASSERT_TRUE(s.Apply(Register(MachineBuilder("m").Cpu(100'000).Memory(100LL << 30).Build())).ok());
  ASSERT_TRUE(s.Apply(Submit(JobBuilder("f1", "f1").Tasks(40).Cpu(4000).Memory(1LL << 30).Build())).ok());
  ASSERT_TRUE(s.Apply(Submit(JobBuilder("f2", "f2").Tasks(40).Cpu(1000).Memory(8LL << 30).Build())).ok());
  auto drf = PlacedPerUser(s, QueueOrder::kDrf);
  EXPECT_EQ(drf["f1"], 20);
  EXPECT_EQ(drf["f2"], 10);
  auto rr = PlacedPerUser(s, QueueOrder::kRoundRobin);
  EXPECT_EQ(rr["f1"], 12);  // alternating: memory runs out after 11 of each, then one more f1
  EXPECT_EQ(rr["f2"], 11);
}

}  // namespace
}  // namespace herd::sched
