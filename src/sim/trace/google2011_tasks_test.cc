#include "sim/trace/google2011_tasks.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <set>

#include "absl/strings/str_cat.h"
#include "google/protobuf/util/message_differencer.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/ids.h"
#include "base/priority.h"
#include "spec/validate.h"

namespace herd::sim {
namespace {

namespace fs = std::filesystem;

std::string TempDir(const std::string& name) {
  fs::path p = fs::temp_directory_path() / absl::StrCat(name, "_", ::getpid());
  fs::remove_all(p);
  fs::create_directories(p);
  return p.string();
}

std::string WriteGzAt(const std::string& path, const std::string& text) {
  gzFile f = gzopen(path.c_str(), "wb");
  gzwrite(f, text.data(), static_cast<unsigned>(text.size()));
  gzclose(f);
  return path;
}

// One task_events row; "" leaves a field empty.
std::string Row(int64_t ts, int64_t job, int idx, const std::string& machine, int type, const std::string& cpu = "0.1",
                const std::string& mem = "0.2", int prio = 9, int cls = 2, const std::string& diff = "0",
                const std::string& user = "alice=") {
  return absl::StrCat(ts, ",,", job, ",", idx, ",", machine, ",", type, ",", user, ",", cls, ",", prio, ",", cpu, ",",
                      mem, ",0.001,", diff, "\n");
}

// Rows sorted by timestamp (stable: a task's own rows keep their order).
std::string ByTime(const std::string& text) {
  std::vector<std::string> rows = absl::StrSplit(text, '\n', absl::SkipEmpty());
  std::stable_sort(rows.begin(), rows.end(), [](const std::string& x, const std::string& y) {
    return std::stoll(x.substr(0, x.find(','))) < std::stoll(y.substr(0, y.find(',')));
  });
  return absl::StrCat(absl::StrJoin(rows, "\n"), "\n");
}

const TraceTask* Find(const std::vector<TraceTask>& tasks, int64_t job, int idx) {
  for (const TraceTask& t : tasks) {
    if (t.job_id == job && t.index == idx) return &t;
  }
  return nullptr;
}

class TasksAtTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = TempDir("herd_task_events");
    std::string a, b;
    // 1: submit -> schedule -> finish.
    a += Row(100, 1, 0, "", 0) + Row(200, 1, 0, "7", 1);
    // 2: scheduled, evicted, resubmitted, rescheduled elsewhere.
    a += Row(100, 2, 0, "", 0) + Row(110, 2, 0, "5", 1) + Row(200, 2, 0, "5", 2) + Row(201, 2, 0, "", 0);
    // 3: an update-running changes the requests.
    a += Row(100, 3, 0, "", 0) + Row(110, 3, 0, "4", 1);
    // 4: requests never known.
    a += Row(120, 4, 0, "3", 1, "", "");
    // 7: submitted without requests; a later update-pending gives them.
    a += Row(100, 7, 0, "", 0, "", "");
    // 8: killed while pending.
    a += Row(100, 8, 0, "", 0) + Row(130, 8, 0, "", 5);
    // The second part: later events.
    b += Row(250, 2, 0, "6", 1) + Row(300, 1, 0, "7", 4);
    b += Row(210, 3, 0, "4", 8, "0.2", "0.3");
    b += Row(300, 6, 0, "2", 1);                    // 6: submitted before the window
    b += Row(300, 7, 0, "", 7, "0.05", "0.06");
    b += Row(400, 5, 0, "9", 4, "0.5", "0.25");      // 5.0: finished; was running
    b += Row(400, 5, 1, "", 0);                     // 5.1: submitted later
    // The second part's name sorts after the first's.
    WriteGzAt(dir_ + "/part-00000-of-00002.csv.gz", ByTime(a));
    WriteGzAt(dir_ + "/part-00001-of-00002.csv.gz", ByTime(b));
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string dir_;
};

TEST_F(TasksAtTest, StatesAtEachInstant) {
  TasksAtStats st;
  auto at150 = TasksAt(dir_, 150, &st);
  ASSERT_TRUE(at150.ok()) << at150.status();
  const TraceTask* t = Find(*at150, 1, 0);
  ASSERT_NE(t, nullptr);
  EXPECT_FALSE(t->running);
  EXPECT_EQ(t->machine_id, -1);
  EXPECT_EQ(t->last_event_us, 100);
  t = Find(*at150, 2, 0);
  ASSERT_NE(t, nullptr);
  EXPECT_TRUE(t->running);
  EXPECT_EQ(t->machine_id, 5);
  t = Find(*at150, 3, 0);
  ASSERT_NE(t, nullptr);
  EXPECT_DOUBLE_EQ(t->cpu, 0.1);
  EXPECT_EQ(Find(*at150, 4, 0), nullptr);  // unknown requests
  EXPECT_EQ(st.unknown_requests, 1);
  t = Find(*at150, 5, 0);  // inferred from its finish at 400
  ASSERT_NE(t, nullptr);
  EXPECT_TRUE(t->running);
  EXPECT_EQ(t->machine_id, 9);
  EXPECT_EQ(t->last_event_us, -1);
  EXPECT_DOUBLE_EQ(t->memory, 0.25);
  EXPECT_EQ(Find(*at150, 5, 1), nullptr);  // submitted later
  t = Find(*at150, 6, 0);                  // scheduled later: pending now
  ASSERT_NE(t, nullptr);
  EXPECT_FALSE(t->running);
  t = Find(*at150, 7, 0);  // requests from its later update
  ASSERT_NE(t, nullptr);
  EXPECT_DOUBLE_EQ(t->cpu, 0.05);
  EXPECT_DOUBLE_EQ(t->memory, 0.06);
  EXPECT_EQ(Find(*at150, 8, 0), nullptr);  // killed
  EXPECT_EQ(st.live, static_cast<int64_t>(at150->size()));
  EXPECT_EQ(st.inferred, 2);
  EXPECT_EQ(st.window_start_us, 100);
  EXPECT_EQ(st.window_end_us, 400);
  EXPECT_EQ(t->priority, 9);
  EXPECT_EQ(t->scheduling_class, 2);
  EXPECT_EQ(t->user, "alice=");
  // Sorted by (job, index).
  for (size_t i = 1; i < at150->size(); ++i) EXPECT_LT((*at150)[i - 1].job_id, (*at150)[i].job_id);
}

TEST_F(TasksAtTest, EvictRescheduleAndUpdate) {
  auto at200 = TasksAt(dir_, 200);
  ASSERT_TRUE(at200.ok()) << at200.status();
  EXPECT_EQ(Find(*at200, 2, 0), nullptr);  // evicted: dead until resubmitted
  const TraceTask* t = Find(*at200, 3, 0);
  ASSERT_NE(t, nullptr);
  EXPECT_DOUBLE_EQ(t->cpu, 0.1);
  auto at210 = TasksAt(dir_, 210);
  ASSERT_TRUE(at210.ok());
  t = Find(*at210, 3, 0);
  ASSERT_NE(t, nullptr);
  EXPECT_DOUBLE_EQ(t->cpu, 0.2);  // the update at 210 counts ("at or before")
  EXPECT_DOUBLE_EQ(t->memory, 0.3);
  EXPECT_TRUE(t->running);
  EXPECT_EQ(t->machine_id, 4);
  auto at220 = TasksAt(dir_, 220);
  ASSERT_TRUE(at220.ok());
  t = Find(*at220, 2, 0);
  ASSERT_NE(t, nullptr);
  EXPECT_FALSE(t->running);
  auto at260 = TasksAt(dir_, 260);
  ASSERT_TRUE(at260.ok());
  t = Find(*at260, 2, 0);
  ASSERT_NE(t, nullptr);
  EXPECT_TRUE(t->running);
  EXPECT_EQ(t->machine_id, 6);
  t = Find(*at260, 1, 0);
  ASSERT_NE(t, nullptr);
  EXPECT_TRUE(t->running);
  EXPECT_EQ(t->machine_id, 7);
  auto at300 = TasksAt(dir_, 300);
  ASSERT_TRUE(at300.ok());
  EXPECT_EQ(Find(*at300, 1, 0), nullptr);  // finished at 300
  EXPECT_EQ(TasksAt(dir_, 50).status().code(), absl::StatusCode::kOutOfRange);
}

TEST_F(TasksAtTest, EventsBetweenIsHalfOpenAndInOrder) {
  auto ev = EventsBetween(dir_, 200, 300);
  ASSERT_TRUE(ev.ok()) << ev.status();
  ASSERT_FALSE(ev->empty());
  int64_t last = 0;
  for (const TraceEvent& e : *ev) {
    EXPECT_GE(e.time_us, 200);
    EXPECT_LT(e.time_us, 300);
    EXPECT_GE(e.time_us, last);
    last = e.time_us;
  }
  EXPECT_EQ(ev->front().time_us, 200);
  auto evict = std::find_if(ev->begin(), ev->end(), [](const TraceEvent& e) { return e.type == TaskEventType::kEvict; });
  ASSERT_NE(evict, ev->end());
  EXPECT_EQ(evict->job_id, 2);
  EXPECT_EQ(evict->machine_id, 5);
  EXPECT_DOUBLE_EQ(evict->cpu, 0.1);
  EXPECT_EQ(evict->different_machines, 0);
  EXPECT_EQ(evict->missing_info, -1);
}

TEST(TaskEvents, BadRowsSayWhere) {
  std::string dir = TempDir("herd_task_events_bad");
  WriteGzAt(dir + "/part-0.csv.gz", Row(100, 1, 0, "", 0) + "100,,1,0,,9,u,0,0,0.1,0.1,0,0\n");
  auto r = TasksAt(dir, 100);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(std::string(r.status().message()).find("part-0.csv.gz:2: column 6 (event_type)"), std::string::npos)
      << r.status();
  WriteGzAt(dir + "/part-0.csv.gz", "100,,1,0,,0,u,0\n");
  r = TasksAt(dir, 100);
  EXPECT_NE(std::string(r.status().message()).find(":1: not a task_events row"), std::string::npos) << r.status();
  WriteGzAt(dir + "/part-0.csv.gz", "100,,1,0,,0,u,0,0,abc,0.1,0,0\n");
  r = TasksAt(dir, 100);
  EXPECT_NE(std::string(r.status().message()).find("cpu_request"), std::string::npos) << r.status();
  EXPECT_EQ(TasksAt(dir + "/nope", 0).status().code(), absl::StatusCode::kNotFound);
  fs::remove_all(dir);
}

TraceTask Task(int64_t job, int idx, double cpu, double mem, int prio = 9, int cls = 0) {
  TraceTask t;
  t.job_id = job;
  t.index = idx;
  t.cpu = cpu;
  t.memory = mem;
  t.priority = prio;
  t.scheduling_class = cls;
  t.user = "fJYeclskJqPWsAT6TX/r9X5OiIZpSEb2PBGliYAOMxM=";
  return t;
}

TEST(JobsFromTasks, GroupsRenumbersAndOverrides) {
  std::vector<TraceTask> tasks = {Task(20, 9, 0.01, 0.01), Task(20, 3, 0.01, 0.01), Task(20, 7, 0.02, 0.01),
                                  Task(10, 0, 0, 1e-9, 0, 3)};
  tasks[2].running = true;
  tasks[2].machine_id = 42;
  tasks[1].different_machines = true;
  std::vector<TraceJobIndex> index;
  std::vector<v1::JobSpec> jobs = JobsFromTasks(tasks, {}, &index);
  ASSERT_EQ(jobs.size(), 2u);
  const v1::JobSpec& small = jobs[0];
  EXPECT_EQ(small.name(), "g10");
  EXPECT_EQ(small.task().resources().cpu_millis(), 1);           // rounded up
  EXPECT_EQ(small.task().resources().memory_bytes(), 1LL << 20);  // at least 1 MiB
  EXPECT_EQ(small.priority(), 0);
  EXPECT_EQ(small.appclass(), v1::LATENCY_SENSITIVE);
  const v1::JobSpec& j = jobs[1];
  EXPECT_EQ(j.name(), "g20");
  EXPECT_EQ(j.task_count(), 3);
  EXPECT_EQ(j.priority(), 200);
  EXPECT_EQ(j.appclass(), v1::BATCH);
  EXPECT_TRUE(j.different_machines());
  EXPECT_EQ(j.task().resources().cpu_millis(), 480);
  EXPECT_EQ(j.task().resources().memory_bytes(), std::llround(0.01 * (192LL << 30)));
  EXPECT_EQ(j.task().command(0), "/bin/true");
  ASSERT_EQ(j.overrides_size(), 1);
  EXPECT_EQ(j.overrides(0).indexes_size(), 1);
  EXPECT_EQ(j.overrides(0).indexes(0), 1);  // trace index 7 is Herd index 1
  EXPECT_EQ(j.overrides(0).cpu_millis(), 960);
  EXPECT_FALSE(j.overrides(0).has_memory_bytes());
  ASSERT_EQ(index.size(), 2u);
  EXPECT_EQ(index[1].trace_index, (std::vector<int32_t>{3, 7, 9}));
  EXPECT_EQ(index[1].machine_id, (std::vector<int64_t>{-1, 42, -1}));
  EXPECT_EQ(index[1].job, j.user() + "/g20");
  for (const v1::JobSpec& s : jobs) EXPECT_TRUE(spec::Validate(s).ok()) << spec::Validate(s);
  // Deterministic.
  std::vector<v1::JobSpec> again = JobsFromTasks(tasks);
  ASSERT_EQ(again.size(), jobs.size());
  for (size_t i = 0; i < jobs.size(); ++i) {
    EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(again[i], jobs[i])) << i;
  }
}

