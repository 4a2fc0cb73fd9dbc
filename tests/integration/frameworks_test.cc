// The Framework API on a real cell (issue #17): herd-example-framework, a
// separate process, subscribes to the master, accepts offers with tasks
// that real agents run, acknowledges their updates and exits 0 once all of
// them finished; with a command that fails it retries, then gives up and
// exits non-zero. The tasks are ordinary jobs every tool sees.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "harness/harness.h"

namespace herd {
namespace {

using harness::Cell;
using harness::RunResult;
using namespace std::chrono_literals;

std::string FrameworkBinary() {
  const char* d = std::getenv("HERD_BIN_DIR");
  return absl::StrCat(d && *d ? d : ".", "/herd-example-framework");
}

class FrameworksTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(cell_.StartMaster().ok()) << cell_.LogTails();
    absl::Status st = cell_.StartAgents(2);
    ASSERT_TRUE(st.ok()) << st << "\n" << cell_.LogTails();
  }
  RunResult Framework(const std::vector<std::string>& args) {
    std::vector<std::string> argv = {FrameworkBinary(), "--master", cell_.master_address(), "--credentials",
                                     cell_.UserCredential("alice")};
    argv.insert(argv.end(), args.begin(), args.end());
    // The bound only limits a failure; the run ends when its tasks do.
    return harness::Run(argv, 180s);
  }
  // The framework tasks' jobs, as herd jobs lists them.
  std::vector<v1::Job> FrameworkJobs() {
    std::vector<v1::Job> out;
    auto jobs = cell_.Jobs(/*include_dead=*/true);
    EXPECT_TRUE(jobs.ok()) << jobs.status();
    if (!jobs.ok()) return out;
    for (const v1::Job& j : jobs->jobs()) {
      if (j.spec().labels().contains("herd.framework")) out.push_back(j);
    }
    return out;
  }

  Cell cell_;
};

TEST_F(FrameworksTest, ExampleFrameworkRunsFiveTasksToCompletion) {
  RunResult r = Framework({"--tasks", "5", "--cpu", "100m", "--memory", "32Mi", "--", "/bin/true"});
  ASSERT_EQ(r.exit_code, 0) << r.Describe() << "\n" << cell_.LogTails();
  EXPECT_TRUE(absl::StrContains(r.err, "(5/5)")) << r.err;
  std::vector<v1::Job> jobs = FrameworkJobs();
  ASSERT_EQ(jobs.size(), 5u);
  for (const v1::Job& j : jobs) {
    EXPECT_EQ(j.state(), v1::Job::DEAD) << j.id();
    EXPECT_EQ(j.spec().user(), "alice");
    EXPECT_EQ(j.spec().task_count(), 1);
  }
}

TEST_F(FrameworksTest, ExampleFrameworkRetriesThenGivesUp) {
  RunResult r = Framework({"--tasks", "1", "--retries", "1", "--", "/bin/false"});
  EXPECT_EQ(r.exit_code, 1) << r.Describe();
  EXPECT_TRUE(absl::StrContains(r.err, "failed 2 times")) << r.err;
  // Two attempts, each its own job, both failed.
  EXPECT_EQ(FrameworkJobs().size(), 2u);
}

}  // namespace
}  // namespace herd
