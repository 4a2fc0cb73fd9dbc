#include "bench/colocation/colocation_bench.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "agent/cgroup/cgroup_extension.h"
#include "agent/cgroup/driver.h"
#include "base/signals.h"

namespace herd::bench {
namespace {

namespace fs = std::filesystem;

// The herd binary to run cells with: the one beside this herd-bench.
std::string SelfExe() {
  std::error_code ec;
  const std::filesystem::path p = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? "herd" : (p.parent_path() / "herd").string();
}

// Runs argv (env added), waits; its stdout in *out, stderr to `log` (appended).
int Run(const std::vector<std::string>& argv, const std::vector<std::string>& env, std::string* out,
        const std::string& log) {
  int pipefd[2];
  if (pipe2(pipefd, O_CLOEXEC) != 0) return -1;
  pid_t pid = fork();
  if (pid == 0) {
    dup2(pipefd[1], 1);
    int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd >= 0) dup2(fd, 2);
    int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (null >= 0) dup2(null, 0);
    for (const std::string& e : env) putenv(const_cast<char*>(e.c_str()));
    std::vector<char*> a;
    for (const std::string& s : argv) a.push_back(const_cast<char*>(s.c_str()));
    a.push_back(nullptr);
    execvp(a[0], a.data());
    _exit(127);
  }
  close(pipefd[1]);
  std::string text;
  char buf[4096];
  ssize_t n;
  while ((n = read(pipefd[0], buf, sizeof buf)) > 0) text.append(buf, static_cast<size_t>(n));
  close(pipefd[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (out) *out = std::move(text);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// A port free on loopback now (bound, read, closed).
int FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  int port = -1;
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
    port = ntohs(a.sin_port);
  }
  close(fd);
  return port;
}

double SteadySeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Busy and total CPU seconds of the whole machine (/proc/stat).
struct CpuTimes {
  double busy = 0, total = 0;
};
CpuTimes ReadCpuTimes() {
  CpuTimes t;
  std::ifstream in("/proc/stat");
  std::string line;
  std::getline(in, line);
  std::vector<std::string> f = absl::StrSplit(line, ' ', absl::SkipEmpty());
  static const double hz = static_cast<double>(sysconf(_SC_CLK_TCK));
  for (size_t i = 1; i < f.size() && i <= 8; ++i) {
    double v = 0;
    if (!absl::SimpleAtod(f[i], &v)) continue;
    t.total += v / hz;
    if (i != 4 && i != 5) t.busy += v / hz;  // not idle, not iowait
  }
  return t;
}

struct WrkResult {
  bool ok = false;
  double p50_ms = 0, p99_ms = 0;
  int64_t requests = 0, errors = 0;
  double seconds = 0;
  double idle_cpu = 0;      // idle CPU seconds of the machine during the run
  double batch_cpu = 0;     // CPU seconds batch/ used during the run
  std::string error;
};

class Bench {
 public:
  explicit Bench(const ColocationBenchOptions& o) : o_(o), herd_(o.herd.empty() ? SelfExe() : o.herd) {}

