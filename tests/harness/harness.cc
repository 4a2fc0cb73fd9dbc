#include "harness/harness.h"

#include "base/ports.h"

#include <sys/socket.h>

#include <netinet/in.h>

#include <arpa/inet.h>

#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <google/protobuf/util/json_util.h>
#include <poll.h>
#include <sys/syscall.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>
#include <unordered_map>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

extern char** environ;

namespace herd::harness {
namespace fs = std::filesystem;

namespace {

using Clock = std::chrono::steady_clock;

// The only place that waits for children. The test process is a child
// subreaper (so shims orphaned by a killed agent end up here and are reaped),
// which means something must call waitpid(-1): a background thread does, and
// keeps the statuses of the children we started for Wait().
class Reaper {
 public:
  static Reaper& Get() {
    static Reaper* r = new Reaper();  // never destroyed: its thread runs until exit
    return *r;
  }

  // Runs `spawn` (which forks and returns the pid, or -1) under the lock, so
  // the child's exit cannot be recorded before it is registered.
  pid_t Spawn(const std::function<pid_t()>& spawn) {
    std::lock_guard<std::mutex> l(mu_);
    pid_t pid = spawn();
    if (pid > 0) {
      ours_.insert(pid);
      done_.erase(pid);
      cv_.notify_all();  // the reaper may be idle for lack of children
    }
    return pid;
  }

  // The wait status of our child `pid`, or nullopt if it has not exited
  // within `timeout`. Forgets the status once returned.
  std::optional<int> Wait(pid_t pid, Ms timeout) {
    std::unique_lock<std::mutex> l(mu_);
    auto deadline = Clock::now() + timeout;
    while (true) {
      auto it = done_.find(pid);
      if (it != done_.end()) {
        int st = it->second;
        done_.erase(it);
        ours_.erase(pid);
        return st;
      }
      if (cv_.wait_until(l, deadline) == std::cv_status::timeout && !done_.contains(pid)) return std::nullopt;
    }
  }

  bool Exited(pid_t pid) {
    std::lock_guard<std::mutex> l(mu_);
    return done_.contains(pid);
  }

 private:
  Reaper() {
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    std::thread([this] { Loop(); }).detach();
  }

