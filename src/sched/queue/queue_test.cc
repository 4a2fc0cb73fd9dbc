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

// A framework's pending task (label herd.framework, issue #17) is placed only
// by its framework: the built-in scheduler neither queues nor places it,
// while the other jobs go on as before.
TEST(Queue, FrameworkTasksAreLeftToTheirFramework) {
  cell::CellState s;
  ASSERT_TRUE(s.Apply(Register(MachineBuilder("m").Cpu(8000).Memory(16LL << 30).Build())).ok());
  v1::JobSpec fw = JobBuilder("fw-1-t", "alice").Tasks(1).Cpu(100).Memory(64 << 20).Build();
  (*fw.mutable_labels())["herd.framework"] = "0123abcd";
  ASSERT_TRUE(s.Apply(Submit(fw)).ok());
  ASSERT_TRUE(s.Apply(Submit(JobBuilder("plain", "bob").Tasks(2).Cpu(100).Memory(64 << 20).Build())).ok());
  EXPECT_EQ(Names(OrderPending(s, 0)), (std::vector<std::string>{"bob/plain/0", "bob/plain/1"}));
  auto n = PlacedPerUser(s, QueueOrder::kRoundRobin);
  EXPECT_EQ(n["alice"], 0);
  EXPECT_EQ(n["bob"], 2);
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

// TaskOrder::kLargest: within one user and priority, the hardest tasks first
// (dominant share of a typical machine x scarcity); priorities and the
// users' turns are unchanged, equal tasks keep submission order.
TEST(Queue, LargestFirstWithinAUser) {
  cell::CellState s;
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(s.Apply(Register(MachineBuilder("m" + std::to_string(i)).Cpu(10'000).Memory(10LL << 30).Build()))
                    .ok());
  }
  ASSERT_TRUE(s.Apply(Submit(JobBuilder("a-small", "alice").Tasks(2).Cpu(1000).Memory(1LL << 30).Build())).ok());
  ASSERT_TRUE(s.Apply(Submit(JobBuilder("b-big", "alice").Tasks(1).Cpu(5000).Memory(1LL << 30).Build())).ok());
  // Memory-dominant: 6 GiB of 10 is harder than 5 cores of 10.
  ASSERT_TRUE(s.Apply(Submit(JobBuilder("c-mem", "alice").Tasks(1).Cpu(100).Memory(6LL << 30).Build())).ok());
  ASSERT_TRUE(s.Apply(Submit(JobBuilder("d-small", "alice").Tasks(1).Cpu(1000).Memory(1LL << 30).Build())).ok());
  ASSERT_TRUE(s.Apply(Submit(JobBuilder("x", "bob").Tasks(2).Cpu(500).Memory(1LL << 30).Build())).ok());
  ASSERT_TRUE(s.Apply(Submit(JobBuilder("y", "bob").Tasks(1).Cpu(2000).Memory(1LL << 30).Build())).ok());
  ASSERT_TRUE(s.Apply(Submit(JobBuilder("urgent", "carol").Tasks(1).Cpu(100).Priority(200).Build())).ok());
  EXPECT_EQ(Names(OrderPending(s, 0, QueueOrder::kRoundRobin, TaskOrder::kLargest)),
            (std::vector<std::string>{"carol/urgent/0", "alice/c-mem/0", "bob/y/0", "alice/b-big/0", "bob/x/0",
                                      "alice/a-small/0", "bob/x/1", "alice/a-small/1", "alice/d-small/0"}));
  // Submission order (the default) is unchanged.
  EXPECT_EQ(Names(OrderPending(s, 0))[1], "alice/a-small/0");
}

// Scarcity: a small task that only 1 of 4 machines can take (a hard
// constraint, or an extended resource only it has) goes before a task twice
// its size that any machine can take.
TEST(Queue, LargestFirstCountsScarcity) {
  cell::CellState s;
  ASSERT_TRUE(s.Apply(Register(MachineBuilder("gpu").Cpu(10'000).Memory(10LL << 30).Attr("gpu_model", "P100")
                                   .Extended("gpu_milli", 2000).Build()))
                  .ok());
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(s.Apply(Register(MachineBuilder("m" + std::to_string(i)).Cpu(10'000).Memory(10LL << 30).Build()))
                    .ok());
  }
  ASSERT_TRUE(s.Apply(Submit(JobBuilder("a-any", "alice").Tasks(1).Cpu(2000).Memory(1LL << 30).Build())).ok());
  ASSERT_TRUE(s.Apply(Submit(JobBuilder("b-pinned", "alice").Tasks(1).Cpu(1000).Memory(1LL << 30)
                                 .Constraint("gpu_model", v1::Constraint::EQ, {"P100"}).Build()))
                  .ok());
  // 1 CPU and 0.1 GPU (1/20 of the one GPU machine's): only 1 of 4 homes.
  ASSERT_TRUE(s.Apply(Submit(JobBuilder("c-gpu", "alice").Tasks(1).Cpu(1000).Memory(1LL << 30)
                                 .Extended("gpu_milli", 100).Build()))
                  .ok());
  // Twice as large, 4 homes: after them. Pinned (0.1 x 4) and GPU (0.1 x 4) tie: submission order.
  EXPECT_EQ(Names(OrderPending(s, 0, QueueOrder::kRoundRobin, TaskOrder::kLargest)),
            (std::vector<std::string>{"alice/b-pinned/0", "alice/c-gpu/0", "alice/a-any/0"}));
}

// What the order is for: first-fit-decreasing packs tighter. Two machines of
// 10 cores and tasks of 4, 4, 6, 6 cores (submitted in that order): best fit
// in submission order puts both 4s on one machine and a 6 finds no room;
// largest first places all four.
TEST(Queue, LargestFirstPacksTighter) {
  cell::CellState s;
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(s.Apply(Register(MachineBuilder("m" + std::to_string(i)).Cpu(10'000).Memory(64LL << 30).Build()))
                    .ok());
  }
  for (const auto& [name, cpu] : std::vector<std::pair<std::string, int64_t>>{
           {"a", 4000}, {"b", 4000}, {"c", 6000}, {"d", 6000}}) {
    ASSERT_TRUE(s.Apply(Submit(JobBuilder(name, "alice").Tasks(1).Cpu(cpu).Memory(1LL << 30).Build())).ok());
  }
  auto unplaced = [&](TaskOrder order) {
    Options o;
    o.policy = PackingPolicy::kBestFit;
    o.task_order = order;
    return Scheduler(o).RunPass(s).unplaced;
  };
  EXPECT_EQ(unplaced(TaskOrder::kSubmission), 1);
  EXPECT_EQ(unplaced(TaskOrder::kLargest), 0);
}

TEST(Queue, ParseTaskOrder) {
  EXPECT_EQ(*ParseTaskOrder("fifo"), TaskOrder::kSubmission);
  EXPECT_EQ(*ParseTaskOrder("largest"), TaskOrder::kLargest);
  EXPECT_FALSE(ParseTaskOrder("smallest").ok());
}

}  // namespace
}  // namespace herd::sched
