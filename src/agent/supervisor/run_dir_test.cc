#include "agent/supervisor/run_dir.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <filesystem>

namespace herd::agent {
namespace {

TEST(RunState, RoundTrip) {
  RunState s;
  s.phase = v1::Task::BACKOFF;
  s.desired = false;
  s.terminal = true;
  s.removed = true;
  s.removed_ms = 42;
  s.restarts = 3;
  s.exit_code = 7;
  s.exit_signal = 9;
  s.message = "two\nlines=with equals";
  s.last_exit = "exited with code 7";
  s.started_ms = 1234;
  s.backoff_ms = 800;
  s.shim = ProcessId{77, 8888};
  absl::StatusOr<RunState> d = DecodeRunState(EncodeRunState(s));
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->phase, v1::Task::BACKOFF);
  EXPECT_FALSE(d->desired);
  EXPECT_TRUE(d->terminal);
  EXPECT_TRUE(d->removed);
  EXPECT_EQ(d->removed_ms, 42);
  EXPECT_EQ(d->restarts, 3);
  EXPECT_EQ(d->exit_code, 7);
  EXPECT_EQ(d->exit_signal, 9);
  EXPECT_EQ(d->message, "two lines=with equals");
  EXPECT_EQ(d->last_exit, "exited with code 7");
  EXPECT_EQ(d->started_ms, 1234);
  EXPECT_EQ(d->backoff_ms, 800);
  EXPECT_EQ(d->shim, (ProcessId{77, 8888}));
  EXPECT_FALSE(DecodeRunState("restarts=1\n").ok());      // no phase
  EXPECT_FALSE(DecodeRunState("phase=ACTIVE\nrestarts=x\n").ok());
  EXPECT_TRUE(DecodeRunState("phase=ACTIVE\nfuture_key=1\n").ok());
}

TEST(RunDir, ValidateRunId) {
  EXPECT_TRUE(ValidateRunId("alice.web.3.17").ok());
  EXPECT_TRUE(ValidateRunId("a_b-c:d").ok());
  EXPECT_FALSE(ValidateRunId("").ok());
  EXPECT_FALSE(ValidateRunId(".hidden").ok());
  EXPECT_FALSE(ValidateRunId("..").ok());
  EXPECT_FALSE(ValidateRunId("a/b").ok());
  EXPECT_FALSE(ValidateRunId("a b").ok());
  EXPECT_FALSE(ValidateRunId(std::string(201, 'a')).ok());
}

class RunDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/herd-rundir-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(root_); }
  std::string root_;
};

TEST_F(RunDirTest, SpecAndStatePersist) {
  RunDir dir(root_ + "/r1");
  ASSERT_TRUE(dir.Create().ok());
  EXPECT_TRUE(std::filesystem::is_directory(dir.Sandbox()));
  v1::TaskRun spec;
  spec.set_run_id("r1");
  spec.add_argv("sleep");
  spec.add_argv("1");
  ASSERT_TRUE(dir.WriteSpec(spec).ok());
  absl::StatusOr<v1::TaskRun> read = dir.ReadSpec();
  ASSERT_TRUE(read.ok());
  EXPECT_EQ(read->argv_size(), 2);
  EXPECT_TRUE(absl::IsNotFound(dir.ReadState().status()));
  RunState state;
  state.restarts = 2;
  ASSERT_TRUE(dir.WriteState(state).ok());
  EXPECT_EQ(dir.ReadState()->restarts, 2);
  ASSERT_TRUE(WriteFileAtomic(dir.File("exit"), "exited 0\n").ok());
  ASSERT_TRUE(dir.ClearAttempt().ok());
  EXPECT_FALSE(std::filesystem::exists(dir.File("exit")));
  EXPECT_TRUE(dir.ClearAttempt().ok());  // idempotent
}

