// For tests of the master's parts: a master core on an in-memory store and
// a ManualClock that polls and schedules nothing by itself, so the test
// plays the scheduler and the agents, and moves time.
//
//   class MyTest : public ManualMasterTest {
//     void SetUp() override { Open(); AddMachine(MachineBuilder("m0").Build()); }
//   };
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "master/core/master_core.h"
#include "store/log_store.h"
#include "testing/builders.h"
#include "testing/fake_agent_link.h"

namespace herd::master {

class ManualMasterTest : public ::testing::Test {
 protected:
  // A master with `o` (no scheduler, no link: forced off) on the store,
  // recovering whatever it holds.
  void Open(MasterOptions o = {}) {
    o.run_scheduler = false;
    o.run_link = false;
    options_ = o;
    auto core = MasterCore::Create(&store_, &link_, &clock_, std::move(o));
    ASSERT_TRUE(core.ok()) << core.status();
    core_ = std::move(*core);
  }
  // The leader stops; another recovers from the log, with the same options.
  void Failover() {
    core_->Stop();
    core_.reset();
    Open(options_);
  }
  // Commits `m` at the clock's time, as "test"; it must apply.
  void Commit(v1::Mutation m) {
    m.set_time_ms(clock_.NowMs());
    std::vector<v1::Mutation> ms{std::move(m)};
    std::vector<absl::Status> st = core_->committer().CommitEach("test", std::move(ms));
    ASSERT_TRUE(st[0].ok()) << st[0];
  }
  // Registers `m` through the API, as the machine itself (give it an address).
  void AddMachine(const v1::Machine& m) {
    v1::RegisterMachineRequest r;
    *r.mutable_machine() = m;
    absl::Status st = core_->machines().RegisterMachine(Principal::Machine(m.name()), r).status();
    ASSERT_TRUE(st.ok()) << st;
  }

  ManualClock clock_;
  store::MemoryLogStore store_;
  testing::FakeAgentLink link_;
  std::unique_ptr<MasterCore> core_;
  MasterOptions options_;
};

}  // namespace herd::master
