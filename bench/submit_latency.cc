// Submit -> running latency on a real local cell (herd up): the time from
// sending Submit for a one-task job until the master has recorded the task's
// processes as running (its TaskObserved ACTIVE mutation arrives on Watch);
// then API calls per second (GetCell and GetJob from 4 client threads for 3
// s). Baseline, measured in the same run: a bare fork+exec+wait of
// /bin/true.
//
// The cost of TLS and authorization: --plain-herd PATH names a herd binary
// built before the cell had them (e.g. commit aeaf9f6); both cells are
// measured in the same run, alternating, the old one over plaintext gRPC.
//
//   submit_latency [--runs 20] [--agents 1] [--herd PATH] [--plain-herd PATH] [--rounds 3]
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
#include <atomic>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
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

struct Figures {
  std::vector<double> latency_ms;
  double calls_per_s = 0;
};

// One cell from `herd`: up, `runs` submit -> running measurements, a burst
// of reads, down. `secure`: the cell has a CA and the bench is its admin.
absl::StatusOr<Figures> Measure(const std::string& herd, bool secure, int runs, int agents, int round) {
  std::string dir = absl::StrCat("/tmp/herd-bench-latency-", getpid(), "-", secure ? "tls" : "plain", round);
  std::string listen = "127.0.0.1:17170";
  if (Run(absl::StrCat(herd, " up --detach --data ", dir, " --listen ", listen, " --agents ", agents,
                       " > /dev/null")) != 0) {
    return absl::UnavailableError(absl::StrCat("cannot start a cell with ", herd));
  }
  std::shared_ptr<grpc::Channel> channel;
  if (secure) {
    auto admin = herd::pki::LoadCredential(dir + "/credentials.pem");
    if (!admin.ok()) return admin.status();
    channel = herd::rpc::Channel(listen, *admin, herd::rpc::MasterIdentity());
  } else {
    channel = grpc::CreateChannel(listen, grpc::InsecureChannelCredentials());
  }
  auto stub = herd::v1::Herd::NewStub(channel);
  Figures f;
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
      auto ctx = herd::rpc::Context("", 5000);
      stub->GetCell(ctx.get(), herd::v1::GetCellRequest(), &info);
    }
    auto wctx = herd::rpc::Context("", 30'000);
    herd::v1::WatchRequest wr;
    wr.set_from_revision(info.revision() + 1);
    auto watch = stub->Watch(wctx.get(), wr);
    auto t0 = Clock::now();
    herd::v1::SubmitResponse resp;
    auto sctx = herd::rpc::Context("", 10'000);
    grpc::Status st = stub->Submit(sctx.get(), req, &resp);
    if (!st.ok()) return absl::InternalError(absl::StrCat("submit failed: ", st.error_message()));
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
    if (!seen) return absl::InternalError(absl::StrCat("task of ", name, " never ran"));
    f.latency_ms.push_back(ms);
    herd::v1::KillRequest k;
    k.set_job("bench/" + name);
    herd::v1::KillResponse kr;
    auto kctx = herd::rpc::Context("", 10'000);
    stub->Kill(kctx.get(), k, &kr);
  }
  // Reads from 4 threads, each with its own channel (own connection and TLS
  // session), for a fixed 3 s.
  std::atomic<int64_t> calls{0}, failures{0};
  const auto until = Clock::now() + std::chrono::seconds(3);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::shared_ptr<grpc::Channel> ch = channel;
      if (secure) {
        auto admin = herd::pki::LoadCredential(dir + "/credentials.pem");
        if (admin.ok()) ch = herd::rpc::Channel(listen, *admin, herd::rpc::MasterIdentity());
      } else {
        grpc::ChannelArguments args;
        args.SetInt("herd.bench.thread", t);  // a channel of its own
        ch = grpc::CreateCustomChannel(listen, grpc::InsecureChannelCredentials(), args);
      }
      auto st = herd::v1::Herd::NewStub(ch);
      for (int i = 0; Clock::now() < until; ++i) {
        auto ctx = herd::rpc::Context("", 5000);
        grpc::Status s;
        if (i % 2 == 0) {
          herd::v1::CellInfo info;
          s = st->GetCell(ctx.get(), herd::v1::GetCellRequest(), &info);
        } else {
          herd::v1::GetJobRequest r;
          r.set_job("bench/lat0");
          herd::v1::GetJobResponse out;
          s = st->GetJob(ctx.get(), r, &out);
        }
        (s.ok() ? calls : failures).fetch_add(1);
      }
    });
  }
  auto t0 = Clock::now();
  for (auto& th : threads) th.join();
  f.calls_per_s = calls.load() / std::chrono::duration<double>(Clock::now() - t0).count();
  Run(absl::StrCat(herd, " down --data ", dir, " > /dev/null"));
  std::filesystem::remove_all(dir);
  if (failures.load() > 0) return absl::InternalError(absl::StrCat(failures.load(), " API calls failed"));
  return f;
}

}  // namespace

