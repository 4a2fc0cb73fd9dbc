#include "sim/core/questions.h"

#include <gtest/gtest.h>

#include "testing/builders.h"

namespace herd::sim {
namespace {

using namespace herd::testing;  // NOLINT

cell::CellState FourMachines() {
  cell::CellState s;
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(s.Apply(Register(MachineBuilder("m" + std::to_string(i)).Cpu(4000).Build())).ok());
  return s;
}

TEST(Questions, HowManyFit) {
  cell::CellState s = FourMachines();
  // Batch fills half of m0 and m1.
  ASSERT_TRUE(s.Apply(Submit(JobBuilder("batch", "bob").Priority(100).Tasks(2).Cpu(2000).Build())).ok());
  ASSERT_TRUE(s.Apply(Schedule("bob/batch", 0, "m0")).ok());
  ASSERT_TRUE(s.Apply(Schedule("bob/batch", 1, "m1")).ok());
  auto a = HowManyFit(s, JobBuilder("probe").Priority(200).Cpu(1000).Build(), sched::Options(), 1000);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->fit, 12);            // 16 cores minus the 4 batch holds
  EXPECT_EQ(a->fit_preempting, 16);  // evicting the two batch tasks
  EXPECT_EQ(a->victims, 2);
  EXPECT_NE(a->why.find("0/4 machines fit"), std::string::npos) << a->why;
  // The real cell is untouched.
  EXPECT_EQ(s.FindJob("alice/probe"), nullptr);
  EXPECT_EQ(s.FindTask("bob/batch", 0)->state(), v1::Task::RUNNING);
  EXPECT_FALSE(HowManyFit(s, JobBuilder("batch", "bob").Build(), sched::Options()).ok());
}

// Issue #15: `herd sim fit` reported the last pass's diagnosis, which came
// from the score cache with its reasons lost ("0/4 machines fit").
TEST(Questions, HowManyFitSaysWhyWithReasons) {
  cell::CellState s = FourMachines();
  // The first pass places 16; the second skips the class as known not to fit.
  auto a = HowManyFit(s, JobBuilder("probe").Cpu(1000).Build(), sched::Options(), 100);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->fit, 16);
  EXPECT_EQ(a->why, "0/4 machines fit: 4 insufficient cpu");
}

TEST(Questions, WouldEvict) {
  cell::CellState s = FourMachines();
  ASSERT_TRUE(s.Apply(Submit(JobBuilder("svc").Priority(200).Tasks(4).Cpu(3000).DifferentMachines().Build())).ok());
  ASSERT_TRUE(s.Apply(Submit(JobBuilder("batch", "bob").Priority(100).Tasks(4).Cpu(1000).Build())).ok());
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(s.Apply(Schedule("alice/svc", i, "m" + std::to_string(i))).ok());
    ASSERT_TRUE(s.Apply(Schedule("bob/batch", i, "m" + std::to_string(i))).ok());
  }
  // Draining one machine: its prod task has nowhere to go (different
  // machines, and production may not preempt production).
  Change drain;
  drain.drain = {"m3"};
  auto a = WouldEvict(s, drain, 200, sched::Options());
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->running_before, 4);
  ASSERT_EQ(a->victims.size(), 1u);
  EXPECT_EQ(a->victims[0].task, "alice/svc/3");
  EXPECT_TRUE(a->victims[0].pending);
  EXPECT_NE(a->victims[0].outcome.find("machine m3 down"), std::string::npos) << a->victims[0].outcome;
  // Adding a production job: it may preempt batch, never prod.
  Change add;
  add.add = {JobBuilder("new").Priority(250).Tasks(4).Cpu(1000).Build()};
  auto b = WouldEvict(s, add, 200, sched::Options());
  ASSERT_TRUE(b.ok());
  EXPECT_TRUE(b->victims.empty());
  EXPECT_EQ(b->added_placed, 4);
  auto c = WouldEvict(s, add, 100, sched::Options());
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->victims.size(), 4u);  // the batch tasks are preempted (and wait)
  Change unknown;
  unknown.drain = {"nope"};
  EXPECT_EQ(WouldEvict(s, unknown, 0, sched::Options()).status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace herd::sim

namespace herd::sim {
namespace {

// #14 item 6: "what would this update evict?", through the master's own
// JobUpdated.
TEST(Questions, WhatAnUpdateWouldEvict) {
  cell::CellState s = FourMachines();
  v1::JobSpec svc = JobBuilder("svc").Priority(200).Tasks(4).Cpu(2000).DifferentMachines().Build();
  ASSERT_TRUE(s.Apply(Submit(svc)).ok());
  ASSERT_TRUE(s.Apply(Submit(JobBuilder("batch", "bob").Priority(100).Tasks(4).Cpu(2000).Build())).ok());
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(s.Apply(Schedule("alice/svc", i, "m" + std::to_string(i))).ok());
    ASSERT_TRUE(s.Apply(Schedule("bob/batch", i, "m" + std::to_string(i))).ok());
  }
  // The service asks for 3 cores instead of 2: no machine has them free, so
  // its tasks move, and each takes a batch task's place.
  v1::JobSpec bigger = svc;
  bigger.mutable_task()->mutable_resources()->set_cpu_millis(3000);
  Change update;
  update.update = {bigger};
  auto a = WouldEvict(s, update, 0, sched::Options());
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->updated_reschedule, 4);
  EXPECT_EQ(a->updated_running, 4);
  EXPECT_EQ(a->updated_pending, 0);
  ASSERT_EQ(a->victims.size(), 4u);
  for (const Victim& v : a->victims) {
    EXPECT_EQ(v.task.rfind("bob/batch/", 0), 0u) << v.task;
    EXPECT_TRUE(v.pending) << v.outcome;
  }
  // Nothing at production priority is disturbed by it.
  a = WouldEvict(s, update, 200, sched::Options());
  ASSERT_TRUE(a.ok());
  EXPECT_TRUE(a->victims.empty());
  // A change the machines absorb evicts nothing.
  v1::JobSpec env = svc;
  (*env.mutable_task()->mutable_env())["V"] = "2";
  update.update = {env};
  a = WouldEvict(s, update, 0, sched::Options());
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->updated_restart, 4);
  EXPECT_TRUE(a->victims.empty());
  // The real cell is untouched; an unknown job is an error.
  EXPECT_EQ(s.FindTask("alice/svc", 0)->resources().Get("cpu"), 2000);
  update.update = {JobBuilder("nope").Build()};
  EXPECT_EQ(WouldEvict(s, update, 0, sched::Options()).status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace herd::sim