// A run's state is rewritten in place: no new inode per write (each one
// cost an inode allocation and a free, slow on ext4 without a journal), and
// a shorter state after a longer one reads back exactly.
TEST_F(RunDirTest, StateIsRewrittenInPlaceAndAShorterOneReadsBackExactly) {
  RunDir dir(root_ + "/r2");
  ASSERT_TRUE(dir.Create().ok());
  RunState longer;
  longer.phase = v1::Task::BACKOFF;
  longer.restarts = 123456;
  longer.started_ms = 1764000000000;
  longer.backoff_ms = 30000;
  longer.shim = {4242, 987654321};
  longer.message = "restart 123456 after: exited with code 1 (a long message to make the record longer)";
  ASSERT_TRUE(dir.WriteState(longer).ok());
  struct stat first;
  ASSERT_EQ(stat(dir.File("state").c_str(), &first), 0);
  RunState shorter;
  shorter.phase = v1::Task::ACTIVE;
  shorter.restarts = 1;
  ASSERT_TRUE(dir.WriteState(shorter).ok());
  struct stat second;
  ASSERT_EQ(stat(dir.File("state").c_str(), &second), 0);
  EXPECT_EQ(first.st_ino, second.st_ino) << "a new file per write";
  absl::StatusOr<RunState> read = dir.ReadState();
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->phase, v1::Task::ACTIVE);
  EXPECT_EQ(read->restarts, 1);
  EXPECT_EQ(read->started_ms, 0);
  EXPECT_EQ(read->shim.pid, 0);
  EXPECT_TRUE(read->message.empty());
  EXPECT_FALSE(std::filesystem::exists(dir.File("state.tmp")));
}

TEST_F(RunDirTest, EnvironmentAndWorkdir) {
  RunDir dir(root_ + "/r2");
  ASSERT_TRUE(dir.Create().ok());
  v1::TaskRun spec;
  spec.set_run_id("alice.web.4.2");
  spec.mutable_ref()->set_job("alice/web");
  spec.mutable_ref()->set_index(4);
  (*spec.mutable_env())["FOO"] = "bar";
  (*spec.mutable_env())["BAD=KEY"] = "x";
  std::map<std::string, std::string> env = TaskEnvironment(spec, dir);
  EXPECT_EQ(env["FOO"], "bar");
  EXPECT_EQ(env.count("BAD=KEY"), 0u);
  EXPECT_EQ(env["HERD_TASK_INDEX"], "4");
  EXPECT_EQ(env["HERD_JOB"], "alice/web");
  EXPECT_EQ(env["HERD_RUN_ID"], "alice.web.4.2");
  EXPECT_EQ(env["HERD_TASK_DIR"], dir.Sandbox());
  EXPECT_FALSE(env["PATH"].empty());
  (*spec.mutable_env())["PATH"] = "/opt/bin";
  EXPECT_EQ(TaskEnvironment(spec, dir)["PATH"], "/opt/bin");

  EXPECT_EQ(*PrepareWorkdir(spec, dir), dir.Sandbox());
  spec.set_workdir("a/./b");
  EXPECT_EQ(*PrepareWorkdir(spec, dir), dir.Sandbox() + "/a/b");
  EXPECT_TRUE(std::filesystem::is_directory(dir.Sandbox() + "/a/b"));
  spec.set_workdir("/srv");
  EXPECT_EQ(*PrepareWorkdir(spec, dir), "/srv");
  spec.set_workdir("a/../../etc");
  EXPECT_FALSE(PrepareWorkdir(spec, dir).ok());

  // The task replaced `l` in its sandbox with a symlink out of it: the
  // (root) agent refuses to make the working directory through it.
  const std::string outside = dir.path() + "-outside";
  std::filesystem::create_directories(outside);
  std::filesystem::create_directory_symlink(outside, dir.Sandbox() + "/l");
  spec.set_workdir("l/b");
  absl::StatusOr<std::string> refused = PrepareWorkdir(spec, dir);
  EXPECT_TRUE(absl::IsFailedPrecondition(refused.status())) << refused.status();
  EXPECT_FALSE(std::filesystem::exists(outside + "/b"));
  std::filesystem::remove_all(outside);
}

TEST(RunDirPrivacy, RunDirectoryIsPrivate) {
  char tmpl[] = "/tmp/herd_rundir_private.XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  RunDir dir(std::string(tmpl) + "/run");
  ASSERT_TRUE(dir.Create().ok());
  v1::TaskRun spec;
  spec.set_run_id("r");
  (*spec.mutable_env())["SECRET"] = "x";
  ASSERT_TRUE(dir.WriteSpec(spec).ok());
  ASSERT_TRUE(dir.WriteState(RunState{}).ok());
  auto mode = [](const std::string& p) {
    struct stat st;
    EXPECT_EQ(stat(p.c_str(), &st), 0) << p;
    return st.st_mode & 07777;
  };
  EXPECT_EQ(mode(dir.path()), 0711u);
  EXPECT_EQ(mode(dir.Sandbox()), 0700u);
  EXPECT_EQ(mode(dir.File("run.pb")), 0600u);
  EXPECT_EQ(mode(dir.File("state")), 0600u);
  std::filesystem::remove_all(tmpl);
}

}  // namespace
}  // namespace herd::agent