  void Loop() {
    while (true) {
      int st = 0;
      pid_t pid = waitpid(-1, &st, 0);
      if (pid > 0) {
        std::lock_guard<std::mutex> l(mu_);
        if (ours_.contains(pid)) {
          done_[pid] = st;
          cv_.notify_all();
        }
        continue;
      }
      if (errno == EINTR) continue;
      // No children right now: wait for one we start, or for orphans to be
      // reparented to us (checked every 100 ms).
      std::unique_lock<std::mutex> l(mu_);
      cv_.wait_for(l, 100ms);
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::set<pid_t> ours_;
  std::unordered_map<pid_t, int> done_;
};

// Everything a forked child needs, prepared before fork (after it only
// async-signal-safe calls are allowed).
struct ExecPlan {
  std::vector<std::string> args;
  std::vector<std::string> env_store;
  std::vector<char*> argv;
  std::vector<char*> envp;
  explicit ExecPlan(const std::vector<std::string>& a) : args(a) {
    for (auto& s : args) argv.push_back(s.data());
    argv.push_back(nullptr);
    // Hermetic: the CLI must not pick up a developer's HERD_MASTER/HERD_USER.
    for (char** e = environ; *e != nullptr; ++e) {
      if (absl::StartsWith(*e, "HERD_MASTER=") || absl::StartsWith(*e, "HERD_USER=")) continue;
      env_store.emplace_back(*e);
    }
    for (auto& s : env_store) envp.push_back(s.data());
    envp.push_back(nullptr);
  }
};

// Forks and execs `plan` in a new process group with stdin from /dev/null
// and stdout/stderr on the given fds. With `die_with_parent`, the child gets
// SIGKILL if the test process dies (a crashed test leaves no master behind).
pid_t ForkExec(ExecPlan& plan, int out_fd, int err_fd, bool die_with_parent) {
  return Reaper::Get().Spawn([&]() -> pid_t {
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid != 0) return pid;
    setpgid(0, 0);
    if (die_with_parent) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent) _exit(127);
    }
    int null = open("/dev/null", O_RDONLY);
    if (null >= 0) dup2(null, 0);
    dup2(out_fd, 1);
    dup2(err_fd, 2);
    if (syscall(SYS_close_range, 3, ~0U, 0) != 0) {
      for (int fd = 3; fd < 1024; ++fd) close(fd);
    }
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    execve(plan.argv[0], plan.argv.data(), plan.envp.data());
    _exit(127);
  });
}

std::string Tail(const std::string& s, size_t bytes) {
  if (s.size() <= bytes) return s;
  return "..." + s.substr(s.size() - bytes);
}

bool TestFailed() {
  const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
  if (info != nullptr) return info->result()->Failed();
  return ::testing::UnitTest::GetInstance()->Failed();
}

std::string TestName() {
  const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
  if (info == nullptr) return "herd-test";
  std::string n = absl::StrCat(info->test_suite_name(), ".", info->name());
  for (char& c : n) {
    if (!isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-') c = '_';
  }
  return n;
}

}  // namespace

std::string HerdBinary() {
  if (const char* b = std::getenv("HERD_BINARY"); b && *b) return b;
  if (const char* d = std::getenv("HERD_BIN_DIR"); d && *d) return absl::StrCat(d, "/herd");
  return "herd";
}

std::string BinaryBesideHerd(const std::string& name) {
  if (const char* d = std::getenv("HERD_BIN_DIR"); d && *d) return absl::StrCat(d, "/", name);
  if (const char* b = std::getenv("HERD_BINARY"); b && *b) {
    return (std::filesystem::path(b).parent_path() / name).string();
  }
  return name;
}

std::string SourceDir() {
  const char* s = std::getenv("HERD_SOURCE_DIR");
  return s && *s ? s : ".";
}

// ---- Processes ----

std::string RunResult::Describe() const {
  std::string how = timed_out ? "timed out" : signal != 0 ? absl::StrCat("killed by signal ", signal)
                                                          : absl::StrCat("exit ", exit_code);
  return absl::StrCat(how, "\n--- stdout ---\n", Tail(out, 4000), "\n--- stderr ---\n", Tail(err, 4000));
}

RunResult Run(const std::vector<std::string>& argv, Ms timeout) {
  RunResult r;
  int out[2], err[2];
  if (pipe2(out, O_CLOEXEC) != 0) return r;
  if (pipe2(err, O_CLOEXEC) != 0) {
    close(out[0]);
    close(out[1]);
    return r;
  }
  ExecPlan plan(argv);
  pid_t pid = ForkExec(plan, out[1], err[1], /*die_with_parent=*/true);
  close(out[1]);
  close(err[1]);
  if (pid < 0) {
    close(out[0]);
    close(err[0]);
    r.err = absl::StrCat("fork: ", strerror(errno));
    return r;
  }
  auto deadline = Clock::now() + timeout;
  pollfd fds[2] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}};
  std::string* sinks[2] = {&r.out, &r.err};
  int open_fds = 2;
  char buf[65536];
  while (open_fds > 0) {
    auto left = std::chrono::duration_cast<Ms>(deadline - Clock::now()).count();
    if (left <= 0) {
      r.timed_out = true;
      kill(-pid, SIGKILL);
      break;
    }
    int n = poll(fds, 2, static_cast<int>(std::min<int64_t>(left, 1000)));
    if (n < 0 && errno != EINTR) break;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      ssize_t got = read(fds[i].fd, buf, sizeof(buf));
      if (got > 0) {
        sinks[i]->append(buf, static_cast<size_t>(got));
      } else if (got == 0 || (errno != EINTR && errno != EAGAIN)) {
        close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
      }
    }
  }
  for (auto& f : fds) {
    if (f.fd >= 0) close(f.fd);
  }
  std::optional<int> st = Reaper::Get().Wait(pid, r.timed_out ? 10s : timeout);
  if (!st) {
    kill(-pid, SIGKILL);
    r.timed_out = true;
    st = Reaper::Get().Wait(pid, 10s);
  }
  if (st && WIFEXITED(*st)) r.exit_code = WEXITSTATUS(*st);
  if (st && WIFSIGNALED(*st)) r.signal = WTERMSIG(*st);
  if (r.timed_out) r.exit_code = -1;
  return r;
}

absl::StatusOr<std::unique_ptr<Child>> Child::Spawn(std::string name, std::vector<std::string> argv,
                                                    std::string log_path) {
  int fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return absl::InternalError(absl::StrCat("cannot open ", log_path, ": ", strerror(errno)));
  {
    std::string banner = absl::StrCat("==== harness: starting ", Cell::Join(argv), "\n");
    (void)!write(fd, banner.data(), banner.size());
  }
  ExecPlan plan(argv);
  pid_t pid = ForkExec(plan, fd, fd, /*die_with_parent=*/true);
  close(fd);
  if (pid < 0) return absl::InternalError(absl::StrCat("fork: ", strerror(errno)));
  return std::unique_ptr<Child>(new Child(std::move(name), std::move(argv), std::move(log_path), pid));
}

Child::~Child() { Kill(); }

bool Child::Running() {
  if (status_) return false;
  if (Reaper::Get().Exited(pid_)) {
    status_ = Reaper::Get().Wait(pid_, 0ms);
    return false;
  }
  return true;
}

