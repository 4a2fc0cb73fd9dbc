#include "sched/plugins/score/scores.h"

#include <gtest/gtest.h>

#include "testing/builders.h"

namespace herd::sched {
namespace {

using namespace herd::testing;  // NOLINT

TEST(Scores, BestFitPrefersFullerWorstFitEmptier) {
  cell::CellState s;
  ASSERT_TRUE(s.Apply(Register(MachineBuilder("empty").Cpu(4000).Memory(4LL << 30).Build())).ok());
  ASSERT_TRUE(s.Apply(Register(MachineBuilder("half").Cpu(4000).Memory(4LL << 30).Build())).ok());
  ASSERT_TRUE(s.Apply(Submit(JobBuilder("filler").Cpu(2000).Memory(2LL << 30).Build())).ok());
  ASSERT_TRUE(s.Apply(Schedule("alice/filler", 0, "half")).ok());
  ASSERT_TRUE(s.Apply(Submit(JobBuilder("x").Cpu(1000).Memory(1LL << 30).Build())).ok());
  const cell::Task* t = s.FindTask("alice/x", 0);
  TaskRequest req{t, t->job, t->priority(), t->resources};
  MachineView empty{s.FindMachine("empty"), s.FindMachine("empty")->Free()};
  MachineView half{s.FindMachine("half"), s.FindMachine("half")->Free()};
  BestFitScore best;
  WorstFitScore worst;
  EXPECT_DOUBLE_EQ(best.Score(req, empty), 25.0);
  EXPECT_DOUBLE_EQ(best.Score(req, half), 75.0);
  EXPECT_GT(worst.Score(req, empty), worst.Score(req, half));
  EXPECT_DOUBLE_EQ(UtilisationAfter(req, half), 0.75);
}

}  // namespace
}  // namespace herd::sched