  int Main() {
    for (const std::string& tool : {o_.wrk, o_.stress}) {
      std::string out;
      if (Run({"sh", "-c", absl::StrCat("command -v ", tool)}, {}, &out, "/dev/null") != 0) {
        std::fprintf(stderr, "herd bench colocation: '%s' not found (scripts/setup.sh installs wrk and stress-ng)\n",
                     tool.c_str());
        return 2;
      }
    }
    root_ = o_.data_dir;
    if (root_.empty()) {
      char tmpl[] = "/tmp/herd-colocation-XXXXXX";
      if (mkdtemp(tmpl) == nullptr) return 1;
      root_ = tmpl;
    }
    fs::create_directories(root_);
    chmod(root_.c_str(), 0755);
    WriteFiles();
    std::printf("herd bench colocation: LS server (%lld us of CPU per request, cpu %s) at %.0f req/s over %d "
                "connections; batch: %d x stress-ng --cpu %d (cpu %s each); %d s per run after %d s warm-up\n",
                static_cast<long long>(o_.work_us), o_.ls_cpu.c_str(), o_.rate, o_.connections, o_.batch_tasks,
                o_.batch_workers, o_.batch_cpu.c_str(), o_.duration_s, o_.warmup_s);
    std::fflush(stdout);

    WrkResult alone, colocated, uncontrolled;
    int rc = Cell("on", /*control=*/true, &alone, &colocated);
    if (rc == 0) rc = Cell("off", /*control=*/false, nullptr, &uncontrolled);
    if (rc != 0) {
      std::fprintf(stderr, "herd bench colocation: failed; logs in %s\n", root_.c_str());
      return rc;
    }
    // What LS (and everything else) left idle when alone; and, in the run
    // itself, what was left to batch (idle + what batch took).
    const double idle_rate = alone.idle_cpu / alone.seconds;
    const double share = idle_rate > 0 ? colocated.batch_cpu / colocated.seconds / idle_rate : 0;
    const double share_off = idle_rate > 0 ? uncontrolled.batch_cpu / uncontrolled.seconds / idle_rate : 0;
    auto in_run = [](const WrkResult& r) {
      return r.batch_cpu + r.idle_cpu > 0 ? r.batch_cpu / (r.batch_cpu + r.idle_cpu) : 0;
    };
    std::printf("\n%-38s %10s %10s %10s %12s %12s\n", "run", "p50 ms", "p99 ms", "requests", "batch cpu/s",
                "idle cpu/s");
    auto row = [](const char* name, const WrkResult& r) {
      std::printf("%-38s %10.3f %10.3f %10lld %12.3f %12.3f\n", name, r.p50_ms, r.p99_ms,
                  static_cast<long long>(r.requests), r.batch_cpu / r.seconds, r.idle_cpu / r.seconds);
    };
    row("alone (control on; before and after)", alone);
    row("with batch, control off", uncontrolled);
    row("with batch, control on", colocated);
    std::printf("\np99 colocated / alone = %.2f (goal <= 1.2); batch got %.0f%% of the CPU LS left idle (goal >= "
                "50%%); uncontrolled: p99 x%.2f, batch %.0f%%\n",
                colocated.p99_ms / alone.p99_ms, 100 * share, uncontrolled.p99_ms / alone.p99_ms, 100 * share_off);
    std::printf("RESULT ls_p99_alone_ms=%.3f\n", alone.p99_ms);
    std::printf("RESULT ls_p99_colocated_ms=%.3f\n", colocated.p99_ms);
    std::printf("RESULT ls_p99_uncontrolled_ms=%.3f\n", uncontrolled.p99_ms);
    std::printf("RESULT batch_cpu_share=%.3f\n", share);
    std::printf("RESULT batch_cpu_share_uncontrolled=%.3f\n", share_off);
    std::printf("RESULT batch_share_of_leftover=%.3f\n", in_run(colocated));
    std::printf("RESULT batch_share_of_leftover_uncontrolled=%.3f\n", in_run(uncontrolled));
    std::printf("RESULT idle_cores_alone=%.3f\n", idle_rate);
    std::printf("RESULT ls_p50_alone_ms=%.3f\n", alone.p50_ms);
    std::printf("RESULT ls_p50_colocated_ms=%.3f\n", colocated.p50_ms);
    std::printf("RESULT ls_p50_uncontrolled_ms=%.3f\n", uncontrolled.p50_ms);
    std::printf("RESULT ls_p99_ratio=%.3f\n", colocated.p99_ms / alone.p99_ms);
    if (!o_.keep && o_.data_dir.empty()) {
      std::error_code ec;
      fs::remove_all(root_, ec);
    }
    return 0;
  }

