// The attacks of issue #33 by a hostile tenant of a shared cell, on a real
// cell (master and agent as processes, tasks under their own uids): each
// worked against the root agent before and must now fail without reaching
// outside the task's sandbox. Needs root (the agent hands tasks their uids
// only when it is root); labelled "root".
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "harness/harness.h"

namespace herd {
namespace {

namespace fs = std::filesystem;
using harness::Cell;
using harness::Eventually;
using harness::RunResult;
using namespace std::chrono_literals;

// A directory only root may enter, outside every sandbox, holding a 0600
// file: what a task must never reach.
struct RootOnlyDir {
  RootOnlyDir() {
    char tmpl[] = "/tmp/herd-hostile.XXXXXX";
    if (mkdtemp(tmpl) != nullptr) path = tmpl;  // 0700, root's
    fs::create_directories(path + "/b");
    fs::permissions(path + "/b", fs::perms::owner_all);
    std::ofstream(path + "/b/secret") << "root only\n";
    fs::permissions(path + "/b/secret", fs::perms::owner_read | fs::perms::owner_write);
    std::ofstream(path + "/keep") << "original\n";
    fs::permissions(path + "/keep", fs::perms::owner_read | fs::perms::owner_write);
  }
  ~RootOnlyDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string path;
};

uid_t OwnerOf(const std::string& path) {
  struct stat st;
  return lstat(path.c_str(), &st) == 0 ? st.st_uid : static_cast<uid_t>(-1);
}

mode_t ModeOf(const std::string& path) {
  struct stat st;
  return lstat(path.c_str(), &st) == 0 ? st.st_mode : 0;
}

class HostileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root: tasks get uids of their own only from a root agent";
    ASSERT_TRUE(cell_.StartMaster().ok()) << cell_.LogTails();
    ASSERT_TRUE(cell_.StartAgents(1).ok()) << cell_.LogTails();
  }

  std::string TaskText(const std::string& job) {
    auto t = cell_.Tasks(job);
    return t.ok() ? t->DebugString() : t.status().ToString();
  }

  Cell cell_{harness::TenantCellOptions()};  // alice and bob are plain users
};

// C1: the task swaps a directory of its workdir for a symlink to a root-only
// place and exits; on the restart the root agent made and chowned the
// workdir through the symlink, handing the task root's directory.
TEST_F(HostileTest, AWorkdirSymlinkNeverTurnsTheAgentsChownOutward) {
  RootOnlyDir target;
  const std::string spec = absl::StrCat(
      "name: c1\nuser: alice\npriority: batch\nworkdir: a/b\nrestart: {policy: on-failure, backoff: 100ms}\n"
      "resources: {cpu: 10m, memory: 16Mi}\n"
      "command: [\"sh\", \"-c\", \"cd $HERD_TASK_DIR; if [ -L a ]; then echo again; exec sleep 3600; fi; "
      "mv a a.old && ln -s ",
      target.path, " a && echo swapped; exit 1\"]\n");
  RunResult r = cell_.Herd({"submit", cell_.WriteSpec("c1.yaml", spec)});
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  // The agent has acted on the restart: refused it (now), or started the
  // task in root's directory (before).
  ASSERT_TRUE(Eventually(
      [&] {
        return absl::StrContains(TaskText("c1"), "workdir") ||
               absl::StrContains(cell_.Herd({"logs", "c1/0"}).out, "again");
      },
      60s))
      << TaskText("c1") << cell_.Herd({"logs", "c1/0"}).Describe() << cell_.LogTails();
  EXPECT_EQ(OwnerOf(target.path + "/b"), 0u) << "the agent chowned root's directory to the task";
  EXPECT_EQ(OwnerOf(target.path + "/b/secret"), 0u);
  EXPECT_FALSE(absl::StrContains(cell_.Herd({"logs", "c1/0"}).out, "again")) << "restarted through the symlink";
  EXPECT_TRUE(absl::StrContains(TaskText("c1"), "workdir a/b")) << TaskText("c1");
}