TEST(JobsFromTasks, PriorityTableAndUserNames) {
  const int32_t want[12] = {0, 25, 100, 103, 106, 109, 112, 115, 116, 200, 360, 250};
  for (int p = 0; p < 12; ++p) EXPECT_EQ(HerdPriority(p), want[p]) << p;
  EXPECT_EQ(BandOf(HerdPriority(1)), Band::kFree);
  EXPECT_EQ(BandOf(HerdPriority(7)), Band::kBatch);
  EXPECT_EQ(BandOf(HerdPriority(8)), Band::kMid);
  EXPECT_EQ(BandOf(HerdPriority(9)), Band::kProduction);
  EXPECT_EQ(BandOf(HerdPriority(10)), Band::kMonitoring);
  EXPECT_EQ(BandOf(HerdPriority(11)), Band::kProduction);
  std::string u = HerdUserName("fJYeclskJqPWsAT6TX/r9X5OiIZpSEb2PBGliYAOMxM=");
  EXPECT_EQ(u.size(), 11u);
  EXPECT_EQ(u[0], 'u');
  EXPECT_EQ(u, HerdUserName("fJYeclskJqPWsAT6TX/r9X5OiIZpSEb2PBGliYAOMxM="));
  EXPECT_NE(u, HerdUserName("4Ubmtvv/epOnUEgegvGV9mCxxcZkV4z/Dm8RY/9SEYw="));
  EXPECT_TRUE(ValidateUserName(u).ok());
  EXPECT_TRUE(ValidateUserName(HerdUserName("")).ok());
}

