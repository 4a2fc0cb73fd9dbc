// What the history (docs/history.md) and the Prometheus hooks cost the
// master, beside what it spends anyway on the same events.
//
// A cell of N tasks (default 10,000) on M machines (default 100), in jobs of
// 100: every task submitted, placed and reported running -- the mutations a
// real master commits -- and then `minutes` minutes of usage, every machine
// polled every `poll` seconds with a sample for each of its tasks. Measured
// on this thread, CPU time:
//   baseline   applying the mutations to the cell's state (the master's own
//              work for them, before any disk)
//   metrics    the committer's metric hooks for the same mutations
//   events     turning them into history rows and writing those (SQLite)
//   usage      summing the replies' samples and writing a row per task per
//              minute, as a share of one core
//
//   history_bench [--tasks 10000] [--machines 100] [--poll 2] [--minutes 5]
#include <time.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cell/cell_state.h"
#include "master/core/master_metrics.h"
#include "master/history/history_db.h"
#include "master/history/recorder.h"
#include "metrics/registry.h"
#include "testing/builders.h"

namespace {

using namespace herd;  // NOLINT

double CpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

void Check(const absl::Status& st, const char* what) {
  if (!st.ok()) {
    std::fprintf(stderr, "%s: %s\n", what, st.ToString().c_str());
    std::exit(1);
  }
}

}  // namespace