// C2: the task replaces its packages/ directory with a symlink to a root
// directory; on the restart the agent unlinked DIR/keep and planted its own
// symlink there.
TEST_F(HostileTest, APackagesSymlinkNeverLetsTheAgentUnlinkOrPlantOutside) {
  RootOnlyDir target;
  const std::string src = cell_.WriteSpec("pkg/bin/hello.txt", "hello\n");
  const std::string dir = src.substr(0, src.rfind("/bin/"));
  const std::string tar = dir + ".tar";
  ASSERT_EQ(harness::Run({"/usr/bin/tar", "-cf", tar, "-C", dir, "."}).exit_code, 0);
  RunResult sum = harness::Run({"/usr/bin/sha256sum", tar});
  ASSERT_EQ(sum.exit_code, 0) << sum.Describe();
  const std::string spec = absl::StrCat(
      "name: c2\nuser: alice\npriority: batch\nrestart: {policy: on-failure, backoff: 100ms}\n"
      "resources: {cpu: 10m, memory: 16Mi}\n"
      "packages:\n  - {name: keep, sha256: ", sum.out.substr(0, 64), ", url: \"", tar, "\"}\n",
      "command: [\"sh\", \"-c\", \"if [ -e tried ]; then cat $HERD_PACKAGE_KEEP/bin/hello.txt; exec sleep 3600; fi; "
      "touch tried; mv packages old && ln -s ",
      target.path, " packages && echo swapped; exit 1\"]\n");
  RunResult r = cell_.Herd({"submit", cell_.WriteSpec("c2.yaml", spec)});
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  // The restart happened: it found its package again through a fresh
  // packages/ (now), or through the agent's link planted in root's
  // directory (before).
  auto restarted = [&] {
    auto t = cell_.Tasks("c2");
    return t.ok() && t->tasks_size() == 1 && t->tasks(0).restarts() >= 1 &&
           t->tasks(0).phase() == v1::Task::ACTIVE;
  };
  ASSERT_TRUE(Eventually([&] { return restarted(); }, 60s))
      << TaskText("c2") << cell_.Herd({"logs", "c2/0"}).Describe() << cell_.LogTails();
  EXPECT_TRUE(S_ISREG(ModeOf(target.path + "/keep"))) << "the agent replaced root's file with a symlink";
  std::ifstream in(target.path + "/keep");
  std::string text;
  std::getline(in, text);
  EXPECT_EQ(text, "original");
  EXPECT_TRUE(Eventually([&] { return absl::StrContains(cell_.Herd({"logs", "c2/0"}).out, "hello"); }, 60s))
      << "the restarted task finds its package again: " << cell_.Herd({"logs", "c2/0"}).Describe();
}

// H1: bob's task read alice's run.pb (her env, secrets included), her
// task's stdout and the master's cell.db, all readable by any uid.
TEST_F(HostileTest, NoTaskReadsAnotherUsersSpecLogsOrTheMastersState) {
  const std::string alice = "name: vault\nuser: alice\npriority: batch\nenv: {SECRET: hunter2-in-env}\n"
                            "resources: {cpu: 10m, memory: 16Mi}\n"
                            "command: [\"sh\", \"-c\", \"echo hunter2-in-stdout; exec sleep 3600\"]\n";
  ASSERT_EQ(cell_.Herd({"submit", cell_.WriteSpec("vault.yaml", alice)}).exit_code, 0);
  ASSERT_TRUE(Eventually([&] { return cell_.Herd({"logs", "vault/0"}).out == "hunter2-in-stdout\n"; }, 60s))
      << cell_.LogTails();
  // Alice's run directory, as root sees it (bob's task would guess the id).
  std::string run_dir;
  for (const auto& e : fs::directory_iterator(cell_.AgentRoot("m1") + "/runs")) {
    if (absl::StrContains(e.path().filename().string(), "vault")) run_dir = e.path().string();
  }
  ASSERT_FALSE(run_dir.empty());
  const std::string master_data = cell_.dir().Sub("master");
  const std::string bob = absl::StrCat(
      "name: thief\nuser: bob\npriority: batch\nresources: {cpu: 10m, memory: 16Mi}\n"
      "command: [\"sh\", \"-c\", \"cat ", run_dir, "/run.pb ", run_dir, "/stdout ", master_data,
      "/cell.db 2>/dev/null; ls ", cell_.AgentRoot("m1"), "/runs 2>/dev/null; echo thief-done; exec sleep 3600\"]\n");
  RunResult r = cell_.HerdAs("bob", {"submit", cell_.WriteSpec("thief.yaml", bob)});
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  std::string out;
  ASSERT_TRUE(Eventually([&] { return absl::StrContains(out = cell_.HerdAs("bob", {"logs", "thief/0"}).out,
                                                        "thief-done"); },
                         60s))
      << cell_.HerdAs("bob", {"logs", "thief/0"}).Describe() << cell_.LogTails();
  EXPECT_FALSE(absl::StrContains(out, "hunter2-in-env")) << out;
  EXPECT_FALSE(absl::StrContains(out, "hunter2-in-stdout")) << out;
  EXPECT_FALSE(absl::StrContains(out, "SQLite format")) << "read the master's cell.db";
  EXPECT_FALSE(absl::StrContains(out, "vault")) << "listed the agent's runs: " << out;
  // Alice's own task still reads its sandbox.
  EXPECT_EQ(ModeOf(run_dir + "/run.pb") & 07777, 0600u);
  EXPECT_EQ(ModeOf(run_dir + "/stdout") & 07777, 0600u);
  EXPECT_EQ(ModeOf(master_data) & 07777, 0700u);
}

