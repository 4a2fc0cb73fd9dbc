#include "base/signals.h"
#include "main/up.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "agent/server/agent_server.h"
#include "base/units.h"
#include "herd/v1/api.grpc.pb.h"
#include "rpc/rpc.h"

namespace herd {
namespace fs = std::filesystem;

namespace {

std::string SelfExe() {
  std::error_code ec;
  auto p = fs::read_symlink("/proc/self/exe", ec);
  return ec ? "herd" : p.string();
}

struct Child {
  std::string name;
  pid_t pid = -1;
};

pid_t Spawn(const std::vector<std::string>& args, const std::string& log) {
  pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);  // our own group: a terminal's Ctrl-C reaches only herd up
    int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
    }
    int null = open("/dev/null", O_RDONLY);
    if (null >= 0) dup2(null, 0);
    std::vector<char*> argv;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  return pid;
}

// Waits until the master answers and `agents` machines are UP.
bool WaitReady(const std::string& master, int agents, int64_t timeout_ms, std::string* why) {
  auto stub = v1::Herd::NewStub(rpc::Channel(master));
  auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (std::chrono::steady_clock::now() < end) {
    v1::CellInfo info;
    auto ctx = rpc::Context("", 1000);
    grpc::Status st = stub->GetCell(ctx.get(), v1::GetCellRequest(), &info);
    if (st.ok() && info.machines_up() >= agents) return true;
    *why = st.ok() ? absl::StrCat(info.machines_up(), " of ", agents, " agents registered")
                   : absl::StrCat("master not answering: ", st.error_message());
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

void StopAll(std::vector<Child>& children) {
  // Agents first (they stop their tasks), then the master.
  for (int round = 0; round < 2; ++round) {
    for (const Child& c : children) {
      bool is_master = c.name == "master";
      if ((round == 0) != is_master && c.pid > 0) kill(c.pid, SIGTERM);
    }
    for (Child& c : children) {
      bool is_master = c.name == "master";
      if ((round == 0) == is_master || c.pid <= 0) continue;
      for (int i = 0; i < 700; ++i) {
        if (waitpid(c.pid, nullptr, WNOHANG) == c.pid) {
          c.pid = -1;
          break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
      if (c.pid > 0) {
        kill(c.pid, SIGKILL);
        waitpid(c.pid, nullptr, 0);
        c.pid = -1;
      }
    }
  }
}

}  // namespace

std::string DefaultUpDir() {
  if (const char* h = std::getenv("HERD_HOME"); h && *h) return h;
  const char* home = std::getenv("HOME");
  return absl::StrCat(home && *home ? home : "/tmp", "/.herd/up");
}

int RunUp(const UpOptions& o) {
  if (o.agents < 1 || o.agents > 64) {
    std::fprintf(stderr, "herd up: --agents must be between 1 and 64\n");
    return 2;
  }
  if (absl::Status st = rpc::ValidateAddress(o.listen); !st.ok()) {
    std::fprintf(stderr, "herd up: --listen: %s\n", std::string(st.message()).c_str());
    return 2;
  }
  std::string data = o.data_dir.empty() ? DefaultUpDir() : o.data_dir;
  std::error_code ec;
  fs::create_directories(fs::path(data) / "logs", ec);
  if (ec) {
    std::fprintf(stderr, "herd up: cannot create %s: %s\n", data.c_str(), ec.message().c_str());
    return 1;
  }
  std::string pidfile = (fs::path(data) / "up.pid").string();
  {
    std::ifstream in(pidfile);
    pid_t old = 0;
    if (in >> old && old > 0 && kill(old, 0) == 0) {
      std::fprintf(stderr, "herd up: a cell is already running from %s (pid %d); stop it with 'herd down --data %s'\n",
                   data.c_str(), old, data.c_str());
      return 1;
    }
  }

  // Detach: the child runs the cell; the parent reports once it is ready.
  int ready_pipe[2] = {-1, -1};
  if (o.detach) {
    if (pipe(ready_pipe) != 0) return 1;
    pid_t pid = fork();
    if (pid > 0) {
      close(ready_pipe[1]);
      char buf[4096];
      ssize_t n = read(ready_pipe[0], buf, sizeof(buf) - 1);
      buf[n > 0 ? n : 0] = 0;
      if (n <= 0) {
        std::fprintf(stderr, "herd up: the cell failed to start (see %s/up.log)\n", data.c_str());
        return 1;
      }
      bool failed = buf[0] == '!';
      std::fputs(buf + (failed ? 1 : 0), failed ? stderr : stdout);
      return failed ? 1 : 0;
    }
    close(ready_pipe[0]);
    setsid();
    int fd = open((fs::path(data) / "up.log").c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
    }
    int null = open("/dev/null", O_RDONLY);
    if (null >= 0) dup2(null, 0);
  }
  // Tells the user (or, detached, the waiting parent) how start-up went.
  auto report = [&](const std::string& text, bool ok) {
    std::string out = ok ? text : "herd up: " + text;
    if (o.detach) {
      std::string msg = (ok ? "" : "!") + out;
      (void)!write(ready_pipe[1], msg.data(), msg.size());
      close(ready_pipe[1]);
    } else {
      std::fputs(out.c_str(), ok ? stdout : stderr);
      std::fflush(stdout);
    }
  };
  std::ofstream(pidfile) << getpid() << "\n";

  // Become the subreaper of everything below us: when an agent dies, its
  // task shims (which outlive it on purpose) are reparented here and reaped
  // when they end, rather than lingering as zombies.
  prctl(PR_SET_CHILD_SUBREAPER, 1);
  std::string exe = SelfExe();
  std::vector<Child> children;
  std::string master_log = (fs::path(data) / "logs" / "master.log").string();
  children.push_back({"master", Spawn({exe, "master", "--data", (fs::path(data) / "master").string(), "--listen",
                                       o.listen, "--cell", o.cell, "--poll-interval", o.poll_interval},
                                      master_log)});
  // Slice this machine among the agents.
  ResourceVector total = agent::DetectCapacity(data);
  int64_t cpu = total.cpu_millis / o.agents, mem = total.memory_bytes / o.agents;
  std::string host = o.listen.substr(0, o.listen.rfind(':'));
  std::vector<std::string> names;
  for (int i = 0; i < o.agents; ++i) {
    std::string name = absl::StrCat("m", i);
    names.push_back(name);
    std::string capacity = absl::StrCat("cpu=", cpu, "m,memory=", mem, ",disk=", total.disk_bytes / o.agents);
    children.push_back({name, Spawn({exe, "agent", "--master", o.listen, "--listen", absl::StrCat(host, ":0"),
                                     "--name", name, "--root", (fs::path(data) / "agents" / name).string(),
                                     "--capacity", capacity, "--attr", absl::StrCat("rack=r", i / 2),
                                     // Agents on one machine share its ports: give each its own range.
                                     "--ports", absl::StrCat(20000 + 1000 * i, "-", 20999 + 1000 * i),
                                     "--stop-tasks-on-exit"},
                                    (fs::path(data) / "logs" / (name + ".log")).string())});
  }
  std::string why;
  if (!WaitReady(o.listen, o.agents, 30'000, &why)) {
    StopAll(children);
    std::remove(pidfile.c_str());
    report(absl::StrCat("the cell did not come up within 30 s: ", why, " (see ", data, "/logs)\n"), false);
    return 1;
  }
  std::string text = absl::StrCat("Herd cell '", o.cell, "' is up (pid ", getpid(), ").\n", "  master  ", o.listen,
                                  "   data: ", data, "   logs: ", data, "/logs\n", "  agents  ");
  for (int i = 0; i < o.agents; ++i) {
    absl::StrAppend(&text, i ? ", " : "", names[i], " (rack r", i / 2, ")");
  }
  absl::StrAppend(&text, "; each with cpu ", FormatCpu(cpu), ", memory ", FormatBytes(mem), "\n");
  absl::StrAppend(&text, "Try:\n  herd submit examples/hello.yaml\n  herd jobs\n  herd status hello\n"
                         "  herd logs hello/0\n  herd machines\n");
  if (o.listen != "127.0.0.1:7070") absl::StrAppend(&text, "(set HERD_MASTER=", o.listen, " first)\n");
  absl::StrAppend(&text, o.detach ? absl::StrCat("Stop it with: herd down --data ", data, "\n")
                                  : "Stop it with Ctrl-C.\n");
  report(text, true);

  InstallStopSignalHandlers(o.detach ? Hangup::kIgnore : Hangup::kStop);
  // Watch the children: report any that exits on its own. It is not
  // restarted, so failures stay visible (restart the cell to bring it back).
  while (true) {
    if (WaitForStopSignal(500) != 0) break;
    int status = 0;
    pid_t pid;
    while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
      for (Child& c : children) {
        if (c.pid != pid) continue;  // else: an orphaned shim, just reaped
        std::fprintf(stderr, "herd up: %s exited (%s %d); the rest of the cell keeps running\n", c.name.c_str(),
                     WIFSIGNALED(status) ? "signal" : "code",
                     WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
        c.pid = -1;
      }
    }
  }
  std::fprintf(stderr, "herd up: stopping the cell (tasks are stopped, state stays in %s)\n", data.c_str());
  StopAll(children);
  std::remove(pidfile.c_str());
  return 0;
}

int RunDown(const std::string& data_dir) {
  std::string data = data_dir.empty() ? DefaultUpDir() : data_dir;
  std::ifstream in(fs::path(data) / "up.pid");
  pid_t pid = 0;
  if (!(in >> pid) || pid <= 0 || kill(pid, 0) != 0) {
    std::fprintf(stderr, "herd down: no cell is running from %s\n", data.c_str());
    return 1;
  }
  kill(pid, SIGTERM);
  for (int i = 0; i < 900; ++i) {
    if (kill(pid, 0) != 0) {
      std::printf("cell stopped (state kept in %s)\n", data.c_str());
      return 0;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  std::fprintf(stderr, "herd down: the cell (pid %d) did not stop within 90 s\n", pid);
  return 1;
}

}  // namespace herd