void Child::Signal(int sig) {
  if (status_) return;
  kill(-pid_, sig);
}

std::optional<int> Child::Wait(Ms timeout) {
  if (!status_) status_ = Reaper::Get().Wait(pid_, timeout);
  return status_;
}

void Child::Kill() {
  if (status_) return;
  kill(-pid_, SIGKILL);
  Wait(30s);
}

bool Child::Stop(Ms timeout) {
  Signal(SIGTERM);
  if (!Wait(timeout)) {
    Kill();
    return false;
  }
  return WIFEXITED(*status_) && WEXITSTATUS(*status_) == 0;
}

std::optional<ProcInfo> ReadProc(pid_t pid) {
  std::string stat = ReadFileOrEmpty(absl::StrCat("/proc/", pid, "/stat"));
  // "PID (COMM) STATE PPID PGRP SESSION ..."; COMM may hold spaces and ')'.
  size_t close_paren = stat.rfind(')');
  if (stat.empty() || close_paren == std::string::npos) return std::nullopt;
  std::vector<std::string> f = absl::StrSplit(stat.substr(close_paren + 2), ' ', absl::SkipEmpty());
  // f[0] is field 3 (state); field N is f[N - 3].
  if (f.size() < 20) return std::nullopt;
  ProcInfo p;
  p.pid = pid;
  p.state = f[0].empty() ? '?' : f[0][0];
  if (!absl::SimpleAtoi(f[1], &p.ppid) || !absl::SimpleAtoi(f[2], &p.pgid) || !absl::SimpleAtoi(f[3], &p.sid) ||
      !absl::SimpleAtoi(f[19], &p.start_time)) {
    return std::nullopt;
  }
  std::string cmd = ReadFileOrEmpty(absl::StrCat("/proc/", pid, "/cmdline"));
  for (absl::string_view a : absl::StrSplit(cmd, '\0', absl::SkipEmpty())) p.cmdline.emplace_back(a);
  std::error_code ec;
  p.cwd = fs::read_symlink(absl::StrCat("/proc/", pid, "/cwd"), ec).string();
  return p;
}

std::vector<pid_t> ListPids() {
  std::vector<pid_t> out;
  DIR* d = opendir("/proc");
  if (d == nullptr) return out;
  while (dirent* e = readdir(d)) {
    pid_t pid;
    if (absl::SimpleAtoi(e->d_name, &pid) && pid > 0) out.push_back(pid);
  }
  closedir(d);
  return out;
}

bool ProcessAlive(pid_t pid) {
  auto p = ReadProc(pid);
  return p && p->state != 'Z' && p->state != 'X';
}

bool ProcessAlive(const ProcInfo& want) {
  auto p = ReadProc(want.pid);
  return p && p->state != 'Z' && p->state != 'X' && p->start_time == want.start_time;
}

std::optional<std::string> ProcEnv(pid_t pid, const std::string& key) {
  std::string env = ReadFileOrEmpty(absl::StrCat("/proc/", pid, "/environ"));
  std::string prefix = key + "=";
  for (absl::string_view e : absl::StrSplit(env, '\0', absl::SkipEmpty())) {
    if (absl::StartsWith(e, prefix)) return std::string(e.substr(prefix.size()));
  }
  return std::nullopt;
}

std::vector<ProcInfo> ProcessesUnder(const std::string& root) {
  std::string prefix = fs::weakly_canonical(root).string() + "/";
  auto under = [&](const std::string& path) { return absl::StartsWith(path + "/", prefix); };
  std::vector<ProcInfo> all;
  std::set<pid_t> sessions;
  pid_t self = getpid();
  for (pid_t pid : ListPids()) {
    if (pid == self) continue;
    auto p = ReadProc(pid);
    if (!p || p->state == 'Z' || p->state == 'X') continue;
    // A shim: herd-shim ROOT/runs/RUN_ID -- ARGV...
    bool shim = p->cmdline.size() >= 2 && absl::EndsWith(p->cmdline[0], "herd-shim") && under(p->cmdline[1]);
    if (shim) sessions.insert(p->sid);
    all.push_back(std::move(*p));
  }
  std::vector<ProcInfo> out;
  for (auto& p : all) {
    bool shim = p.cmdline.size() >= 2 && absl::EndsWith(p.cmdline[0], "herd-shim") && under(p.cmdline[1]);
    if (shim || sessions.contains(p.sid) || (!p.cwd.empty() && under(p.cwd))) out.push_back(std::move(p));
  }
  return out;
}

