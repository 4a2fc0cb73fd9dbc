#include "agent/packages/task_users.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace herd::agent {
namespace {

class TaskUsersTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/herd-task-users-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    o_.state_file = dir_ + "/task-uids";
    o_.first_uid = 200000;
    o_.count = 3;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
  TaskUsers::Options o_;
};

TEST_F(TaskUsersTest, EachUserGetsAUidOfTheirOwnThatSurvivesARestart) {
  auto users = TaskUsers::Open(o_);
  ASSERT_TRUE(users.ok()) << users.status();
  auto alice = (*users)->For("alice");
  auto bob = (*users)->For("bob");
  ASSERT_TRUE(alice.ok() && bob.ok());
  EXPECT_EQ(alice->uid, 200000u);
  EXPECT_EQ(alice->gid, 200000u);
  EXPECT_EQ(bob->uid, 200001u);
  EXPECT_EQ((*users)->For("alice")->uid, 200000u);
  // A new agent on the same root: the same answers, and the next user gets
  // the next free uid.
  auto again = TaskUsers::Open(o_);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ((*again)->For("bob")->uid, 200001u);
  EXPECT_EQ((*again)->For("carol")->uid, 200002u);
  // The range is used up.
  auto dave = (*again)->For("dave");
  EXPECT_EQ(dave.status().code(), absl::StatusCode::kResourceExhausted) << dave.status();
}

// Two agents on one host, both open at once on the host's file (issue #33,
// H2: each handed out the same first uid to a different user).
TEST_F(TaskUsersTest, AgentsSharingAHostNeverGiveTwoUsersOneUid) {
  auto m0 = TaskUsers::Open(o_);
  auto m1 = TaskUsers::Open(o_);
  ASSERT_TRUE(m0.ok() && m1.ok());
  auto alice = (*m0)->For("alice");
  auto bob = (*m1)->For("bob");
  ASSERT_TRUE(alice.ok() && bob.ok()) << alice.status() << bob.status();
  EXPECT_NE(alice->uid, bob->uid);
  // And one user has one uid whichever agent runs the task.
  EXPECT_EQ((*m1)->For("alice")->uid, alice->uid);
  EXPECT_EQ((*m0)->For("bob")->uid, bob->uid);
}

TEST_F(TaskUsersTest, ATornLastLineIsForgottenAndGarbageIsAnError) {
  // Crashed mid-append, leaving a valid-looking prefix of "bob 200001".
  std::ofstream(o_.state_file) << "alice 200000\nbob 2000";
  auto users = TaskUsers::Open(o_);
  ASSERT_TRUE(users.ok()) << users.status();
  EXPECT_EQ((*users)->For("alice")->uid, 200000u);
  EXPECT_EQ((*users)->For("bob")->uid, 200001u);
  auto reopened = TaskUsers::Open(o_);  // the torn line is gone, bob's is whole
  ASSERT_TRUE(reopened.ok()) << reopened.status();
  EXPECT_EQ((*reopened)->For("bob")->uid, 200001u);
  std::ofstream(o_.state_file) << "alice x\nbob 200001\n";
  EXPECT_EQ(TaskUsers::Open(o_).status().code(), absl::StatusCode::kDataLoss);
  o_.first_uid = 0;
  EXPECT_EQ(TaskUsers::Open(o_).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace herd::agent