 private:
  void WriteFiles() {
    std::ofstream(root_ + "/ls.yaml")
        << "name: ls\nuser: bench\npriority: production\nappclass: ls\ntasks: 1\n"
        << "command: [\"" << herd_ << "\", bench, ls-server, --port, \"${port.http}\", --work-us, \""
        << o_.work_us << "\"]\n"
        << "resources: {cpu: " << o_.ls_cpu << ", memory: 256Mi, ports: [http]}\n"
        << "restart: {policy: always}\n";
    std::ofstream(root_ + "/batch.yaml")
        << "name: hogs\nuser: bench\npriority: batch\nappclass: batch\ntasks: " << o_.batch_tasks << "\n"
        << "command: [\"" << o_.stress << "\", --cpu, \"" << o_.batch_workers
        << "\", --timeout, 3600s, --quiet]\n"
        << "resources: {cpu: " << o_.batch_cpu << ", memory: 128Mi}\n"
        << "restart: {policy: always}\n";
    // A fixed pace per connection: the rate stays what it is asked to be
    // whatever the server's latency (up to the interval itself).
    const double interval_ms = 1000.0 * o_.connections / o_.rate;
    std::ofstream(root_ + "/pace.lua")
        << "local interval = " << interval_ms << "\n"
        << "function delay() return interval end\n"
        << "done = function(summary, latency, requests)\n"
        << "  local e = summary.errors\n"
        << "  io.write(string.format(\"HERD p50_us=%d p99_us=%d requests=%d errors=%d\\n\", "
           "latency:percentile(50), latency:percentile(99), summary.requests, "
           "e.connect + e.read + e.write + e.status + e.timeout))\n"
        << "end\n";
  }

  std::vector<std::string> Env(const std::string& data) const {
    return {absl::StrCat("HERD_MASTER=", master_), absl::StrCat("HERD_CREDENTIALS=", data, "/credentials.pem")};
  }

  // One cell: control on or off. With `alone`, LS is measured before the
  // batch job comes; `with_batch` after.
  int Cell(const std::string& name, bool control, WrkResult* alone, WrkResult* with_batch) {
    const std::string data = absl::StrCat(root_, "/cell-", name);
    const std::string log = absl::StrCat(root_, "/bench-", name, ".log");
    // A free port for the master.
    const int port = FreePort();
    if (port <= 0) return 1;
    master_ = absl::StrCat("127.0.0.1:", port);
    std::printf("cell %s (colocation control %s): starting\n", name.c_str(), control ? "on" : "off");
    std::fflush(stdout);
    std::string out;
    int rc = Run({herd_, "up", "--detach", "--data", data, "--listen", master_, "--agents", "1", "--dns", "",
                  absl::StrCat("--agent-arg=--colocation=", control ? "true" : "false")},
                 {}, &out, log);
    if (rc != 0) {
      std::fprintf(stderr, "herd up failed (%d): %s\n", rc, out.c_str());
      return 1;
    }
    rc = Measure(name, data, log, control, alone, with_batch);
    std::string ignored;
    Run({herd_, "down", "--data", data}, {}, &ignored, log);
    return rc;
  }

  int Measure(const std::string& name, const std::string& data, const std::string& log, bool control,
              WrkResult* alone, WrkResult* with_batch) {
    std::string out;
    if (Run({herd_, "submit", root_ + "/ls.yaml"}, Env(data), &out, log) != 0) {
      std::fprintf(stderr, "submitting the LS server failed: %s\n", out.c_str());
      return 1;
    }
    int ls_port = WaitServer(data, log);
    if (ls_port <= 0) {
      std::fprintf(stderr, "the LS server did not come up (see %s)\n", log.c_str());
      return 1;
    }
    batch_group_ = agent::CgroupExtension::AgentGroupOf(BatchOptions(data)) + "/batch";
    const std::string url = absl::StrCat("http://127.0.0.1:", ls_port, "/");
    if (alone) {
      Wrk(url, o_.warmup_s, log);
      *alone = Wrk(url, o_.duration_s, log);
      if (!alone->ok) return Fail("alone", *alone);
      Print(absl::StrCat(name, ": alone"), *alone);
    }
    if (Run({herd_, "submit", root_ + "/batch.yaml"}, Env(data), &out, log) != 0) {
      std::fprintf(stderr, "submitting the batch hogs failed: %s\n", out.c_str());
      return 1;
    }
    if (!WaitBatch(data, log)) {
      std::fprintf(stderr, "the batch hogs did not start (see %s)\n", log.c_str());
      return 1;
    }
    Wrk(url, o_.warmup_s, log);  // and the box settles
    *with_batch = Wrk(url, o_.duration_s, log);
    if (!with_batch->ok) return Fail("with batch", *with_batch);
    Print(absl::StrCat(name, ": with batch"), *with_batch);
    if (alone) {
      // Alone again, after batch: the baseline is measured on both sides of
      // the colocated run, so a drift of the machine is not counted as
      // interference.
      if (Run({herd_, "kill", "bench/hogs"}, Env(data), &out, log) != 0 || !WaitBatch(data, log, 0)) {
        std::fprintf(stderr, "killing the batch hogs failed (see %s)\n", log.c_str());
        return 1;
      }
      Wrk(url, o_.warmup_s, log);
      WrkResult again = Wrk(url, o_.duration_s, log);
      if (!again.ok) return Fail("alone, after", again);
      Print(absl::StrCat(name, ": alone again"), again);
      *alone = Merge(*alone, again);
    }
    (void)control;
    return 0;
  }