bool KillProcessesUnder(const std::string& root, Ms timeout) {
  auto deadline = Clock::now() + timeout;
  while (true) {
    std::vector<ProcInfo> left = ProcessesUnder(root);
    if (left.empty()) return true;
    if (Clock::now() >= deadline) {
      std::string pids;
      for (const auto& p : left) absl::StrAppend(&pids, " ", p.pid);
      std::fprintf(stderr, "harness: processes under %s survive SIGKILL:%s\n", root.c_str(), pids.c_str());
      return false;
    }
    for (const auto& p : left) {
      if (ProcessAlive(p)) kill(p.pid, SIGKILL);
    }
    std::this_thread::sleep_for(20ms);
  }
}

// ---- Files ----

std::string ReadFileOrEmpty(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TestDir::TestDir() {
  const char* tmp = std::getenv("TMPDIR");
  std::string base = absl::StrCat(tmp && *tmp ? tmp : "/tmp", "/herd-it-", TestName(), "-XXXXXX");
  std::vector<char> buf(base.begin(), base.end());
  buf.push_back('\0');
  if (mkdtemp(buf.data()) == nullptr) {
    ADD_FAILURE() << "mkdtemp " << base << ": " << strerror(errno);
    path_ = base;
    return;
  }
  path_ = buf.data();
  // Tasks run as unprivileged uids: let them reach the files a test shares
  // with them here (mkdtemp makes the directory 0700). The cell's PKI
  // directory stays 0700 (SaveAuthority makes it so).
  chmod(path_.c_str(), 0755);
}

TestDir::~TestDir() {
  if (TestFailed()) {
    if (on_keep_) on_keep_();
    std::fprintf(stderr, "harness: the test failed; its directory (logs, data, task runs) is kept: %s\n",
                 path_.c_str());
    return;
  }
  std::error_code ec;
  fs::remove_all(path_, ec);
}

std::string TestDir::Sub(const std::string& name) const { return (fs::path(path_) / name).string(); }

std::string TestDir::Write(const std::string& name, const std::string& contents) const {
  std::string p = Sub(name);
  fs::create_directories(fs::path(p).parent_path());
  std::ofstream(p, std::ios::binary | std::ios::trunc) << contents;
  return p;
}

absl::Status ParseJson(const std::string& json, google::protobuf::Message* out) {
  google::protobuf::util::JsonParseOptions opts;
  opts.ignore_unknown_fields = false;
  auto st = google::protobuf::util::JsonStringToMessage(json, out, opts);
  if (!st.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("cannot parse as ", out->GetTypeName(), ": ",
                                                   std::string(st.message()), "\n", Tail(json, 2000)));
  }
  return absl::OkStatus();
}

// ---- Cell ----

Cell::Cell() : Cell(Options()) {}

Cell::Cell(Options options) : options_(std::move(options)) {
  dir_.OnKeep([this] { std::fprintf(stderr, "%s", LogTails().c_str()); });
  fs::create_directories(dir_.Sub("logs"));
  absl::StatusOr<pki::Authority> ca = pki::CreateAuthority("test", time(nullptr), 24 * 3600);
  if (!ca.ok() || !pki::SaveAuthority(CaDir(), *ca).ok()) {
    std::fprintf(stderr, "harness: cannot create the cell's CA in %s\n", CaDir().c_str());
    std::abort();
  }
  IssueCredential(pki::Subject{pki::Role::kMaster, "master"}, "../master/credentials.pem");
}

std::string Cell::IssueCredential(const pki::Subject& who, const std::string& file) const {
  const std::string path = dir_.Sub("pki/" + file);
  if (fs::exists(path)) return path;
  absl::StatusOr<pki::Authority> ca = pki::LoadAuthority(CaDir());
  absl::StatusOr<pki::Credential> c =
      ca.ok() ? pki::IssueCredential(*ca, who, time(nullptr), 24 * 3600) : absl::StatusOr<pki::Credential>(ca.status());
  if (!c.ok() || !pki::SaveCredential(path, *c).ok()) {
    std::fprintf(stderr, "harness: cannot issue %s: %s\n", path.c_str(), std::string(c.status().message()).c_str());
    std::abort();
  }
  return path;
}

std::string Cell::UserCredential(const std::string& user) const {
  const bool admin = std::find(options_.admins.begin(), options_.admins.end(), user) != options_.admins.end();
  return IssueCredential(pki::Subject{pki::Role::kUser, user, admin},
                         absl::StrCat("users/", user, admin ? ".admin" : "", ".pem"));
}

std::string Cell::MachineCredential(const std::string& machine) const {
  return IssueCredential(pki::Subject{pki::Role::kMachine, machine}, "machines/" + machine + ".pem");
}

Cell::~Cell() { Shutdown(); }

std::string Cell::Join(const std::vector<std::string>& v) { return absl::StrJoin(v, " "); }

