#include "sim/core/driver.h"

#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include "testing/builders.h"

namespace herd::sim {
namespace {

using namespace herd::testing;  // NOLINT

std::vector<v1::Machine> Machines(int n) {
  std::vector<v1::Machine> out;
  for (int i = 0; i < n; ++i) out.push_back(MachineBuilder("m" + std::to_string(i)).Cpu(4000).Address("").Build());
  return out;
}

v1::GetJobResponse Job(Driver& d, const std::string& id) {
  v1::GetJobRequest r;
  r.set_job(id);
  return *d.master().jobs().GetJob(master::Principal::User("sim"), r);
}

TEST(Driver, RunsTheRealMasterOnVirtualTime) {
  DriverOptions o;
  auto d = Driver::Create(o);
  ASSERT_TRUE(d.ok()) << d.status();
  // Each run lasts 10 virtual seconds.
  (*d)->agents().SetScript([](const v1::TaskRun&, int64_t start) {
    return std::optional<std::pair<int64_t, int32_t>>({start + 10'000, 0});
  });
  ASSERT_TRUE((*d)->AddMachines(Machines(3)).ok());
  ASSERT_TRUE((*d)->Submit({JobBuilder("web").Tasks(6).Cpu(1000).Build()}).ok());
  ASSERT_TRUE((*d)->Settle().ok());
  v1::GetJobResponse j = Job(**d, "alice/web");
  EXPECT_EQ(j.job().running(), 6);
  for (const auto& t : j.tasks()) EXPECT_EQ(t.phase(), v1::Task::ACTIVE);
  const int64_t t0 = (*d)->now_ms();
  ASSERT_TRUE((*d)->AdvanceTo(t0 + 12'000).ok());
  j = Job(**d, "alice/web");
  EXPECT_EQ(j.job().state(), v1::Job::DEAD);
  EXPECT_EQ(j.tasks(0).last_event().transition(), v1::Event::FINISH);
  EXPECT_EQ((*d)->agents().started(), 6);
}

TEST(Driver, LostMachinesAreNoticedByTheRealLinkAndTasksMove) {
  auto d = Driver::Create(DriverOptions());
  ASSERT_TRUE(d.ok());
  ASSERT_TRUE((*d)->AddMachines(Machines(2)).ok());
  ASSERT_TRUE((*d)->Submit({JobBuilder("svc").Tasks(2).Cpu(1000).DifferentMachines().Build()}).ok());
  ASSERT_TRUE((*d)->Settle().ok());
  ASSERT_TRUE((*d)->AddMachines({MachineBuilder("spare").Cpu(4000).Address("").Build()}).ok());
  std::string gone = Job(**d, "alice/svc").tasks(0).machine();
  (*d)->agents().SetReachable("sim:" + gone, false);
  ASSERT_TRUE((*d)->AdvanceTo((*d)->now_ms() + 5'000).ok());  // 3 missed polls
  v1::GetJobResponse j = Job(**d, "alice/svc");
  EXPECT_EQ(j.job().running(), 2);
  EXPECT_NE(j.tasks(0).machine(), gone);
  EXPECT_EQ(j.tasks(0).incarnation(), 2);
}

TEST(Driver, IsDeterministic) {
  auto run = [] {
    auto d = Driver::Create(DriverOptions());
    EXPECT_TRUE((*d)->AddMachines(Machines(5)).ok());
    for (int i = 0; i < 10; ++i) {
      EXPECT_TRUE((*d)->Submit({JobBuilder("j" + std::to_string(i)).Tasks(1 + i % 4).Cpu(300 + 100 * i).Build()}).ok());
    }
    EXPECT_TRUE((*d)->AdvanceTo((*d)->now_ms() + 3'000).ok());
    return (*d)->master().committer().Read([](const cell::CellState& s) { return s.ToSnapshot(); });
  };
  v1::CellSnapshot a = run(), b = run();
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(a, b));
  EXPECT_GT(a.revision(), 20);
}

TEST(Driver, StartsFromACheckpoint) {
  cell::CellState s("live");
  std::vector<v1::Mutation> log;
  for (auto m : {Register(MachineBuilder("a").Build()), Submit(JobBuilder("x").Tasks(2).Build())}) {
    m.set_revision(s.revision() + 1);
    m.set_time_ms(1'800'000'000'000);
    ASSERT_TRUE(s.Apply(m).ok());
    log.push_back(m);
  }
  cell::Checkpoint cp;
  cp.snapshot = cell::CellState("live").ToSnapshot();
  cp.log = log;
  auto d = Driver::Create(DriverOptions(), &cp);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ((*d)->revision(), 2);
  EXPECT_EQ((*d)->now_ms(), 1'800'000'000'000);
  ASSERT_TRUE((*d)->Settle().ok());  // "schedule all pending"
  EXPECT_EQ(Job(**d, "alice/x").job().running(), 2);
}

}  // namespace
}  // namespace herd::sim
