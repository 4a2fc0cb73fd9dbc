#include "sched/queue/queue.h"

#include <gtest/gtest.h>

#include "testing/builders.h"

namespace herd::sched {
namespace {

using namespace herd::testing;  // NOLINT

std::vector<std::string> Names(const std::vector<const cell::Task*>& v) {
  std::vector<std::string> out;
  for (const cell::Task* t : v) out.push_back(t->job->id + "/" + std::to_string(t->index));
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

}  // namespace
}  // namespace herd::sched
