#include "sched/plugins/filter/filters.h"

#include <gtest/gtest.h>

#include "sched/equiv/classes.h"
#include "sched/framework/pass_context.h"
#include "testing/builders.h"

namespace herd::sched {
namespace {

using namespace herd::testing;  // NOLINT

class FiltersTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Apply(Register(MachineBuilder("m1").Cpu(1000).Memory(1 << 30).Ports(2).Extended("gpu", 1)
                       .Attr("arch", "amd64").Attr("rack", "r1").Build()));
    Apply(Register(MachineBuilder("m2").Attr("rack", "r1").Build()));
    Apply(Register(MachineBuilder("m3").Attr("rack", "r2").Build()));
    Apply(Down("m3"));
  }
  void Apply(v1::Mutation m) { ASSERT_TRUE(state_.Apply(m).ok()); }
  // Submits `spec` and returns the class of its task `index`, with a pass
  // context over the current state.
  TaskClass Class(const v1::JobSpec& spec, int32_t index = 0, bool shared = true) {
    if (state_.FindJob(spec.user() + "/" + spec.name()) == nullptr) Apply(Submit(spec));
    ctx_ = std::make_unique<PassContext>(state_, options_, now_);
    return MakeClass(*ctx_, state_.FindTask(spec.user() + "/" + spec.name(), index), shared);
  }
  const MachineView& View(const std::string& name) { return ctx_->views()[state_.FindMachine(name)->order()]; }

  cell::CellState state_;
  Options options_;
  int64_t now_ = 1000;
  std::unique_ptr<PassContext> ctx_;
};

TEST_F(FiltersTest, MachineUp) {
  MachineUpFilter f;
  TaskClass c = Class(JobBuilder("a").Build());
  EXPECT_TRUE(f.Filter(*ctx_, c, View("m1")).ok());
  EXPECT_EQ(f.Filter(*ctx_, c, View("m3")).code, ReasonCode::kMachineDown);
  EXPECT_TRUE(f.IsStatic());
}

TEST_F(FiltersTest, InterferenceKeepsNonProdOffAMarkedMachine) {
  InterferenceFilter f;
  EXPECT_FALSE(f.IsStatic());
  TaskClass batch = Class(JobBuilder("b").Priority(100).Build());
  Apply(Interference("m1", "evict"));  // not marked yet: batch may still go
  batch = Class(state_.FindJob("alice/b")->spec);
  EXPECT_TRUE(f.Filter(*ctx_, batch, View("m1")).ok());
  Apply(Interference("m1", "mark"));
  batch = Class(state_.FindJob("alice/b")->spec);
  EXPECT_EQ(f.Filter(*ctx_, batch, View("m1")).code, ReasonCode::kInterference);
  EXPECT_TRUE(f.Filter(*ctx_, batch, View("m2")).ok());
  TaskClass prod = Class(JobBuilder("p").Priority(200).Build());
  EXPECT_TRUE(f.Filter(*ctx_, prod, View("m1")).ok());
  Apply(Interference("m1", ""));  // calm again
  batch = Class(state_.FindJob("alice/b")->spec);
  EXPECT_TRUE(f.Filter(*ctx_, batch, View("m1")).ok());
}