int main(int argc, char** argv) {
  int tasks = 10'000, machines = 100, poll_s = 2, minutes = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const int v = std::atoi(argv[i + 1]);
    if (flag == "--tasks") tasks = v;
    else if (flag == "--machines") machines = v;
    else if (flag == "--poll") poll_s = v;
    else if (flag == "--minutes") minutes = v;
    else {
      std::fprintf(stderr, "usage: history_bench [--tasks N] [--machines M] [--poll S] [--minutes K]\n");
      return 2;
    }
  }
  if (tasks < 100 || machines < 1 || poll_s < 1 || minutes < 1) {
    std::fprintf(stderr, "history_bench: need --tasks >= 100 and positive --machines, --poll, --minutes\n");
    return 2;
  }
  const std::string dir = absl::StrCat(std::filesystem::temp_directory_path().string(), "/herd-history-bench-",
                                       ::getpid());
  std::filesystem::create_directories(dir);

  // The mutations, stamped and applied as the committer would.
  cell::CellState state;
  std::vector<v1::Mutation> muts;
  auto add = [&](v1::Mutation m) {
    m.set_revision(state.revision() + 1);
    m.set_time_ms(1'800'000'000'000 + state.revision());
    m.set_actor("bench");
    Check(state.Apply(m), "apply");
    muts.push_back(std::move(m));
  };
  for (int i = 0; i < machines; ++i) {
    add(testing::Register(testing::MachineBuilder(absl::StrCat("m", i))
                              .Cpu(1'000'000)
                              .Memory(1ll << 40)
                              .Address(absl::StrCat("10.0.", i / 250, ".", i % 250, ":7071"))
                              .Build()));
  }
  const int jobs = tasks / 100;
  for (int j = 0; j < jobs; ++j) {
    add(testing::Submit(
        testing::JobBuilder(absl::StrCat("job", j)).Tasks(100).Cpu(100).Memory(64 << 20).Env("K", "v").Build()));
  }
  for (int j = 0; j < jobs; ++j) {
    const std::string id = absl::StrCat("alice/job", j);
    for (int i = 0; i < 100; ++i) add(testing::Schedule(id, i, absl::StrCat("m", (j * 100 + i) % machines)));
    for (int i = 0; i < 100; ++i) {
      const int64_t inc = state.FindJob(id)->tasks[i].incarnation();
      add(testing::Observed(testing::Ref(id, i, inc), v1::Task::ACTIVE, 1000 + i));
    }
  }

  // Baseline: the same mutations applied to a fresh state.
  double t0 = CpuSeconds();
  {
    cell::CellState fresh;
    for (const v1::Mutation& m : muts) Check(fresh.Apply(m), "apply");
  }
  const double apply_s = CpuSeconds() - t0;

  // The metric hooks (docs/monitoring.md) on the same mutations.
  metrics::Registry registry;
  master::MasterOptions options;
  master::AddMetricHooks(registry, &options);
  t0 = CpuSeconds();
  for (const v1::Mutation& m : muts) options.committer.on_applied(m);
  const double metrics_s = CpuSeconds() - t0;
  t0 = CpuSeconds();
  const std::string scrape = registry.Text();
  const double scrape_s = CpuSeconds() - t0;

  // The history's events, in the recorder's batches.
  master::history::Options ho;
  ho.path = dir + "/history.db";
  auto db = master::history::HistoryDb::Open(ho);
  Check(db.status(), "open");
  master::history::EventMapper mapper;
  t0 = CpuSeconds();
  for (size_t i = 0; i < muts.size(); i += 2000) {
    master::history::Batch batch;
    for (size_t k = i; k < std::min(muts.size(), i + 2000); ++k) mapper.Add(muts[k], &batch);
    batch.revision = muts[std::min(muts.size(), i + 2000) - 1].revision();
    Check((*db)->Write(batch), "write");
  }
  const double events_s = CpuSeconds() - t0;

  // Usage: each machine's reply every poll, each with all its tasks.
  std::vector<v1::PollResponse> replies(machines);
  for (int j = 0; j < jobs; ++j) {
    for (int i = 0; i < 100; ++i) {
      v1::PollResponse& r = replies[(j * 100 + i) % machines];
      v1::RunStatus* run = r.add_runs();
      *run->mutable_ref() = testing::Ref(absl::StrCat("alice/job", j), i, 1);
      run->mutable_usage()->set_cpu_millis(50 + i);
      run->mutable_usage()->set_memory_working_set_bytes(30 << 20);
      run->mutable_usage()->set_disk_bytes(1 << 20);
      run->mutable_usage()->set_sampled_ms(1);
    }
  }
  for (v1::PollResponse& r : replies) {
    r.mutable_machine_usage()->set_cpu_millis(5000);
    r.mutable_machine_usage()->set_sampled_ms(1);
  }
  master::history::UsageAccumulator usage;
  const int polls_per_minute = 60 / poll_s;
  t0 = CpuSeconds();
  for (int minute = 0; minute < minutes; ++minute) {
    for (int p = 0; p < polls_per_minute; ++p) {
      for (int m = 0; m < machines; ++m) usage.Add(absl::StrCat("m", m), replies[m]);
    }
    master::history::Batch batch;
    usage.Flush(1'800'000'000'000 + minute * 60'000ll, 60'000, &batch);
    Check((*db)->Write(batch), "write usage");
  }
  const double usage_s = (CpuSeconds() - t0) / minutes;
  t0 = CpuSeconds();
  Check((*db)->Maintain(1'800'000'000'000 + minutes * 60'000ll), "maintain");
  const double maintain_s = CpuSeconds() - t0;
  const double db_bytes = static_cast<double>(std::filesystem::file_size(ho.path)) +
                          static_cast<double>(std::filesystem::exists(ho.path + "-wal")
                                                  ? std::filesystem::file_size(ho.path + "-wal")
                                                  : 0);
  db->reset();
  std::filesystem::remove_all(dir);

  const double n = static_cast<double>(muts.size());
  std::printf("history_bench: %d tasks on %d machines, %zu mutations, polls every %d s, %d minutes of usage\n", tasks,
              machines, muts.size(), poll_s, minutes);
  std::printf("  baseline: applying the mutations   %8.2f us/mutation\n", 1e6 * apply_s / n);
  std::printf("  metrics hooks                      %8.2f us/mutation (%.2f%% of the baseline); a scrape %.2f ms\n",
              1e6 * metrics_s / n, 100 * metrics_s / apply_s, 1e3 * scrape_s);
  std::printf("  history events (rows + SQLite)     %8.2f us/mutation (%.0f%% of the baseline)\n",
              1e6 * events_s / n, 100 * events_s / apply_s);
  std::printf("  history usage                      %8.1f ms CPU per minute = %.3f%% of one core\n", 1e3 * usage_s,
              100 * usage_s / 60);
  std::printf("  maintenance (rollup, retention)    %8.1f ms\n", 1e3 * maintain_s);
  std::printf("  database                           %8.1f bytes per task-minute of usage (with events)\n",
              db_bytes / (static_cast<double>(tasks) * minutes));
  std::printf("RESULT apply_us_per_mutation=%.3f\n", 1e6 * apply_s / n);
  std::printf("RESULT metrics_us_per_mutation=%.3f\n", 1e6 * metrics_s / n);
  std::printf("RESULT metrics_scrape_ms=%.3f\n", 1e3 * scrape_s);
  std::printf("RESULT history_events_us_per_mutation=%.3f\n", 1e6 * events_s / n);
  std::printf("RESULT history_usage_ms_per_minute=%.2f\n", 1e3 * usage_s);
  std::printf("RESULT history_usage_core_share=%.5f\n", usage_s / 60);
  std::printf("RESULT history_bytes_per_task_minute=%.1f\n", db_bytes / (static_cast<double>(tasks) * minutes));
  return 0;
}
