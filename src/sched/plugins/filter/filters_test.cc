#include "sched/plugins/filter/filters.h"

#include <gtest/gtest.h>

#include "testing/builders.h"

namespace herd::sched {
namespace {

using namespace herd::testing;  // NOLINT

class FiltersTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(state_.Apply(Register(MachineBuilder("m1").Cpu(1000).Memory(1 << 30).Ports(2)
                                          .Extended("gpu", 1).Attr("arch", "amd64").Build())).ok());
    ASSERT_TRUE(state_.Apply(Register(MachineBuilder("m2").Build())).ok());
    ASSERT_TRUE(state_.Apply(Down("m2")).ok());
  }
  TaskRequest Req(const v1::JobSpec& spec) {
    v1::Mutation m = Submit(spec);
    EXPECT_TRUE(state_.Apply(m).ok());
    const cell::Task* t = state_.FindTask(spec.user() + "/" + spec.name(), 0);
    return TaskRequest{t, t->job, t->priority(), t->resources};
  }
  MachineView View(const std::string& name) {
    const cell::Machine* m = state_.FindMachine(name);
    return MachineView{m, m->Free()};
  }
  cell::CellState state_;
};

TEST_F(FiltersTest, MachineUp) {
  MachineUpFilter f;
  TaskRequest r = Req(JobBuilder("a").Build());
  EXPECT_TRUE(f.Filter(r, View("m1")).ok());
  EXPECT_EQ(f.Filter(r, View("m2")).code, ReasonCode::kMachineDown);
}

TEST_F(FiltersTest, Constraints) {
  ConstraintFilter f;
  struct Case {
    std::string name;
    v1::Constraint::Op op;
    std::vector<std::string> values;
    bool soft;
    bool ok;
  } cases[] = {
      {"c1", v1::Constraint::EQ, {"amd64"}, false, true},
      {"c2", v1::Constraint::EQ, {"arm64"}, false, false},
      {"c3", v1::Constraint::EQ, {"arm64"}, true, true},  // soft: never filters
      {"c4", v1::Constraint::IN, {"arm64", "amd64"}, false, true},
      {"c5", v1::Constraint::NOT_EXISTS, {}, false, false},
  };
  for (const Case& c : cases) {
    TaskRequest r = Req(JobBuilder(c.name).Constraint("arch", c.op, c.values, c.soft).Build());
    FilterResult res = f.Filter(r, View("m1"));
    EXPECT_EQ(res.ok(), c.ok) << c.name;
    if (!c.ok) EXPECT_EQ(res.code, ReasonCode::kConstraint);
  }
  TaskRequest r = Req(JobBuilder("c6").Constraint("arch", v1::Constraint::EQ, {"arm64"}).Build());
  EXPECT_EQ(f.Filter(r, View("m1")).detail, "arch == arm64");
}

TEST_F(FiltersTest, Resources) {
  ResourceFilter f;
  struct Case {
    std::string name;
    JobBuilder job;
    ReasonCode want;
  } cases[] = {
      {"fits", JobBuilder("r1").Cpu(1000).Memory(1 << 30).Ports(2).Extended("gpu", 1), ReasonCode::kOk},
      {"cpu", JobBuilder("r2").Cpu(1001), ReasonCode::kInsufficientCpu},
      {"memory", JobBuilder("r3").Memory((1 << 30) + 1), ReasonCode::kInsufficientMemory},
      {"ports", JobBuilder("r4").Ports(3), ReasonCode::kInsufficientPorts},
      {"gpu", JobBuilder("r5").Extended("gpu", 2), ReasonCode::kInsufficientExtended},
      {"tpu", JobBuilder("r6").Extended("tpu", 1), ReasonCode::kInsufficientExtended},
  };
  for (auto& c : cases) {
    FilterResult res = f.Filter(Req(c.job.Build()), View("m1"));
    EXPECT_EQ(res.code, c.want) << c.name;
  }
}

}  // namespace
}  // namespace herd::sched