TEST(TaskConstraints, LoadAndAttach) {
  std::string dir = TempDir("herd_task_constraints");
  WriteGzAt(dir + "/part-0.csv.gz",
          "10,20,3,0,GQ+x/w=,1\n"
          "10,20,3,0,GQ+x/w=,1\n"  // duplicate
          "10,20,3,1,kernel,\n"
          "10,20,7,3,cores,4\n"
          "99,20,9,2,late,1\n");
  auto c = LoadTaskConstraints(dir, 50);
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ(c->size(), 2u);
  const auto& first = c->at({20, 3});
  ASSERT_EQ(first.size(), 2u);
  EXPECT_EQ(first[0].attribute(), "GQ-x/w_");
  EXPECT_EQ(first[0].op(), v1::Constraint::EQ);
  EXPECT_EQ(first[1].op(), v1::Constraint::EXISTS);
  EXPECT_EQ(c->at({20, 7})[0].op(), v1::Constraint::GT);
  std::vector<v1::JobSpec> jobs = JobsFromTasks({Task(20, 7, 0.1, 0.1), Task(20, 3, 0.1, 0.1)}, {}, nullptr, &*c);
  ASSERT_EQ(jobs.size(), 1u);
  EXPECT_EQ(jobs[0].constraints_size(), 2);  // the lowest-indexed task's
  EXPECT_TRUE(spec::Validate(jobs[0]).ok()) << spec::Validate(jobs[0]);
  WriteGzAt(dir + "/part-0.csv.gz", "10,20,3,4,a,1\n");
  EXPECT_NE(std::string(LoadTaskConstraints(dir, 50).status().message()).find("part-0.csv.gz:1:"),
            std::string::npos);
  fs::remove_all(dir);
}