TEST_F(FiltersTest, CrashAvoid) {
  Apply(Submit(JobBuilder("crashy").Build()));
  Apply(Schedule("alice/crashy", 0, "m1"));
  v1::Mutation m = Rescheduled(Ref("alice/crashy", 0, 1), "crash loop", 5000);
  m.set_time_ms(100);
  Apply(m);
  CrashAvoidFilter f;
  TaskClass c = Class(state_.FindJob("alice/crashy")->spec, 0, /*shared=*/false);
  EXPECT_EQ(f.Filter(*ctx_, c, View("m1")).code, ReasonCode::kCrashedHere);
  EXPECT_TRUE(f.Filter(*ctx_, c, View("m2")).ok());
  now_ = 5000;  // expired
  c = Class(state_.FindJob("alice/crashy")->spec, 0, false);
  EXPECT_TRUE(f.Filter(*ctx_, c, View("m1")).ok());
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
      {"c5", v1::Constraint::NOT_IN, {"amd64"}, false, false},
      {"c6", v1::Constraint::EXISTS, {}, false, true},
      {"c7", v1::Constraint::NOT_EXISTS, {}, false, false},
      {"c8", v1::Constraint::NE, {"amd64"}, false, false},
  };
  for (const Case& c : cases) {
    TaskClass cls = Class(JobBuilder(c.name).Constraint("arch", c.op, c.values, c.soft).Build());
    FilterResult res = f.Filter(*ctx_, cls, View("m1"));
    EXPECT_EQ(res.ok(), c.ok) << c.name;
    if (!c.ok) EXPECT_EQ(res.code, ReasonCode::kConstraint);
  }
  TaskClass cls = Class(JobBuilder("c9").Constraint("arch", v1::Constraint::EQ, {"arm64"}).Build());
  EXPECT_EQ(f.Filter(*ctx_, cls, View("m1")).detail, "arch == arm64");
  EXPECT_EQ(f.Filter(*ctx_, cls, View("m2")).detail, "arch == arm64");  // attribute absent
}

TEST_F(FiltersTest, DifferentMachinesAndDomainLimits) {
  DomainLimitFilter f;
  EXPECT_FALSE(f.IsStatic());
  Apply(Submit(JobBuilder("spread").Tasks(3).DifferentMachines().MaxPerDomain("rack", 2).Build()));
  Apply(Schedule("alice/spread", 0, "m1"));
  TaskClass c = Class(state_.FindJob("alice/spread")->spec, 1);
  EXPECT_EQ(f.Filter(*ctx_, c, View("m1")).code, ReasonCode::kDifferentMachines);
  EXPECT_TRUE(f.Filter(*ctx_, c, View("m2")).ok());
  Apply(Schedule("alice/spread", 1, "m2"));
  c = Class(state_.FindJob("alice/spread")->spec, 2);
  // Rack r1 holds two tasks of the job already (m1 and m2).
  EXPECT_EQ(f.Filter(*ctx_, c, View("m2")).code, ReasonCode::kDifferentMachines);
  Apply(Up("m3"));
  c = Class(state_.FindJob("alice/spread")->spec, 2);
  EXPECT_TRUE(f.Filter(*ctx_, c, View("m3")).ok());  // rack r2
  // A third machine on rack r1 is refused for the rack limit.
  Apply(Register(MachineBuilder("m4").Attr("rack", "r1").Build()));
  c = Class(state_.FindJob("alice/spread")->spec, 2);
  EXPECT_EQ(f.Filter(*ctx_, c, View("m4")).code, ReasonCode::kDomainLimit);
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
    TaskClass cls = Class(c.job.Build());
    EXPECT_EQ(f.Filter(*ctx_, cls, View("m1")).code, c.want) << c.name;
  }
  TaskClass tpu = Class(JobBuilder("r6").Build());
  EXPECT_EQ(f.Filter(*ctx_, tpu, View("m1")).detail, "tpu");
}

TEST_F(FiltersTest, ProductionCountsLimitsNonProductionReservations) {
  Apply(Submit(JobBuilder("big").Priority(100).Cpu(800).Build()));
  Apply(Schedule("alice/big", 0, "m1"));
  TaskClass prod = Class(JobBuilder("p").Priority(200).Cpu(300).Build());
  TaskClass batch = Class(JobBuilder("b").Priority(100).Cpu(300).Build());
  const MachineView& m1 = View("m1");
  EXPECT_EQ(m1.FreeFor(prod).cpu_millis, 200);   // capacity - limits
  EXPECT_EQ(m1.FreeFor(batch).cpu_millis, 200);  // capacity - reservations (= limits for now)
  EXPECT_EQ(ResourceFilter().Filter(*ctx_, prod, m1).code, ReasonCode::kInsufficientCpu);
}

}  // namespace
}  // namespace herd::sched