int main(int argc, char** argv) {
  int runs = 20, agents = 1, rounds = 3;
  std::string herd = "build/bin/herd", plain_herd;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--runs") runs = std::atoi(argv[i + 1]);
    if (a == "--agents") agents = std::atoi(argv[i + 1]);
    if (a == "--herd") herd = argv[i + 1];
    if (a == "--plain-herd") plain_herd = argv[i + 1];
    if (a == "--rounds") rounds = std::atoi(argv[i + 1]);
  }
  if (plain_herd.empty()) rounds = 1;
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
  // Alternate the two cells so that drift in the machine's load hits both.
  std::vector<double> lat, plain_lat, rate, plain_rate;
  for (int r = 0; r < rounds; ++r) {
    for (bool secure : {true, false}) {
      if (!secure && plain_herd.empty()) continue;
      absl::StatusOr<Figures> f = Measure(secure ? herd : plain_herd, secure, runs, agents, r);
      if (!f.ok()) {
        std::fprintf(stderr, "%s\n", std::string(f.status().message()).c_str());
        return 1;
      }
      auto& l = secure ? lat : plain_lat;
      l.insert(l.end(), f->latency_ms.begin(), f->latency_ms.end());
      (secure ? rate : plain_rate).push_back(f->calls_per_s);
    }
  }

  double p50 = Percentile(lat, 0.5), mx = *std::max_element(lat.begin(), lat.end());
  double b50 = Percentile(base, 0.5);
  std::printf("submit -> running on herd up (%d agent%s), %d runs x %d rounds\n", agents, agents == 1 ? "" : "s",
              runs, rounds);
  std::printf("  %-40s p50 %8.2f ms   p90 %8.2f ms   max %8.2f ms\n", "submit -> task running (TLS, authz)", p50,
              Percentile(lat, 0.9), mx);
  if (!plain_lat.empty()) {
    std::printf("  %-40s p50 %8.2f ms   p90 %8.2f ms   max %8.2f ms\n", "submit -> task running (plaintext, none)",
                Percentile(plain_lat, 0.5), Percentile(plain_lat, 0.9),
                *std::max_element(plain_lat.begin(), plain_lat.end()));
  }
  std::printf("  %-40s p50 %8.2f ms   max %8.2f ms\n", "baseline: fork+exec+wait /bin/true", b50,
              *std::max_element(base.begin(), base.end()));
  std::printf("  API calls/s, 4 threads (TLS, authz):       median %.0f\n", Percentile(rate, 0.5));
  if (!plain_rate.empty()) std::printf("  API calls/s, 4 threads (plaintext, none):  median %.0f\n", Percentile(plain_rate, 0.5));
  std::printf("RESULT submit_to_running_p50_ms=%.2f\n", p50);
  std::printf("RESULT submit_to_running_max_ms=%.2f\n", mx);
  std::printf("RESULT submit_to_running_p90_ms=%.2f\n", Percentile(lat, 0.9));
  std::printf("RESULT baseline_fork_exec_p50_ms=%.3f\n", b50);
  std::printf("RESULT submit_to_running_over_baseline=%.1f\n", p50 / b50);
  std::printf("RESULT api_calls_per_s=%.0f\n", Percentile(rate, 0.5));
  if (!plain_lat.empty()) {
    std::printf("RESULT plain_submit_to_running_p50_ms=%.2f\n", Percentile(plain_lat, 0.5));
    std::printf("RESULT plain_submit_to_running_p90_ms=%.2f\n", Percentile(plain_lat, 0.9));
    std::printf("RESULT plain_api_calls_per_s=%.0f\n", Percentile(plain_rate, 0.5));
    std::printf("RESULT tls_authz_latency_cost_p50_ms=%.2f\n", p50 - Percentile(plain_lat, 0.5));
    std::printf("RESULT tls_authz_api_rate_ratio=%.2f\n", Percentile(rate, 0.5) / Percentile(plain_rate, 0.5));
  }
  return 0;
}