absl::Status Cell::StartMaster() {
  if (master_ && master_->Running()) return absl::FailedPreconditionError("the master is already running");
  std::string data = dir_.Sub("master");
  std::string addr_file = data + "/master.addr";
  std::error_code ec;
  fs::remove(addr_file, ec);
  // The first start lets the master pick a free port (it writes the one it
  // got to master.addr); a restart must come back on the same address, which
  // agents and clients know.
  std::string listen = master_starts_ == 0 ? "127.0.0.1:0" : master_address_;
  std::vector<std::string> argv = {HerdBinary(),   "master",   "--data",          data,
                                   "--listen",     listen,     "--poll-interval", options_.poll_interval,
                                   "--down-after", absl::StrCat(options_.down_after), "--ca", CaDir()};
  for (const auto& f : options_.master_flags) argv.push_back(f);
  auto child = Child::Spawn("master", argv, dir_.Sub("logs/master.log"));
  if (!child.ok()) return child.status();
  master_ = std::move(*child);
  bool up = Eventually(
      [&] { return !master_->Running() || absl::EndsWith(ReadFileOrEmpty(addr_file), "\n"); }, 20s, 10ms);
  if (up && master_->Running()) {
    master_address_ = std::string(absl::StripAsciiWhitespace(ReadFileOrEmpty(addr_file)));
    ++master_starts_;
    // It writes master.addr once it serves; check that the CLI gets through.
    RunResult r;
    if (Eventually([&] { return (r = Herd({"cell"})).exit_code == 0; }, 10s, 20ms)) return absl::OkStatus();
    return absl::UnavailableError("the master wrote its address but does not answer: " + r.Describe());
  }
  master_->Kill();
  return absl::UnavailableError("the master did not start; see " + dir_.Sub("logs/master.log"));
}


absl::Status Cell::StartReplicas(int n, const std::string& store_url, const std::vector<std::string>& flags) {
  if (!replicas_.empty() || master_) return absl::FailedPreconditionError("masters are already running");
  std::vector<std::string> addresses;
  for (int i = 0; i < n; ++i) {
    Replica r;
    const Site& site = SiteOf(absl::StrCat("master", i));
    r.address = absl::StrCat(site.host, ":", FreePort());
    std::string data = dir_.Sub(absl::StrCat("master", i));
    fs::create_directories(data);
    r.argv = site.wrapper;
    r.argv.insert(r.argv.end(),
                  {HerdBinary(), "master", "--data", data, "--credentials", dir_.Sub("master/credentials.pem"),
                   "--listen", r.address, "--store", store_url, "--poll-interval", options_.poll_interval,
                   "--down-after", absl::StrCat(options_.down_after), "--ca", CaDir()});
    for (const auto& f : options_.master_flags) r.argv.push_back(f);
    for (const auto& f : flags) r.argv.push_back(f);
    addresses.push_back(r.address);
    replicas_.push_back(std::move(r));
  }
  master_address_ = absl::StrJoin(addresses, ",");
  for (int i = 0; i < n; ++i) {
    if (absl::Status st = RestartReplica(i); !st.ok()) return st;
  }
  RunResult r;
  if (Eventually([&] { return (r = Herd({"cell"})).exit_code == 0; }, 30s, 20ms)) return absl::OkStatus();
  std::string states;
  for (size_t i = 0; i < replicas_.size(); ++i) {
    Child* c = replicas_[i].child.get();
    absl::StrAppend(&states, " master", i, c && c->Running() ? " running" : " exited",
                    c && c->Wait(0ms) ? absl::StrCat(" (status ", *c->Wait(0ms), ")") : "", ";");
  }
  return absl::UnavailableError(absl::StrCat("no replica answers (", states, "): ", r.Describe()));
}

absl::Status Cell::RestartReplica(int i) {
  Replica& r = replicas_[i];
  if (r.child && r.child->Running()) return absl::FailedPreconditionError("replica is running");
  auto child = Child::Spawn(absl::StrCat("master", i), r.argv, dir_.Sub(absl::StrCat("logs/master", i, ".log")));
  if (!child.ok()) return child.status();
  r.child = std::move(*child);
  return absl::OkStatus();
}

void Cell::StopReplica(int i, int sig) {
  Replica& r = replicas_[i];
  if (!r.child) return;
  if (sig == SIGKILL) {
    r.child->Kill();
  } else {
    r.child->Signal(sig);
    if (!r.child->Wait(30s)) r.child->Kill();
  }
}

