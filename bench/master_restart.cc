// Master restart time with N tasks in the store (default 10,000).
//
// Builds a realistic store: M machines registered, N tasks submitted (jobs of
// 100 tasks), every one scheduled and reported running -- the mutations a
// real master would have written -- then measures, on the SQLite store:
//   baseline      reading (and parsing) the whole log, applying nothing
//   log replay    recovering the state from the log alone
//   snapshot      recovering from a snapshot at the end (as the master writes
//                 every 10,000 mutations) plus the log after it
//   process       `herd master` exec -> answering its first API call (with --herd)
//
//   master_restart [--tasks 10000] [--machines 100] [--herd build/bin/herd]
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "cell/cell_state.h"
#include "master/core/recovery.h"
#include "store/sqlite/sqlite_log_store.h"
#include "testing/builders.h"

#ifdef HERD_BENCH_WITH_GRPC
#include "herd/v1/api.grpc.pb.h"
#include "pki/pki.h"
#include "rpc/rpc.h"
#endif

namespace {

using Clock = std::chrono::steady_clock;
double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

// Applies and appends in batches, like the master's group commit would.
class Writer {
 public:
  Writer(herd::cell::CellState* s, herd::store::LogStore* st) : state_(s), store_(st) {}
  void Add(herd::v1::Mutation m) {
    m.set_revision(state_->revision() + 1);
    m.set_time_ms(1'700'000'000'000 + state_->revision());
    absl::Status st = state_->Apply(m);
    if (!st.ok()) {
      std::fprintf(stderr, "bad mutation: %s\n", st.ToString().c_str());
      std::exit(1);
    }
    batch_.push_back(std::move(m));
    if (batch_.size() >= 1000) Flush();
  }
  void Flush() {
    if (batch_.empty()) return;
    absl::Status st = store_->Append(batch_);
    if (!st.ok()) {
      std::fprintf(stderr, "append: %s\n", st.ToString().c_str());
      std::exit(1);
    }
    batch_.clear();
  }

 private:
  herd::cell::CellState* state_;
  herd::store::LogStore* store_;
  std::vector<herd::v1::Mutation> batch_;
};

}  // namespace

