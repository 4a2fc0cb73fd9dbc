#include "sched/diagnosis/diagnosis.h"

#include <gtest/gtest.h>

#include "sched/equiv/classes.h"
#include "sched/framework/pass_context.h"
#include "testing/builders.h"

namespace herd::sched {
namespace {

using namespace herd::testing;  // NOLINT

TEST(Diagnosis, HistogramAndSuggestions) {
  cell::CellState s;
  for (int i = 0; i < 6; ++i) {
    ASSERT_TRUE(s.Apply(Register(MachineBuilder("amd" + std::to_string(i)).Memory((2LL + i) << 30)
                                     .Attr("arch", "amd64").Build())).ok());
  }
  ASSERT_TRUE(s.Apply(Register(MachineBuilder("arm").Memory(64LL << 30).Attr("arch", "arm64").Build())).ok());
  ASSERT_TRUE(s.Apply(Down("amd0")).ok());
  ASSERT_TRUE(s.Apply(Submit(JobBuilder("big").Tasks(2).Memory(16LL << 30)
                                 .Constraint("arch", v1::Constraint::EQ, {"amd64"}).Build())).ok());
  Options o;
  PassContext ctx(s, o, 0);
  Profile p = MustBuildProfile(o);
  TaskClass c = MakeClass(ctx, s.FindTask("alice/big", 0), true);
  Diagnosis d = Diagnose(ctx, p, c);
  EXPECT_EQ(d.ToString(), "0/7 machines fit: 5 insufficient memory, 1 constraint arch == amd64, 1 machine down");
  ASSERT_GE(d.suggestions.size(), 2u);
  // Two tasks pending: the second-largest free memory among amd64 machines
  // fits both (6Gi and 7Gi machines).
  EXPECT_EQ(d.suggestions[0], "memory <= 6Gi (asks 16Gi) fits on 2 machines");
  EXPECT_EQ(d.suggestions[1], "without constraint arch == amd64: 1 more machine fit");
  v1::PendingDiagnosis pd;
  d.ToProto(&pd);
  EXPECT_EQ(pd.reasons().at("insufficient memory"), 5);
  EXPECT_EQ(pd.text(), d.ToString());
}

}  // namespace
}  // namespace herd::sched