// H2: two agents on one host handed out uids from the same range on their
// own, so alice's task on m1 and bob's on m2 were both uid 200000 and bob
// read /proc/<alice's pid>/environ.
TEST_F(HostileTest, UsersOnAgentsSharingAHostNeverShareAUid) {
  ASSERT_TRUE(cell_.StartAgent("m2", "r2").ok()) << cell_.LogTails();
  auto spec = [](const std::string& name, const std::string& user, const std::string& rack) {
    return absl::StrCat("name: ", name, "\nuser: ", user, "\npriority: batch\nconstraints: [\"rack == ", rack,
                        "\"]\nresources: {cpu: 10m, memory: 16Mi}\ncommand: [\"sh\", \"-c\", \"echo uid=$(id -u); "
                        "exec sleep 3600\"]\n");
  };
  ASSERT_EQ(cell_.Herd({"submit", cell_.WriteSpec("a.yaml", spec("a", "alice", "r1"))}).exit_code, 0);
  ASSERT_EQ(cell_.HerdAs("bob", {"submit", cell_.WriteSpec("b.yaml", spec("b", "bob", "r2"))}).exit_code, 0);
  ASSERT_EQ(cell_.Herd({"submit", cell_.WriteSpec("a2.yaml", spec("a2", "alice", "r2"))}).exit_code, 0);
  std::string a, b, a2;
  ASSERT_TRUE(Eventually(
      [&] {
        a = cell_.Herd({"logs", "a/0"}).out;
        b = cell_.HerdAs("bob", {"logs", "b/0"}).out;
        a2 = cell_.Herd({"logs", "a2/0"}).out;
        return absl::StartsWith(a, "uid=") && absl::StartsWith(b, "uid=") && absl::StartsWith(a2, "uid=");
      },
      60s))
      << a << b << a2 << cell_.LogTails();
  EXPECT_NE(a, b) << "alice on m1 and bob on m2 run as one uid";
  EXPECT_EQ(a, a2) << "alice has one uid on the host, whichever agent runs her task";
}

// Item 8: tasks start with no_new_privs, an empty bounding set and the
// default seccomp filter (a user namespace, a mount, a setuid gain are all
// refused); relaxing that is an admin's grant.
TEST_F(HostileTest, TasksStartWithTheLeastPrivilege) {
  auto spec = [](const std::string& name, const std::string& user, const std::string& extra) {
    return absl::StrCat("name: ", name, "\nuser: ", user, "\npriority: batch\n", extra,
                        "resources: {cpu: 10m, memory: 16Mi}\ncommand: [\"sh\", \"-c\", \"grep -E "
                        "'^(NoNewPrivs|Seccomp|CapBnd):' /proc/self/status; unshare -U true 2>/dev/null && echo "
                        "unshared; echo done; exec sleep 3600\"]\n");
  };
  ASSERT_EQ(cell_.Herd({"submit", cell_.WriteSpec("p.yaml", spec("p", "alice", ""))}).exit_code, 0);
  std::string out;
  ASSERT_TRUE(Eventually([&] { return absl::StrContains(out = cell_.Herd({"logs", "p/0"}).out, "done"); }, 60s))
      << out << cell_.LogTails();
  EXPECT_TRUE(absl::StrContains(out, "NoNewPrivs:\t1")) << out;
  EXPECT_TRUE(absl::StrContains(out, "Seccomp:\t2")) << out;
  EXPECT_TRUE(absl::StrContains(out, "CapBnd:\t0000000000000000")) << out;
  EXPECT_FALSE(absl::StrContains(out, "unshared")) << "a task made a user namespace: " << out;
  // The same command from `herd exec` in the task is held alike.
  RunResult exec = cell_.Herd({"exec", "p/0", "--", "sh", "-c", "grep Seccomp: /proc/self/status; unshare -U true"});
  EXPECT_NE(exec.exit_code, 0) << exec.Describe();
  EXPECT_TRUE(absl::StrContains(exec.out, "Seccomp:\t2")) << exec.Describe();

  // Unconfined is root's grant: refused to bob, given by the admin.
  RunResult bob = cell_.HerdAs("bob", {"submit", cell_.WriteSpec("u.yaml", spec("u", "bob",
                                                                               "isolation: {seccomp: unconfined}\n"))});
  EXPECT_EQ(bob.exit_code, 1) << bob.Describe();
  EXPECT_TRUE(absl::StrContains(bob.err, "'run-as-root'")) << bob.err;
  RunResult admin = cell_.HerdAs("root", {"submit", cell_.WriteSpec("u.yaml", spec("u", "bob",
                                                                                  "isolation: {seccomp: unconfined}\n"))});
  ASSERT_EQ(admin.exit_code, 0) << admin.Describe();
  ASSERT_TRUE(Eventually([&] { return absl::StrContains(out = cell_.HerdAs("root", {"logs", "bob/u/0"}).out, "done"); },
                         60s))
      << out << cell_.LogTails();
  EXPECT_TRUE(absl::StrContains(out, "Seccomp:\t0")) << out;
  EXPECT_TRUE(absl::StrContains(out, "NoNewPrivs:\t1")) << out;
}

}  // namespace
}  // namespace herd