TEST(Google2011Tasks, TheRealTaskEventsPart) {
  const char* env = std::getenv("HERD_TRACES");
  std::string dir = std::string(env ? env : "") + "/google-2011/task_events";
  if (!env || !fs::exists(dir)) GTEST_SKIP() << "trace not found at " << dir;
  TasksAtStats st;
  const int64_t at = 8'000'000'000;  // 2.2 h, inside the part's window
  auto tasks = TasksAt(dir, at, &st);
  ASSERT_TRUE(tasks.ok()) << tasks.status();
  EXPECT_EQ(st.rows, 77'776);
  EXPECT_LT(st.window_start_us, at);
  EXPECT_GT(st.window_end_us, at);
  EXPECT_GT(tasks->size(), 2'000u);
  EXPECT_GT(st.running, 1'000);
  EXPECT_GT(st.pending, 0);
  std::vector<TraceJobIndex> index;
  std::vector<v1::JobSpec> jobs = JobsFromTasks(*tasks, {}, &index);
  EXPECT_GT(jobs.size(), 100u);
  int64_t n = 0;
  std::set<std::string> names;
  for (const v1::JobSpec& s : jobs) {
    n += s.task_count();
    EXPECT_TRUE(names.insert(s.user() + "/" + s.name()).second);
    absl::Status v = spec::Validate(s);
    EXPECT_TRUE(v.ok()) << s.name() << ": " << v;
    if (!v.ok()) break;
  }
  EXPECT_EQ(n, static_cast<int64_t>(tasks->size()));
  auto ev = EventsBetween(dir, at, at + 60'000'000);
  ASSERT_TRUE(ev.ok()) << ev.status();
  EXPECT_GT(ev->size(), 100u);
  std::cout << "task_events at " << at << ": " << tasks->size() << " tasks (" << st.running << " running, "
            << st.pending << " pending, " << st.inferred << " inferred, " << st.unknown_requests
            << " skipped for unknown requests) in " << jobs.size() << " jobs; " << ev->size()
            << " events in the next minute\n";
}

}  // namespace
}  // namespace herd::sim