std::map<int, int64_t> Cell::WaitRunning(const std::string& job, int n, Ms timeout) const {
  std::map<int, int64_t> pids;
  v1::ListTasksResponse last;
  bool ok = Eventually([&] {
    auto t = Tasks(job);
    if (!t.ok()) return false;
    last = *t;
    pids.clear();
    for (const auto& task : t->tasks()) {
      if (task.state() == v1::Task::RUNNING && task.phase() == v1::Task::ACTIVE && task.pid() > 0) {
        pids[task.index()] = task.pid();
      }
    }
    return static_cast<int>(pids.size()) == n;
  }, timeout);
  EXPECT_TRUE(ok) << job << ": " << Summarize(last);
  return pids;
}

v1::ListTasksResponse Cell::WaitTasks(const std::string& job,
                                     const std::function<bool(const v1::ListTasksResponse&)>& pred,
                                     const std::string& what, Ms timeout) const {
  v1::ListTasksResponse last;
  bool ok = Eventually(
      [&] {
        auto t = Tasks(job);
        if (!t.ok()) return false;
        last = *t;
        return pred(last);
      },
      timeout);
  EXPECT_TRUE(ok) << job << ": never " << what << ": " << Summarize(last) << "\n" << LogTails();
  return last;
}

v1::ListTasksResponse Cell::WaitActive(const std::string& job, int n, Ms timeout) const {
  return WaitTasks(
      job, [n](const v1::ListTasksResponse& r) { return AllActive(r, n); }, absl::StrCat("all ", n, " active"),
      timeout);
}

bool AllActive(const v1::ListTasksResponse& r, int n) {
  int active = 0;
  for (const auto& t : r.tasks()) {
    active += t.state() == v1::Task::RUNNING && t.phase() == v1::Task::ACTIVE && t.pid() > 0;
  }
  return r.tasks_size() == n && active == n;
}

int Cell::LeaderIndex() const {
  for (size_t i = 0; i < replicas_.size(); ++i) {
    Child* c = replicas_[i].child.get();
    if (c == nullptr || !c->Running()) continue;
    // Briefly: a replica cut off by a partition does not answer at all.
    RunResult r = Herd({"--master", replicas_[i].address, "cell", "--json"}, 3s);
    if (r.exit_code != 0) continue;
    auto info = ParseJsonAs<v1::CellInfo>(r.out);
    if (info.ok() && info->role() == "leader" && info->replica() == replicas_[i].address) return static_cast<int>(i);
  }
  return -1;
}

void Cell::StopMaster(int sig) {
  if (!master_) return;
  if (sig == SIGKILL) {
    master_->Kill();
  } else {
    master_->Signal(sig);
    if (!master_->Wait(30s)) master_->Kill();
  }
}

namespace {

// Whether `herd agent` of `binary` takes `flag` (asked once per binary).
bool AgentKnows(const std::string& binary, const std::string& flag) {
  static std::mutex mu;
  static std::map<std::string, std::string> help;
  std::lock_guard l(mu);
  auto it = help.find(binary);
  if (it == help.end()) it = help.emplace(binary, Run({binary, "agent", "--help"}).out).first;
  return absl::StrContains(it->second, flag);
}

}  // namespace

absl::Status Cell::StartAgent(const std::string& name, const std::string& rack, bool wait_up) {
  if (master_address_.empty()) return absl::FailedPreconditionError("start the master first");
  AgentSlot& slot = agents_[name];
  if (slot.child && slot.child->Running()) return absl::FailedPreconditionError(name + " is already running");
  slot.rack = rack;
  std::string root = AgentRoot(name);
  if (std::find(roots_.begin(), roots_.end(), root) == roots_.end()) roots_.push_back(root);
  const Site& site = SiteOf(name);
  std::vector<std::string> argv = site.wrapper;
  argv.insert(argv.end(), {slot.binary.empty() ? HerdBinary() : slot.binary, "agent", "--master",
                           master_address_,
                           "--credentials", MachineCredential(name),
                           "--package-file-dirs", dir_.path(),
                           "--listen",   site.host + ":0", "--name",    name,
                           "--root",     root,          "--capacity", options_.capacity,
                           "--attr",     "rack=" + rack});
  // One host: its agents share one map of users to uids (an older release's
  // agent, run by upgrade tests and fail-before checks, has no such flag).
  if (AgentKnows(argv[site.wrapper.size()], "--task-uid-file")) {
    argv.insert(argv.end(), {"--task-uid-file", dir_.Sub("task-uids")});
  }
  if (auto it = options_.agent_flags.find(name); it != options_.agent_flags.end()) {
    argv.insert(argv.end(), it->second.begin(), it->second.end());
  }
  auto child = Child::Spawn(name, argv, dir_.Sub("logs/" + name + ".log"));
  if (!child.ok()) return child.status();
  slot.child = std::move(*child);
  if (!wait_up) return absl::OkStatus();
  return WaitAgentUp(name, 20s);
}

