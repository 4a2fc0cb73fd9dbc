// Alarms on a real cell (issue #15): a real master with an alert rules file
// fires on a task that crash-loops on real agents, on a job that cannot be
// placed, and on a machine whose agent is killed; `herd alerts` lists them,
// a command sink and a webhook receive each firing as JSON, and the
// machine's alarm resolves when its agent is back.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "harness/harness.h"
#include "testing/http_server.h"

namespace herd {
namespace {

using harness::Cell;
using harness::Eventually;
using harness::RunResult;
using namespace std::chrono_literals;

class AlertsTest : public ::testing::Test {
 protected:
  AlertsTest()
      : webhook_([this](const herd::testing::HttpRequest& req, herd::testing::HttpConn& conn) {
          {
            absl::MutexLock l(&mu_);
            posted_.push_back(req.body);
          }
          conn.Respond(200, "");
        }),
        sink_file_(files_.Sub("alerts.jsonl")),
        cell_(WithRules()) {}

  // The master's --alerts: unplaceable after 2s, a command sink appending
  // each notification to a file, and the test's webhook.
  Cell::Options WithRules() {
    const std::string rules = files_.Write(
        "alerts.yaml", absl::StrCat("pending: 2s\nquiet: 10m\nsinks:\n  - command: [/bin/sh, -c, 'cat >> ", sink_file_,
                                    "; echo >> ", sink_file_, "']\n  - webhook: ", webhook_.Url("hook"), "\n"));
    Cell::Options o;
    o.master_flags = {"--alerts", rules};
    return o;
  }

  void SetUp() override {
    ASSERT_TRUE(cell_.StartMaster().ok()) << cell_.LogTails();
    absl::Status st = cell_.StartAgents(2);
    ASSERT_TRUE(st.ok()) << st << "\n" << cell_.LogTails();
  }

  v1::ListAlertsResponse Alerts(bool all = false) {
    std::vector<std::string> args = {"alerts"};
    if (all) args.push_back("--all");
    auto r = cell_.HerdJson<v1::ListAlertsResponse>(args);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : v1::ListAlertsResponse();
  }
  static const v1::Alert* Find(const v1::ListAlertsResponse& r, const std::string& rule, const std::string& subject) {
    for (const v1::Alert& a : r.alerts()) {
      if (a.rule() == rule && a.subject() == subject) return &a;
    }
    return nullptr;
  }
  std::vector<std::string> Posted() {
    absl::MutexLock l(&mu_);
    return posted_;
  }

  absl::Mutex mu_;
  std::vector<std::string> posted_;
  harness::TestDir files_;
  herd::testing::HttpServer webhook_;
  const std::string sink_file_;
  Cell cell_;
};

TEST_F(AlertsTest, CrashLoopsUnplaceableJobsAndLostMachinesFireAndReachTheSinks) {
  EXPECT_EQ(Alerts().alerts_size(), 0);
  RunResult r = cell_.Herd({"alerts"});
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_EQ(r.out, "no alarms firing\n");

  // A task that exits at once, again and again.
  const std::string crasher = cell_.WriteSpec(
      "crasher.yaml",
      "name: crasher\nuser: alice\npriority: production\nrestart: {policy: always, backoff: 50ms, "
      "max_backoff: 100ms}\ncommand: [\"/bin/sh\", \"-c\", \"exit 1\"]\nresources: {cpu: 100m, memory: 32Mi}\n");
  ASSERT_EQ(cell_.Herd({"submit", crasher}).exit_code, 0);
  // A job no machine can hold.
  const std::string huge = cell_.WriteSpec(
      "huge.yaml", "name: huge\nuser: alice\ncommand: [/bin/sleep, \"3600\"]\nresources: {cpu: 64, memory: 32Mi}\n");
  ASSERT_EQ(cell_.Herd({"submit", huge}).exit_code, 0);

  v1::ListAlertsResponse alerts;
  ASSERT_TRUE(Eventually([&] {
    alerts = Alerts();
    return Find(alerts, "crash_loop", "alice/crasher/0") != nullptr && Find(alerts, "pending", "alice/huge") != nullptr;
  }, 60s)) << alerts.DebugString() << cell_.LogTails();
  EXPECT_TRUE(absl::StrContains(Find(alerts, "crash_loop", "alice/crasher/0")->message(), "crash loop on m"))
      << alerts.DebugString();
  EXPECT_TRUE(absl::StartsWith(Find(alerts, "pending", "alice/huge")->message(), "1 task of alice/huge pending for over 2s"))
      << alerts.DebugString();

  // A machine lost: its agent killed, the master marks it down.
  cell_.StopAgent("m2", SIGKILL);
  ASSERT_TRUE(Eventually([&] {
    alerts = Alerts();
    return Find(alerts, "machine_down", "m2") != nullptr;
  }, 60s)) << alerts.DebugString();

  // For people: one line each.
  r = cell_.Herd({"alerts"});
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  for (const char* want : {"crash_loop", "alice/crasher/0", "pending", "machine_down", "m2", "firing"}) {
    EXPECT_TRUE(absl::StrContains(r.out, want)) << want << " in\n" << r.out;
  }

  // Every firing reached both sinks as JSON.
  auto has = [](const std::string& text, const std::string& rule, const std::string& subject) {
    return absl::StrContains(text, absl::StrCat("\"rule\":\"", rule, "\",\"subject\":\"", subject, "\""));
  };
  EXPECT_TRUE(Eventually([&] {
    std::string file = harness::ReadFileOrEmpty(sink_file_);
    std::string posted;
    for (const std::string& p : Posted()) posted += p + "\n";
    for (const std::string* text : {&file, &posted}) {
      if (!has(*text, "crash_loop", "alice/crasher/0") || !has(*text, "pending", "alice/huge") ||
          !has(*text, "machine_down", "m2")) {
        return false;
      }
    }
    return true;
  }, 30s)) << "command sink:\n" << harness::ReadFileOrEmpty(sink_file_);
  EXPECT_TRUE(absl::StrContains(harness::ReadFileOrEmpty(sink_file_), "{\"status\":\"firing\",\"cell\":\"local\""));

  // The machine back: its alarm resolves, and the sinks hear of it.
  ASSERT_TRUE(cell_.RestartAgent("m2").ok()) << cell_.LogTails();
  ASSERT_TRUE(Eventually([&] { return Find(Alerts(), "machine_down", "m2") == nullptr; }, 60s));
  const v1::Alert* resolved = Find(Alerts(true), "machine_down", "m2");
  ASSERT_NE(resolved, nullptr);
  EXPECT_FALSE(resolved->firing());
  EXPECT_GT(resolved->resolved_ms(), 0);
  EXPECT_TRUE(Eventually([&] {
    for (const std::string& p : Posted()) {
      if (absl::StartsWith(p, "{\"status\":\"resolved\"") && has(p, "machine_down", "m2")) return true;
    }
    return false;
  }));
}

}  // namespace
}  // namespace herd
