// Alarms: the rules file, each rule firing and resolving, and the sinks.
#include "master/alerts/alert_manager.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "cell/job_update.h"
#include "master/core/committer.h"
#include "store/log_store.h"
#include "testing/builders.h"
#include "testing/eventually.h"
#include "testing/http_server.h"

namespace herd::master::alerts {
namespace {

using namespace herd::testing;  // NOLINT

constexpr int64_t kMinute = 60'000;

TEST(Rules, ParseWithDefaultsAndSayWhereTheyAreWrong) {
  auto rules = ParseRules(
      "pending: 5m\nevictions: 3/1m\nquota: 80%\noom: false\nquiet: 2m\n"
      "sinks:\n  - command: [/bin/sh, -c, 'cat >> /tmp/x']\n  - webhook: http://127.0.0.1:9/hook\n",
      "alerts.yaml");
  ASSERT_TRUE(rules.ok()) << rules.status();
  EXPECT_EQ(rules->pending_ms, 5 * kMinute);
  EXPECT_EQ(rules->evictions, 3);
  EXPECT_EQ(rules->evictions_window_ms, kMinute);
  EXPECT_DOUBLE_EQ(rules->quota, 0.8);
  EXPECT_FALSE(rules->oom);
  EXPECT_TRUE(rules->crash_loop);
  EXPECT_EQ(rules->quiet_ms, 2 * kMinute);
  ASSERT_EQ(rules->commands.size(), 1u);
  EXPECT_EQ(rules->commands[0][2], "cat >> /tmp/x");
  EXPECT_EQ(rules->webhooks, std::vector<std::string>{"http://127.0.0.1:9/hook"});
  EXPECT_TRUE(ParseRules("", "empty.yaml").ok());

  const std::pair<const char*, const char*> bad[] = {
      {"oom: true\npendng: 5m\n", "alerts.yaml:2: pendng: unknown key"},
      {"pending: soon\n", "alerts.yaml:1: pending: 'soon' is not a duration"},
      {"evictions: 10\n", "alerts.yaml:1: evictions: '10' is not COUNT/WINDOW"},
      {"quota: 0.9\n", "alerts.yaml:1: quota: '0.9' is not a percentage"},
      {"quota: 150%\n", "alerts.yaml:1: quota: '150%' is not a percentage"},
      {"oom: maybe\n", "alerts.yaml:1: oom: 'maybe' is not true or false"},
      {"sinks:\n  - command: [page]\n", "alerts.yaml:2: sinks.command: expected a list whose first item is an absolute"},
      {"sinks:\n  - webhook: ftp://x\n", "alerts.yaml:2: sinks.webhook: 'ftp://x' is not an http"},
      {"sinks:\n  - email: a@b\n", "alerts.yaml:2: sinks: unknown sink 'email'"},
      {"[1, 2]\n", "alerts.yaml:1: expected a map"},
      {"pending: [\n", "alerts.yaml:"},
  };
  for (const auto& [text, want] : bad) {
    absl::Status st = ParseRules(text, "alerts.yaml").status();
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << text;
    EXPECT_TRUE(absl::StartsWith(st.message(), want)) << text << " -> " << st.message();
  }
}

v1::Mutation At(v1::Mutation m, int64_t time_ms) {
  m.set_time_ms(time_ms);
  return m;
}

const v1::Alert* Find(const v1::ListAlertsResponse& r, const std::string& rule, const std::string& subject) {
  for (const v1::Alert& a : r.alerts()) {
    if (a.rule() == rule && a.subject() == subject) return &a;
  }
  return nullptr;
}

// Keeps what it is sent, for the test's thread to read.
class RecordingSink final : public Sink {
 public:
  struct Log {
    absl::Mutex mu;
    std::vector<std::string> sent;
    std::vector<std::string> Get() {
      absl::MutexLock l(&mu);
      return sent;
    }
  };
  explicit RecordingSink(Log* log) : log_(log) {}
  absl::Status Send(const std::string& json) override {
    absl::MutexLock l(&log_->mu);
    log_->sent.push_back(json);
    return absl::OkStatus();
  }
  std::string Name() const override { return "recording"; }