absl::Status Cell::WaitAgentUp(const std::string& name, Ms timeout) {
  // UP at the address this agent process logged (a restarted agent listens
  // on a new port; UP at the old one would be stale).
  AgentSlot& slot = agents_[name];
  std::string log = slot.child->log_path();
  std::string why;
  bool ok = Eventually(
      [&] {
        if (!slot.child->Running()) {
          why = "the agent exited";
          return true;
        }
        std::string text = ReadFileOrEmpty(log);
        size_t banner = text.rfind("==== harness: starting");
        size_t at = text.find(" listening on ", banner == std::string::npos ? 0 : banner);
        if (at == std::string::npos) {
          why = "the agent has not logged its address";
          return false;
        }
        size_t start = at + strlen(" listening on ");
        std::string addr = text.substr(start, text.find(' ', start) - start);
        auto m = Machine(name);
        if (!m.ok()) {
          why = std::string(m.status().message());
          return false;
        }
        if (m->state() != v1::Machine::UP || m->address() != addr) {
          why = absl::StrCat(name, " is ", v1::Machine::State_Name(m->state()), " at ", m->address(),
                             "; the agent listens on ", addr);
          return false;
        }
        slot.address = addr;
        why.clear();
        return true;
      },
      timeout, 20ms);
  if (ok && why.empty()) return absl::OkStatus();
  return absl::UnavailableError(absl::StrCat("agent ", name, " did not come up: ", why));
}

absl::Status Cell::StartAgents(int n) {
  for (int i = 1; i <= n; ++i) {
    if (absl::Status st = StartAgent(absl::StrCat("m", i), absl::StrCat("r", i), /*wait_up=*/false); !st.ok()) {
      return st;
    }
  }
  for (int i = 1; i <= n; ++i) {
    if (absl::Status st = WaitAgentUp(absl::StrCat("m", i), 20s); !st.ok()) return st;
  }
  return absl::OkStatus();
}

void Cell::StopAgent(const std::string& name, int sig) {
  auto it = agents_.find(name);
  if (it == agents_.end() || !it->second.child) return;
  Child& c = *it->second.child;
  if (sig == SIGKILL) {
    c.Kill();
  } else {
    c.Signal(sig);
    if (!c.Wait(30s)) c.Kill();
  }
}

absl::Status Cell::RestartAgent(const std::string& name, bool wait_up, const std::string& binary) {
  auto it = agents_.find(name);
  if (it == agents_.end()) return absl::NotFoundError("no agent " + name);
  if (!binary.empty()) it->second.binary = binary;
  return StartAgent(name, it->second.rack, wait_up);
}

absl::Status Cell::StartScheduler(const std::string& name, const std::vector<std::string>& flags) {
  if (master_address_.empty()) return absl::FailedPreconditionError("start the master first");
  auto& slot = schedulers_[name];
  if (slot && slot->Running()) return absl::FailedPreconditionError(name + " is already running");
  std::vector<std::string> argv = {
      HerdBinary(), "scheduler", "--master", master_address_, "--name", name, "--credentials",
      IssueCredential(pki::Subject{pki::Role::kScheduler, name}, "schedulers/" + name + ".pem")};
  argv.insert(argv.end(), flags.begin(), flags.end());
  auto child = Child::Spawn(name, argv, SchedulerLog(name));
  if (!child.ok()) return child.status();
  slot = std::move(*child);
  return absl::OkStatus();
}

void Cell::StopScheduler(const std::string& name, int sig) {
  Child* c = scheduler(name);
  if (c == nullptr) return;
  if (sig == SIGKILL) {
    c->Kill();
  } else {
    c->Signal(sig);
    if (!c->Wait(30s)) c->Kill();
  }
}

Child* Cell::scheduler(const std::string& name) {
  auto it = schedulers_.find(name);
  return it == schedulers_.end() ? nullptr : it->second.get();
}

const Cell::Site& Cell::SiteOf(const std::string& process) const {
  static const Site* loopback = new Site();
  auto it = sites_.find(process);
  return it == sites_.end() ? *loopback : it->second;
}

Child* Cell::agent(const std::string& name) {
  auto it = agents_.find(name);
  return it == agents_.end() ? nullptr : it->second.child.get();
}

std::string Cell::AgentRoot(const std::string& name) const { return dir_.Sub("agents/" + name); }

std::vector<std::string> Cell::AgentNames() const {
  std::vector<std::string> out;
  for (const auto& [n, s] : agents_) out.push_back(n);
  return out;
}

RunResult Cell::Herd(const std::vector<std::string>& args, Ms timeout) const {
  return HerdAs(options_.user, args, timeout);
}

RunResult Cell::HerdAs(const std::string& user, const std::vector<std::string>& args, Ms timeout) const {
  return HerdWith(UserCredential(user), args, timeout);
}

