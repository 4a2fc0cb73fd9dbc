// Submit -> running latency on a real local cell (herd up): the time from
// sending Submit for a one-task job until the master has recorded the task's
// processes as running (its TaskObserved ACTIVE mutation arrives on Watch).
// Baseline, measured in the same run: a bare fork+exec+wait of /bin/true.
//
//   submit_latency [--runs 20] [--agents 1] [--herd PATH]
// Prints a table and RESULT lines.
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "herd/v1/api.grpc.pb.h"
#include "rpc/rpc.h"

namespace {

using Clock = std::chrono::steady_clock;
double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

double Percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(p * (v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

int Run(const std::string& cmd) { return std::system(cmd.c_str()); }

}  // namespace

int main(int argc, char** argv) {
  int runs = 20, agents = 1;
  std::string herd = "build/bin/herd";
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--runs") runs = std::atoi(argv[i + 1]);
    if (a == "--agents") agents = std::atoi(argv[i + 1]);
    if (a == "--herd") herd = argv[i + 1];
  }
  extern char** environ;
  // Baseline: fork+exec+wait of /bin/true.
  std::vector<double> base;
  for (int i = 0; i < runs; ++i) {
    auto t0 = Clock::now();
    pid_t pid;
    char* args[] = {const_cast<char*>("/bin/true"), nullptr};
    posix_spawn(&pid, "/bin/true", nullptr, nullptr, args, environ);
    waitpid(pid, nullptr, 0);
    base.push_back(Ms(Clock::now() - t0));
  }

  std::string dir = absl::StrCat("/tmp/herd-bench-latency-", getpid());
  std::string listen = "127.0.0.1:17170";
  if (Run(absl::StrCat(herd, " up --detach --data ", dir, " --listen ", listen, " --agents ", agents,
                       " > /dev/null")) != 0) {
    std::fprintf(stderr, "cannot start a cell with %s\n", herd.c_str());
    return 1;
  }
  auto admin = herd::pki::LoadCredential(dir + "/credentials.pem");
  if (!admin.ok()) {
    std::fprintf(stderr, "%s\n", std::string(admin.status().message()).c_str());
    return 1;
  }
  auto stub = herd::v1::Herd::NewStub(herd::rpc::Channel(listen, *admin, herd::rpc::MasterIdentity()));
  std::vector<double> lat;
  for (int i = 0; i < runs; ++i) {
    std::string name = absl::StrCat("lat", i);
    herd::v1::SubmitRequest req;
    herd::v1::JobSpec* s = req.add_jobs();
    s->set_name(name);
    s->set_user("bench");
    s->set_priority(200);
    s->set_task_count(1);
    s->mutable_task()->add_command("/bin/sleep");
    s->mutable_task()->add_command("600");
    s->mutable_task()->mutable_resources()->set_cpu_millis(10);
    s->mutable_task()->mutable_resources()->set_memory_bytes(16 << 20);
    s->set_grace_period_ms(100);
    // Watch from the current revision before submitting.
    herd::v1::CellInfo info;
    {
      auto ctx = herd::rpc::Context("bench", 5000);
      stub->GetCell(ctx.get(), herd::v1::GetCellRequest(), &info);
    }
    auto wctx = herd::rpc::Context("bench", 30'000);
    herd::v1::WatchRequest wr;
    wr.set_from_revision(info.revision() + 1);
    auto watch = stub->Watch(wctx.get(), wr);
    auto t0 = Clock::now();
    herd::v1::SubmitResponse resp;
    auto sctx = herd::rpc::Context("bench", 10'000);
    grpc::Status st = stub->Submit(sctx.get(), req, &resp);
    if (!st.ok()) {
      std::fprintf(stderr, "submit failed: %s\n", st.error_message().c_str());
      return 1;
    }
    herd::v1::WatchResponse w;
    bool seen = false;
    while (!seen && watch->Read(&w)) {
      for (const auto& m : w.mutations()) {
        if (m.has_task_observed() && m.task_observed().task().job() == "bench/" + name &&
            m.task_observed().phase() == herd::v1::Task::ACTIVE) {
          seen = true;
        }
      }
    }
    double ms = Ms(Clock::now() - t0);
    wctx->TryCancel();
    watch->Finish();
    if (!seen) {
      std::fprintf(stderr, "task of %s never ran\n", name.c_str());
      return 1;
    }
    lat.push_back(ms);
    herd::v1::KillRequest k;
    k.set_job("bench/" + name);
    herd::v1::KillResponse kr;
    auto kctx = herd::rpc::Context("bench", 10'000);
    stub->Kill(kctx.get(), k, &kr);
  }
  Run(absl::StrCat(herd, " down --data ", dir, " > /dev/null"));
  std::filesystem::remove_all(dir);

  double p50 = Percentile(lat, 0.5), mx = *std::max_element(lat.begin(), lat.end());
  double b50 = Percentile(base, 0.5);
  std::printf("submit -> running on herd up (%d agent%s), %d runs\n", agents, agents == 1 ? "" : "s", runs);
  std::printf("  %-34s p50 %8.2f ms   max %8.2f ms\n", "submit -> task running", p50, mx);
  std::printf("  %-34s p50 %8.2f ms   max %8.2f ms\n", "baseline: fork+exec+wait /bin/true", b50,
              *std::max_element(base.begin(), base.end()));
  std::printf("  ratio p50 / baseline p50: %.1fx\n", p50 / b50);
  std::printf("RESULT submit_to_running_p50_ms=%.2f\n", p50);
  std::printf("RESULT submit_to_running_max_ms=%.2f\n", mx);
  std::printf("RESULT submit_to_running_p90_ms=%.2f\n", Percentile(lat, 0.9));
  std::printf("RESULT baseline_fork_exec_p50_ms=%.3f\n", b50);
  std::printf("RESULT submit_to_running_over_baseline=%.1f\n", p50 / b50);
  return 0;
}