  // Two runs as one: the mean of their percentiles, the sums of the rest.
  static WrkResult Merge(const WrkResult& a, const WrkResult& b) {
    WrkResult m = a;
    m.p50_ms = (a.p50_ms + b.p50_ms) / 2;
    m.p99_ms = (a.p99_ms + b.p99_ms) / 2;
    m.requests += b.requests;
    m.errors += b.errors;
    m.seconds += b.seconds;
    m.idle_cpu += b.idle_cpu;
    m.batch_cpu += b.batch_cpu;
    return m;
  }

  static int Fail(const char* what, const WrkResult& r) {
    std::fprintf(stderr, "wrk (%s) failed: %s\n", what, r.error.c_str());
    return 1;
  }

  static void Print(const std::string& what, const WrkResult& r) {
    std::printf("  %-22s p50 %.3f ms, p99 %.3f ms, %lld requests (%lld errors), batch %.2f cores, idle %.2f cores\n",
                what.c_str(), r.p50_ms, r.p99_ms, static_cast<long long>(r.requests),
                static_cast<long long>(r.errors), r.batch_cpu / r.seconds, r.idle_cpu / r.seconds);
    std::fflush(stdout);
  }

  agent::CgroupOptions BatchOptions(const std::string& data) const {
    agent::CgroupOptions c;
    c.agent_name = "m0";
    c.owner_dir = data + "/agents/m0";  // as herd up names its agents' roots
    return c;
  }

  double BatchCpuSeconds() const {
    static absl::StatusOr<std::unique_ptr<agent::CgroupDriver>> driver = agent::OpenCgroupDriver("/sys/fs/cgroup");
    if (!driver.ok()) return 0;
    absl::StatusOr<agent::CgroupSample> s = (*driver)->Sample(batch_group_);
    return s.ok() ? static_cast<double>(s->cpu_usage_ns) / 1e9 : 0;
  }

  // Until the LS task's http port answers; its port, or -1.
  int WaitServer(const std::string& data, const std::string& log) {
    for (int i = 0; i < 600; ++i) {  // 60 s
      std::string out;
      if (Run({herd_, "resolve", "bench/ls", "--json"}, Env(data), &out, log) == 0) {
        nlohmann::json j = nlohmann::json::parse(out, nullptr, false);
        int port = FindPort(j);
        if (port > 0) {
          httplib::Client c("127.0.0.1", port);
          c.set_connection_timeout(1);
          if (auto res = c.Get("/"); res && res->status == 200) return port;
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));  // polling a real cell, bounded above
    }
    return -1;
  }

  static int FindPort(const nlohmann::json& j) {
    if (j.is_object()) {
      if (auto it = j.find("ports"); it != j.end() && it->is_object()) {
        if (auto h = it->find("http"); h != it->end() && h->is_number_integer()) return h->get<int>();
      }
      for (const auto& [k, v] : j.items()) {
        if (int p = FindPort(v); p > 0) return p;
      }
    } else if (j.is_array()) {
      for (const auto& v : j) {
        if (int p = FindPort(v); p > 0) return p;
      }
    }
    return -1;
  }