RunResult Cell::HerdWith(const std::string& credentials, const std::vector<std::string>& args, Ms timeout) const {
  // The cell's master list unless the caller names one (args starting
  // with --master ADDR: one replica).
  std::vector<std::string> argv = {HerdBinary(), "--credentials", credentials};
  if (args.empty() || args[0] != "--master") {
    argv.push_back("--master");
    argv.push_back(master_address_);
  }
  argv.insert(argv.end(), args.begin(), args.end());
  return Run(argv, timeout);
}

absl::StatusOr<v1::ListTasksResponse> Cell::Tasks(const std::string& job) const {
  return HerdJson<v1::ListTasksResponse>({"tasks", job});
}

absl::StatusOr<v1::ListMachinesResponse> Cell::Machines() const {
  return HerdJson<v1::ListMachinesResponse>({"machines"});
}

absl::StatusOr<v1::ListJobsResponse> Cell::Jobs(bool include_dead) const {
  if (include_dead) return HerdJson<v1::ListJobsResponse>({"jobs", "--all"});
  return HerdJson<v1::ListJobsResponse>({"jobs"});
}

absl::StatusOr<v1::Job> Cell::Job(const std::string& id) const {
  absl::StatusOr<v1::ListJobsResponse> jobs = Jobs();
  if (!jobs.ok()) return jobs.status();
  for (const v1::Job& j : jobs->jobs()) {
    if (j.id() == id) return j;
  }
  return absl::NotFoundError(absl::StrCat("no job ", id));
}

absl::StatusOr<v1::Machine> Cell::Machine(const std::string& name) const {
  auto ms = Machines();
  if (!ms.ok()) return ms.status();
  for (const auto& m : ms->machines()) {
    if (m.name() == name) return m;
  }
  return absl::NotFoundError("the master does not list machine " + name);
}

void Cell::Shutdown() {
  // Agents first, so that none starts a task while we clean up; then every
  // process under their roots; then the master.
  for (auto& [name, slot] : agents_) {
    if (slot.child) slot.child->Kill();
  }
  for (const std::string& root : roots_) {
    if (!KillProcessesUnder(root)) ADD_FAILURE() << "task processes under " << root << " could not be killed";
  }
  for (auto& [name, child] : schedulers_) {
    if (child) child->Kill();
  }
  if (master_) master_->Kill();
  for (auto& r : replicas_) {
    if (r.child) r.child->Kill();
  }
}

std::string Cell::LogTails(size_t bytes) const {
  std::string out;
  std::error_code ec;
  std::vector<fs::path> logs;
  for (const auto& e : fs::directory_iterator(dir_.Sub("logs"), ec)) logs.push_back(e.path());
  std::sort(logs.begin(), logs.end());
  for (const auto& p : logs) {
    absl::StrAppend(&out, "---- ", p.string(), " (tail) ----\n", Tail(ReadFileOrEmpty(p.string()), bytes), "\n");
  }
  return out;
}

int CountTasks(const v1::ListTasksResponse& r, v1::Task::State state, v1::Task::Phase phase) {
  int n = 0;
  for (const auto& t : r.tasks()) {
    n += t.state() == state && (phase == v1::Task::PHASE_UNSPECIFIED || t.phase() == phase);
  }
  return n;
}

std::string Summarize(const v1::ListTasksResponse& r) {
  std::vector<std::string> parts;
  for (const auto& t : r.tasks()) {
    parts.push_back(absl::StrCat(t.index(), ":", v1::Task::State_Name(t.state()), "/", v1::Task::Phase_Name(t.phase()),
                                 "@", t.machine(), "#", t.incarnation(), " pid ", t.pid(), " (",
                                 v1::Event::Transition_Name(t.last_event().transition()), ": ",
                                 t.last_event().reason(), ")"));
  }
  return absl::StrJoin(parts, "; ");
}

Archive MakeArchive(const TestDir& dir, const std::string& name, const std::string& text) {
  const std::string src = dir.Write(name + "/bin/hello.txt", text);
  const std::string root = src.substr(0, src.rfind("/bin/"));
  Archive a;
  a.path = root + ".tar";
  RunResult made = Run({"/usr/bin/tar", "-cf", a.path, "-C", root, "."});
  EXPECT_EQ(made.exit_code, 0) << made.Describe();
  RunResult sum = Run({"/usr/bin/sha256sum", a.path});
  EXPECT_EQ(sum.exit_code, 0) << sum.Describe();
  a.sha256 = sum.out.substr(0, 64);
  return a;
}

Cell::Options TenantCellOptions(std::vector<std::string> master_flags) {
  Cell::Options o;
  o.user = "alice";
  o.admins = {"root"};  // alice, bob and carol are plain users
  o.master_flags = std::move(master_flags);
  return o;
}

}  // namespace herd::harness