 private:
  Log* log_;
};

TEST(AlertManager, EventRulesFireOnceCountAndResolveWhenQuiet) {
  ManualClock clock;
  Rules rules;
  rules.evictions = 2;
  rules.evictions_window_ms = kMinute;
  AlertManager am(rules, "local", &clock);
  const int64_t t = clock.NowMs();
  cell::CellState empty;

  am.Observe(At(Rescheduled(Ref("alice/web", 0, 3), "crash loop on m1: exited 1 five times"), t));
  am.Observe(At(Rescheduled(Ref("alice/web", 0, 4), "crash loop on m2: exited 1 five times"), t + 1000));
  // An OOM kill is counted once per attempt, however often it is reported.
  v1::Mutation oom = Observed(Ref("alice/db", 1, 2), v1::Task::BACKOFF);
  oom.mutable_task_observed()->set_oom_killed(true);
  oom.mutable_task_observed()->set_restarts(1);
  am.Observe(At(oom, t));
  am.Observe(At(oom, t + 10));
  oom.mutable_task_observed()->set_restarts(2);
  am.Observe(At(oom, t + 20));
  // Evictions: two are allowed, the third in a minute fires.
  am.Observe(At(Rescheduled(Ref("bob/batch", 0, 1), "evicted from m1: memory pressure"), t));
  am.Observe(At(Schedule("alice/web", 0, "m1", {Ref("bob/batch", 1, 1)}), t + 100));
  EXPECT_EQ(Find(am.List(false), "evictions", "cell"), nullptr);
  am.Observe(At(Rescheduled(Ref("bob/batch", 2, 1), "evicted from m1: memory pressure"), t + 200));

  v1::ListAlertsResponse r = am.List(false);
  ASSERT_NE(Find(r, "crash_loop", "alice/web/0"), nullptr) << r.DebugString();
  EXPECT_EQ(Find(r, "crash_loop", "alice/web/0")->count(), 2);
  EXPECT_TRUE(absl::StrContains(Find(r, "crash_loop", "alice/web/0")->message(), "crash loop on m2"));
  ASSERT_NE(Find(r, "oom", "alice/db/1"), nullptr);
  EXPECT_EQ(Find(r, "oom", "alice/db/1")->count(), 2);
  ASSERT_NE(Find(r, "evictions", "cell"), nullptr);
  EXPECT_TRUE(absl::StartsWith(Find(r, "evictions", "cell")->message(), "3 evictions and preemptions within 1m"));

  // Quiet for less than the quiet period: still firing; past it: resolved.
  clock.SetNowMs(t + rules.quiet_ms);
  am.Scan(empty);
  EXPECT_EQ(am.List(false).alerts_size(), 3);
  clock.SetNowMs(t + 1000 + rules.quiet_ms + 1);
  am.Scan(empty);
  EXPECT_EQ(am.List(false).alerts_size(), 0);
  r = am.List(true);
  ASSERT_EQ(r.alerts_size(), 3);
  for (const v1::Alert& a : r.alerts()) {
    EXPECT_FALSE(a.firing());
    EXPECT_GT(a.resolved_ms(), a.first_ms());
  }
  // A day later they are forgotten.
  clock.SetNowMs(t + 2 * 24 * 60 * kMinute);
  am.Scan(empty);
  EXPECT_EQ(am.List(true).alerts_size(), 0);
}

// A job whose tasks all fail cannot crowd out the cell's other alarms: past
// 100 of its tasks one alarm on the job counts the rest, and task alarms
// leave a quarter of the sinks' queue to the cell's rules.
TEST(AlertManager, ABigFailingJobFoldsIntoOneAlarmAndLeavesRoomForOthers) {
  ManualClock clock;
  AlertManager am(Rules{}, "local", &clock);
  RecordingSink::Log log;
  am.AddSink(std::make_unique<RecordingSink>(&log));  // not started: the queue only fills
  const int64_t t = clock.NowMs();
  for (int job = 0; job < 20; ++job) {
    for (int i = 0; i < 150; ++i) {
      v1::Mutation oom = Observed(Ref(absl::StrCat("mallory/j", job), i, 1), v1::Task::BACKOFF);
      oom.mutable_task_observed()->set_oom_killed(true);
      am.Observe(At(oom, t));
    }
  }
  v1::ListAlertsResponse r = am.List(false);
  int task_alarms = 0;
  for (const v1::Alert& a : r.alerts()) task_alarms += a.subject().rfind('/') > a.subject().find('/') ? 1 : 0;
  EXPECT_EQ(task_alarms, 20 * 100);
  const v1::Alert* job = Find(r, "oom", "mallory/j7");
  ASSERT_NE(job, nullptr);
  EXPECT_EQ(job->count(), 50);
  EXPECT_TRUE(absl::StartsWith(job->message(), "more than 100 tasks of mallory/j7 (oom); the latest: task mallory/j7/149"))
      << job->message();
  // 20 x 101 notifications for 750 places: the rest dropped.
  const int64_t dropped = r.dropped_notifications();
  EXPECT_EQ(dropped, 20 * 101 - static_cast<int64_t>(AlertManager::kMaxQueuedForTasks));
  // A machine going down is still queued for the sinks.
  am.Observe(At(Down("m1", "missed 3 polls"), t + 1));
  r = am.List(false);
  EXPECT_NE(Find(r, "machine_down", "m1"), nullptr);
  EXPECT_EQ(r.dropped_notifications(), dropped);
}

TEST(AlertManager, StateRulesFollowTheCell) {
  ManualClock clock;
  Rules rules;
  rules.pending_ms = 5 * kMinute;
  rules.quota = 0.9;
  AlertManager am(rules, "local", &clock);
  cell::CellState s;
  auto apply = [&](v1::Mutation m) {
    m.set_revision(s.revision() + 1);
    m.set_time_ms(clock.NowMs());
    ASSERT_TRUE(s.Apply(m).ok());
    am.Observe(m);
  };
  apply(Register(MachineBuilder("m1").Cpu(1000).Memory(1ll << 30).Address("m1:1").Build()));
  apply(SetQuota("alice", "production", 2000, 8ll << 30));
  apply(Submit(JobBuilder("web").Priority(200).Tasks(2).Cpu(900).Memory(1 << 20).Build()));
  apply(Schedule("alice/web", 0, "m1"));
  // A job waiting for web to finish (after:) is pending on purpose: never an alarm.
  apply(Submit(JobBuilder("report").After({"alice/web"}).Build()));
  // Task 1 does not fit: pending, but not for long yet.
  am.Scan(s);
  EXPECT_EQ(Find(am.List(false), "pending", "alice/web"), nullptr);
  clock.AdvanceMs(5 * kMinute + 1);
  am.Scan(s);
  v1::ListAlertsResponse r = am.List(false);
  ASSERT_NE(Find(r, "pending", "alice/web"), nullptr) << r.DebugString();
  EXPECT_TRUE(absl::StartsWith(Find(r, "pending", "alice/web")->message(), "1 task of alice/web pending for over 5m"))
      << Find(r, "pending", "alice/web")->message();
  EXPECT_EQ(Find(r, "pending", "alice/report"), nullptr) << r.DebugString();
  // Scanning again keeps one firing alarm, counted once.
  am.Scan(s);
  EXPECT_EQ(Find(am.List(false), "pending", "alice/web")->count(), 1);
  // Quota: 1,800m of 2,000m CPU is 90%.
  ASSERT_NE(Find(r, "quota", "alice/production"), nullptr) << r.DebugString();
  EXPECT_TRUE(absl::StrContains(Find(r, "quota", "alice/production")->message(), "90% of its cpu quota"))
      << Find(r, "quota", "alice/production")->message();

  // A machine goes down: fires at once, resolves when it is up.
  apply(Down("m1", "missed 3 polls"));
  r = am.List(false);
  ASSERT_NE(Find(r, "machine_down", "m1"), nullptr);
  EXPECT_EQ(Find(r, "machine_down", "m1")->message(), "machine m1 is down: missed 3 polls");
  apply(Up("m1"));
  EXPECT_EQ(Find(am.List(false), "machine_down", "m1"), nullptr);

  // The job killed: nothing pending, no usage: both resolve on the next scan.
  apply(Kill("alice/web"));
  am.Scan(s);
  EXPECT_EQ(am.List(false).alerts_size(), 0) << am.List(false).DebugString();
}

TEST(AlertManager, AFailedRolloutFiresUntilItIsResumedOrRolledBack) {
  ManualClock clock;
  AlertManager am(Rules{}, "local", &clock);
  cell::CellState s;
  auto apply = [&](v1::Mutation m) {
    m.set_revision(s.revision() + 1);
    m.set_time_ms(clock.NowMs());
    absl::Status st = s.Apply(m);
    ASSERT_TRUE(st.ok()) << st << m.ShortDebugString();
    am.Observe(m);
  };
  apply(Register(MachineBuilder("m1").Cpu(4000).Memory(1ll << 30).Address("m1:1").Build()));
  v1::JobSpec spec = JobBuilder("web").Priority(200).Tasks(1).Cpu(100).Memory(1 << 20).Build();
  spec.mutable_update()->set_max_unavailable(1);
  apply(Submit(spec));
  apply(Schedule("alice/web", 0, "m1"));
  v1::JobSpec next = spec;
  (*next.mutable_task()->mutable_env())["VERSION"] = "2";
  const cell::Job* job = s.FindJob("alice/web");
  apply(cell::PlanUpdate(*job, next, cell::DiffJob(s, job, next), "updated by alice", &next.update()));
  am.Scan(s);
  EXPECT_EQ(Find(am.List(false), "rollout_failed", "alice/web"), nullptr) << "rolling is not failing";

  auto rollout = [&](v1::Rollout::State state, const std::string& why) {
    v1::Mutation m;
    m.mutable_rollout_changed()->set_job("alice/web");
    m.mutable_rollout_changed()->set_version(2);
    m.mutable_rollout_changed()->set_state(state);
    m.mutable_rollout_changed()->set_message(why);
    apply(m);
  };
  rollout(v1::Rollout::FAILED, "task 0 of version 2 failed: exited 1");
  am.Scan(s);
  const v1::ListAlertsResponse listed = am.List(false);
  const v1::Alert* a = Find(listed, "rollout_failed", "alice/web");
  ASSERT_NE(a, nullptr) << listed.DebugString();
  EXPECT_TRUE(absl::StrContains(a->message(), "the update of alice/web to version 2 failed: task 0 of version 2"))
      << a->message();
  am.Scan(s);
  EXPECT_EQ(Find(am.List(false), "rollout_failed", "alice/web")->count(), 1);
  // herd resume: rolling again, the alarm resolves.
  rollout(v1::Rollout::ROLLING, "resumed by alice");
  am.Scan(s);
  EXPECT_EQ(Find(am.List(false), "rollout_failed", "alice/web"), nullptr);

  Rules off;
  off.rollout_failed = false;
  AlertManager quiet(off, "local", &clock);
  rollout(v1::Rollout::FAILED, "again");
  quiet.Scan(s);
  EXPECT_EQ(Find(quiet.List(false), "rollout_failed", "alice/web"), nullptr);
  auto parsed = ParseRules("rollout_failed: false\n", "a.yaml");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_FALSE(parsed->rollout_failed);
}

TEST(AlertManager, NotifiesTheSinksOfFiringAndResolvingFromTheFeed) {
  ManualClock clock;
  store::MemoryLogStore store;
  Committer committer(cell::CellState(), &store, &clock, Committer::Options{});
  Rules rules;
  rules.quiet_ms = kMinute;
  AlertManager am(rules, "local", &clock);
  RecordingSink::Log log;
  am.AddSink(std::make_unique<RecordingSink>(&log));
  am.Start(&committer, /*scan_ms=*/10);
  auto commit = [&](v1::Mutation m) {
    m.set_time_ms(clock.NowMs());
    ASSERT_TRUE(committer.Commit("test", [&](const cell::CellState&) { return std::vector<v1::Mutation>{m}; }).ok());
  };
  commit(Register(MachineBuilder("m1").Cpu(1000).Memory(1ll << 30).Address("m1:1").Build()));
  commit(Down("m1", "missed 3 polls"));
  ASSERT_TRUE(Eventually([&] { return Find(am.List(false), "machine_down", "m1") != nullptr; }));
  commit(Up("m1"));
  ASSERT_TRUE(Eventually([&] { return Find(am.List(false), "machine_down", "m1") == nullptr; }));
  ASSERT_TRUE(Eventually([&] { return log.Get().size() >= 2; }));
  am.Stop();
  const std::vector<std::string> sent = log.Get();
  ASSERT_EQ(sent.size(), 2u);
  EXPECT_TRUE(absl::StartsWith(sent[0], "{\"status\":\"firing\",\"cell\":\"local\",\"alert\":{\"rule\":\"machine_down\""))
      << sent[0];
  EXPECT_TRUE(absl::StartsWith(sent[1], "{\"status\":\"resolved\"")) << sent[1];
}

TEST(Sinks, ACommandGetsTheNotificationOnStdinAndAWebhookAPost) {
  const std::string dir = ::testing::TempDir();
  const std::string file = absl::StrCat(dir, "/alerts-", getpid(), ".jsonl");
  std::filesystem::remove(file);
  auto cmd = CommandSink({"/bin/sh", "-c", absl::StrCat("cat >> ", file, "; echo >> ", file)});
  ASSERT_TRUE(cmd->Send("{\"status\":\"firing\"}").ok());
  std::ifstream in(file);
  std::stringstream got;
  got << in.rdbuf();
  EXPECT_EQ(got.str(), "{\"status\":\"firing\"}\n");
  EXPECT_FALSE(CommandSink({"/bin/false"})->Send("{}").ok());
  EXPECT_FALSE(CommandSink({"/nonexistent/page"})->Send("{}").ok());

  HttpServer server([](const HttpRequest& req, HttpConn& conn) {
    conn.Respond(req.path == "/hook" && req.method == "POST" ? 200 : 404, "");
  });
  ASSERT_TRUE(WebhookSink(server.Url("hook"))->Send("{\"status\":\"resolved\"}").ok());
  std::vector<HttpRequest> reqs = server.requests();
  ASSERT_EQ(reqs.size(), 1u);
  EXPECT_EQ(reqs[0].body, "{\"status\":\"resolved\"}");
  EXPECT_EQ(reqs[0].Header("content-type"), "application/json");
  absl::Status st = WebhookSink(server.Url("elsewhere"))->Send("{}");
  EXPECT_TRUE(absl::StrContains(st.message(), "answered 404")) << st;
  std::filesystem::remove(file);
}

}  // namespace
}  // namespace herd::master::alerts