  // Until `want` batch tasks run (every one by default).
  bool WaitBatch(const std::string& data, const std::string& log, int want = -1) {
    if (want < 0) want = o_.batch_tasks;
    for (int i = 0; i < 600; ++i) {
      std::string out;
      if (Run({herd_, "status", "bench/hogs", "--json"}, Env(data), &out, log) == 0) {
        nlohmann::json j = nlohmann::json::parse(out, nullptr, false);
        int running = 0;
        if (j.is_object() && j.contains("tasks") && j["tasks"].is_array()) {
          for (const auto& t : j["tasks"]) {
            if (t.value("state", "") == "RUNNING") ++running;
          }
        }
        if (running == want) return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
  }

  WrkResult Wrk(const std::string& url, int seconds, const std::string& log) {
    WrkResult r;
    const CpuTimes c0 = ReadCpuTimes();
    const double b0 = BatchCpuSeconds();
    const double t0 = SteadySeconds();
    std::string out;
    // The client stands for one on another machine: as root it runs at
    // nice -10, so batch on this machine delays the server, not the client.
    std::vector<std::string> argv = {o_.wrk, "-t", "1", "-c", absl::StrCat(o_.connections), "-d",
                                     absl::StrCat(seconds, "s"), "--timeout", "5s", "-s", root_ + "/pace.lua", url};
    if (geteuid() == 0) argv.insert(argv.begin(), {"nice", "-n", "-10"});
    int rc = Run(argv, {}, &out, log);
    const double t1 = SteadySeconds();
    const CpuTimes c1 = ReadCpuTimes();
    r.batch_cpu = BatchCpuSeconds() - b0;
    r.seconds = t1 - t0;
    r.idle_cpu = (c1.total - c0.total) - (c1.busy - c0.busy);
    if (rc != 0) {
      r.error = absl::StrCat("exit ", rc, ": ", out);
      return r;
    }
    for (absl::string_view line : absl::StrSplit(out, '\n')) {
      if (!absl::ConsumePrefix(&line, "HERD ")) continue;
      for (absl::string_view kv : absl::StrSplit(line, ' ', absl::SkipEmpty())) {
        std::pair<absl::string_view, absl::string_view> p = absl::StrSplit(kv, absl::MaxSplits('=', 1));
        int64_t v = 0;
        if (!absl::SimpleAtoi(p.second, &v)) continue;
        if (p.first == "p50_us") r.p50_ms = static_cast<double>(v) / 1000;
        if (p.first == "p99_us") r.p99_ms = static_cast<double>(v) / 1000;
        if (p.first == "requests") r.requests = v;
        if (p.first == "errors") r.errors = v;
      }
      r.ok = r.requests > 0;
    }
    if (!r.ok) r.error = absl::StrCat("no figures from wrk: ", out);
    return r;
  }

  const ColocationBenchOptions o_;
  const std::string herd_;
  std::string root_;
  std::string master_;
  std::string batch_group_;
};

// CPU time of the calling thread, in microseconds.
int64_t ThreadCpuUs() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000 + ts.tv_nsec / 1000;
}

}  // namespace

int RunColocationBench(const ColocationBenchOptions& options) { return Bench(options).Main(); }

int RunLsServer(int port, int64_t work_us, int threads) {
  httplib::Server server;
  server.set_tcp_nodelay(true);  // else the header and body segments wait for delayed ACKs (40 ms)
  server.new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<size_t>(std::max(1, threads))); };
  server.Get("/", [work_us](const httplib::Request&, httplib::Response& res) {
    // Burn work_us of this thread's CPU: a request that waits for a CPU
    // takes longer in wall time, as a real service's would.
    const int64_t until = ThreadCpuUs() + work_us;
    volatile uint64_t x = 0;
    while (ThreadCpuUs() < until) {
      for (int i = 0; i < 1000; ++i) x = x * 6364136223846793005ull + 1442695040888963407ull;
    }
    res.set_content("ok\n", "text/plain");
  });
  if (!server.bind_to_port("127.0.0.1", port)) {
    std::fprintf(stderr, "ls-server: cannot listen on 127.0.0.1:%d\n", port);
    return 1;
  }
  std::thread stopper([&server] {
    WaitForStopSignal();
    server.stop();
  });
  std::printf("ls-server: listening on 127.0.0.1:%d, %lld us of CPU per request, %d threads\n", port,
              static_cast<long long>(work_us), threads);
  std::fflush(stdout);
  server.listen_after_bind();
  stopper.join();
  return 0;
}

}  // namespace herd::bench