int main(int argc, char** argv) {
  using namespace herd;  // NOLINT
  int tasks = 10'000, machines = 100;
  std::string herd_bin;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--tasks") tasks = std::atoi(argv[i + 1]);
    if (a == "--machines") machines = std::atoi(argv[i + 1]);
    if (a == "--herd") herd_bin = argv[i + 1];
  }
  std::string dir = absl::StrCat("/tmp/herd-bench-restart-", getpid());
  std::filesystem::create_directories(dir);
  std::string db = dir + "/cell.db";
  cell::CellState state;
  int64_t snapshot_rev = 0;
  {
    auto store = store::SqliteLogStore::Open(db);
    if (!store.ok()) return 1;
    Writer w(&state, store->get());
    for (int i = 0; i < machines; ++i) {
      w.Add(testing::Register(testing::MachineBuilder(absl::StrCat("m", i))
                                  .Cpu(64'000)
                                  .Memory(512LL << 30)
                                  .Attr("rack", absl::StrCat("r", i / 20))
                                  .Build()));
    }
    int jobs = (tasks + 99) / 100;
    int placed = 0;
    for (int j = 0; j < jobs; ++j) {
      int n = std::min(100, tasks - j * 100);
      std::string name = absl::StrCat("job", j);
      w.Add(testing::Submit(testing::JobBuilder(name, j % 7 == 0 ? "bob" : "alice")
                                .Tasks(n)
                                .Priority(j % 3 == 0 ? 200 : 100)
                                .Cpu(250)
                                .Memory(256LL << 20)
                                .Command({"/bin/server", "--shard=${task.index}"})
                                .Build()));
      for (int t = 0; t < n; ++t, ++placed) {
        std::string id = absl::StrCat(j % 7 == 0 ? "bob" : "alice", "/", name);
        w.Add(testing::Schedule(id, t, absl::StrCat("m", placed % machines)));
        w.Add(testing::Observed(testing::Ref(id, t, 1), v1::Task::ACTIVE, 10'000 + placed));
      }
    }
    w.Flush();
    snapshot_rev = state.revision();
  }
  std::printf("store: %d machines, %lld tasks running, %lld mutations, %.1f MiB on disk\n", machines,
              static_cast<long long>(state.task_count(v1::Task::RUNNING)), static_cast<long long>(state.revision()),
              std::filesystem::file_size(db) / 1048576.0 +
                  (std::filesystem::exists(db + "-wal") ? std::filesystem::file_size(db + "-wal") / 1048576.0 : 0));

  // Baseline: open and read + parse every log entry.
  auto t0 = Clock::now();
  int64_t n = 0;
  {
    auto store = store::SqliteLogStore::OpenReadOnly(db);
    (void)(*store)->ReadLog(1, snapshot_rev, [&](const v1::Mutation&) {
      ++n;
      return absl::OkStatus();
    });
  }
  double read_ms = Ms(Clock::now() - t0);

  t0 = Clock::now();
  {
    auto store = store::SqliteLogStore::OpenReadOnly(db);
    auto s = master::Recover(**store);
    if (!s.ok() || s->task_count(v1::Task::RUNNING) != tasks) {
      std::fprintf(stderr, "recovery from the log failed\n");
      return 1;
    }
  }
  double replay_ms = Ms(Clock::now() - t0);

  // Snapshot at the end (the master writes one every 10,000 mutations).
  {
    auto store = store::SqliteLogStore::Open(db);
    (void)(*store)->WriteSnapshot(state.ToSnapshot());
  }
  t0 = Clock::now();
  {
    auto store = store::SqliteLogStore::OpenReadOnly(db);
    auto s = master::Recover(**store);
    if (!s.ok() || s->task_count(v1::Task::RUNNING) != tasks) {
      std::fprintf(stderr, "recovery from the snapshot failed\n");
      return 1;
    }
  }
  double snap_ms = Ms(Clock::now() - t0);

  double process_ms = -1;
#ifdef HERD_BENCH_WITH_GRPC
  if (!herd_bin.empty()) {
    std::string listen = "127.0.0.1:17171";
    // The master's credential where it looks (DATA/credentials.pem), and an
    // admin's to ask it.
    auto ca = pki::CreateAuthority("bench", time(nullptr), 24 * 3600);
    auto master_cred = ca.ok() ? pki::IssueCredential(*ca, {pki::Role::kMaster, "master"}, time(nullptr), 24 * 3600)
                               : ca.status();
    auto admin = ca.ok() ? pki::IssueCredential(*ca, {pki::Role::kUser, "bench", true}, time(nullptr), 24 * 3600)
                         : ca.status();
    if (!master_cred.ok() || !admin.ok() || !pki::SaveCredential(dir + "/credentials.pem", *master_cred).ok()) {
      std::fprintf(stderr, "cannot make credentials in %s\n", dir.c_str());
      return 1;
    }
    t0 = Clock::now();
    pid_t pid = fork();
    if (pid == 0) {
      if (!std::getenv("HERD_BENCH_VERBOSE")) freopen("/dev/null", "w", stderr);
      execl(herd_bin.c_str(), herd_bin.c_str(), "master", "--data", dir.c_str(), "--listen", listen.c_str(),
            nullptr);
      _exit(127);
    }
    for (int i = 0; i < 3000; ++i) {
      // A fresh channel (and subchannel pool) per attempt, so a refused first
      // try does not leave us waiting out gRPC's reconnect backoff.
      grpc::ChannelArguments args;
      args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
      args.SetSslTargetNameOverride(pki::ServerName(rpc::MasterIdentity()));
      grpc::SslCredentialsOptions tls{admin->ca_pem, admin->key_pem, admin->cert_pem};
      auto stub = v1::Herd::NewStub(grpc::CreateCustomChannel(listen, grpc::SslCredentials(tls), args));
      v1::CellInfo info;
      auto ctx = rpc::Context("", 200);
      if (stub->GetCell(ctx.get(), v1::GetCellRequest(), &info).ok() && info.tasks_running() == tasks) {
        process_ms = Ms(Clock::now() - t0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    kill(pid, SIGTERM);
    waitpid(pid, nullptr, 0);
  }
#endif
  std::filesystem::remove_all(dir);

  std::printf("%-52s %9.1f ms\n", "baseline: open + read/parse the whole log", read_ms);
  std::printf("%-52s %9.1f ms  (%.1fx baseline)\n", "recover from the log alone (replay)", replay_ms,
              replay_ms / read_ms);
  std::printf("%-52s %9.1f ms  (%.1fx baseline)\n", "recover from a snapshot", snap_ms, snap_ms / read_ms);
  if (process_ms >= 0) {
    std::printf("%-52s %9.1f ms\n", "herd master exec -> first answer, all tasks known", process_ms);
  }
  std::printf("RESULT tasks=%d\n", tasks);
  std::printf("RESULT log_mutations=%lld\n", static_cast<long long>(n));
  std::printf("RESULT baseline_read_log_ms=%.1f\n", read_ms);
  std::printf("RESULT recover_log_replay_ms=%.1f\n", replay_ms);
  std::printf("RESULT recover_snapshot_ms=%.1f\n", snap_ms);
  if (process_ms >= 0) std::printf("RESULT master_restart_to_first_answer_ms=%.1f\n", process_ms);
  return 0;
}
