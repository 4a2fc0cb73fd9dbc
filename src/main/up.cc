#include "main/up.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pwd.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <thread>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "agent/cgroup/cgroup_extension.h"
#include "agent/runtime/process.h"
#include "agent/server/agent_server.h"
#include "base/clock.h"
#include "base/ids.h"
#include "base/ports.h"
#include "base/resources.h"
#include "base/signals.h"
#include "base/status.h"
#include "base/units.h"
#include "cli/client.h"
#include "herd/v1/api.grpc.pb.h"
#include "pki/pki.h"
#include "rpc/rpc.h"
#include "store/etcd/etcd_tls.h"

namespace herd {
namespace fs = std::filesystem;

namespace {

using agent::ProcessId;
using herd::Fd;

// ---- What a cell keeps in its data directory ------------------------------
//
//   DATA/up.lock      flock'ed by the running `herd up` for its whole life,
//                     holding its pid. The kernel drops the lock when that
//                     process dies, however it dies, so a dead cell never
//                     blocks the next one (a bare pid cannot tell a live
//                     process from a zombie nobody reaped, or a reused pid).
//                     Opened O_CLOEXEC: the master, agents and tasks never
//                     hold it.
//   DATA/up.children  "NAME PID START_TIME" of the master and each agent, so
//                     that a later `herd up` or `herd down` finds them if the
//                     `herd up` that started them was killed.
//   DATA/master, DATA/agents/mN, DATA/logs
//   DATA/pki          the cell's CA (ca.crt, ca.key 0600), made on first up
//   DATA/credentials.pem  an admin credential for the OS user who ran it (the
//                     CLI's default); DATA/master/credentials.pem and
//                     DATA/agents/mN/credentials.pem the master's and
//                     machines' own

std::string LockPath(const std::string& data) { return (fs::path(data) / "up.lock").string(); }
std::string ChildrenPath(const std::string& data) { return (fs::path(data) / "up.children").string(); }
std::string AgentRoot(const std::string& data, const std::string& name) {
  return (fs::path(data) / "agents" / name).string();
}

// The running cell's lock, held while this object lives.
class CellLock {
 public:
  // FAILED_PRECONDITION naming the holder if a cell already runs from `data`.
  static absl::StatusOr<CellLock> Acquire(const std::string& data) {
    Fd fd(open(LockPath(data).c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644));
    if (!fd.valid()) return absl::InternalError(absl::StrCat("cannot open ", LockPath(data), ": ", strerror(errno)));
    if (flock(fd.get(), LOCK_EX | LOCK_NB) != 0) {
      return absl::FailedPreconditionError(absl::StrCat("a cell is already running from ", data, " (pid ", Holder(data),
                                                        "); stop it with 'herd down --data ", data, "'"));
    }
    const std::string pid = absl::StrCat(getpid(), "\n");
    if (ftruncate(fd.get(), 0) != 0 ||
        pwrite(fd.get(), pid.data(), pid.size(), 0) != static_cast<ssize_t>(pid.size())) {
      return absl::InternalError(absl::StrCat("cannot write ", LockPath(data), ": ", strerror(errno)));
    }
    return CellLock(std::move(fd));
  }

  // The pid of the `herd up` holding the lock of `data`, or 0 if none does.
  static pid_t Holder(const std::string& data) {
    Fd fd(open(LockPath(data).c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd.valid()) return 0;
    if (flock(fd.get(), LOCK_SH | LOCK_NB) == 0) return 0;  // nobody holds it
    char buf[32] = {0};
    ssize_t n = pread(fd.get(), buf, sizeof(buf) - 1, 0);
    pid_t pid = 0;
    if (n <= 0 || !absl::SimpleAtoi(absl::StripAsciiWhitespace(absl::string_view(buf, n)), &pid)) return -1;
    return pid;
  }

 private:
  explicit CellLock(Fd fd) : fd_(std::move(fd)) {}
  Fd fd_;
};

struct Child {
  std::string name;
  pid_t pid = -1;
};

void WriteChildren(const std::string& data, const std::vector<Child>& children) {
  std::string text;
  for (const Child& c : children) {
    absl::StatusOr<ProcessId> id = agent::IdentifyProcess(c.pid);
    if (id.ok()) absl::StrAppend(&text, c.name, " ", id->pid, " ", id->start_time, "\n");
  }
  (void)WriteFileAtomic(ChildrenPath(data), text, {.durable = false});
}

struct ChildRecord {
  std::string name;
  ProcessId id;
};

std::vector<ChildRecord> ReadChildren(const std::string& data) {
  std::ifstream in(ChildrenPath(data));
  std::vector<ChildRecord> out;
  std::string line;
  while (std::getline(in, line)) {
    std::vector<std::string> f = absl::StrSplit(line, ' ', absl::SkipEmpty());
    ChildRecord r;
    if (f.size() == 3 && absl::SimpleAtoi(f[1], &r.id.pid) && absl::SimpleAtoi(f[2], &r.id.start_time)) {
      r.name = f[0];
      out.push_back(std::move(r));
    }
  }
  return out;
}

// The agents' names: their directories under DATA/agents.
std::vector<std::string> AgentNames(const std::string& data) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(fs::path(data) / "agents", ec)) {
    if (e.is_directory()) out.push_back(e.path().filename().string());
  }
  return out;
}

// Every live process of the cell that runs (or ran) from `data`: its master
// and agents (from up.children), and each task's shim and task (from the
// runs' task.pid files, identity-checked).
std::vector<std::pair<std::string, ProcessId>> CellProcesses(const std::string& data) {
  std::vector<std::pair<std::string, ProcessId>> out;
  for (const ChildRecord& c : ReadChildren(data)) {
    if (agent::IsRunning(c.id)) out.emplace_back(c.name, c.id);
  }
  for (const std::string& name : AgentNames(data)) {
    std::error_code ec;
    for (const auto& run : fs::directory_iterator(fs::path(AgentRoot(data, name)) / "runs", ec)) {
      absl::StatusOr<agent::TaskPidRecord> pids = agent::ReadTaskPidFile(run.path().string());
      if (!pids.ok()) continue;
      const std::string what = absl::StrCat(name, "/", run.path().filename().string());
      if (agent::IsRunning(pids->shim)) out.emplace_back("shim of " + what, pids->shim);
      if (agent::IsRunning(pids->task)) out.emplace_back("task " + what, pids->task);
    }
  }
  return out;
}

// Waits until none of `ids` runs (a bound only in case one cannot die).
bool WaitGone(const std::vector<ProcessId>& ids, int64_t timeout_ms) {
  const int64_t deadline = SteadyNowMs() + timeout_ms;
  while (true) {
    bool any = false;
    for (const ProcessId& id : ids) any |= agent::IsRunning(id);
    if (!any) return true;
    if (SteadyNowMs() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

// SIGKILLs the master and agents that a previous `herd up` started and did
// not stop (it was killed first): a new cell needs their port and their
// agents' directories. SIGKILL and not SIGTERM: an agent asked to stop stops
// its tasks, and the new cell re-adopts them instead. Returns how many.
int KillLeftoverDaemons(const std::string& data) {
  std::vector<ProcessId> killed;
  for (const ChildRecord& c : ReadChildren(data)) {
    if (!agent::IsRunning(c.id)) continue;
    std::fprintf(stderr, "herd up: stopping the %s (pid %d) a killed cell left running\n", c.name.c_str(), c.id.pid);
    kill(c.id.pid, SIGKILL);
    killed.push_back(c.id);
  }
  WaitGone(killed, 10'000);
  return static_cast<int>(killed.size());
}

// Kills every task of the cell and its shim, whatever is left of the cell:
// each run's task process group, then its shim (identity-checked), then
// whatever is still in the agents' cgroups (processes that left the task's
// group). Returns how many processes were signalled.
int KillTasks(const std::string& data) {
  int killed = 0;
  std::vector<ProcessId> ids;
  for (const auto& [what, id] : CellProcesses(data)) {
    if (!absl::StartsWith(what, "task ") && !absl::StartsWith(what, "shim of ")) continue;
    if (absl::StartsWith(what, "task ")) (void)agent::SignalProcessGroup(id.pid, SIGKILL);
    kill(id.pid, SIGKILL);
    ids.push_back(id);
    ++killed;
  }
  WaitGone(ids, 10'000);
  // Then what escaped its task's process group but not its cgroup.
  for (const std::string& name : AgentNames(data)) {
    agent::CgroupOptions o;  // as `herd up` starts its agents: the defaults
    o.agent_name = name;
    o.owner_dir = AgentRoot(data, name);
    killed += agent::KillAgentGroups(o);
  }
  return killed;
}

// ---- Starting and stopping the cell ----------------------------------------

std::string SelfExe() {
  std::error_code ec;
  auto p = fs::read_symlink("/proc/self/exe", ec);
  return ec ? "herd" : p.string();
}

// Runs `args` in its own process group (a terminal's Ctrl-C reaches only
// herd up), output appended to `log`, stdin from /dev/null, no other fd.
pid_t Spawn(const std::vector<std::string>& args, const std::string& log) {
  pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);
    int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
    }
    int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (null >= 0) dup2(null, 0);
    std::vector<char*> argv;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  return pid;
}

std::string MasterAddrFile(const std::string& data) { return (fs::path(data) / "master" / "master.addr").string(); }

// ---- The cell's PKI: secure by default, with nothing to set up ----------

std::string PkiDir(const std::string& data) { return (fs::path(data) / "pki").string(); }
std::string AdminCredentials(const std::string& data) { return (fs::path(data) / "credentials.pem").string(); }

// The OS user who runs `herd up`, as a Herd user name ("admin" if theirs is
// not one).
std::string OsUserName() {
  std::string name;
  if (const char* u = std::getenv("USER"); u && *u) name = u;
  if (struct passwd* pw = getpwuid(getuid()); name.empty() && pw != nullptr) name = pw->pw_name;
  name = absl::AsciiStrToLower(name);
  return ValidateUserName(name).ok() ? name : "admin";
}

// Keeps `path` if it holds a live credential for `who` from `ca`, else
// issues a new one there.
absl::Status EnsureCredential(const pki::Authority& ca, const std::string& path, const pki::Subject& who) {
  const int64_t now_s = time(nullptr);
  absl::StatusOr<pki::Credential> have = pki::LoadCredential(path);
  if (have.ok() && have->ca_pem == ca.cert_pem && have->info.subject == who &&
      have->info.not_after_s > now_s + 7 * 24 * 3600) {
    return absl::OkStatus();
  }
  HERD_ASSIGN_OR_RETURN(pki::Credential c, pki::IssueCredential(ca, who, now_s, 365ll * 24 * 3600));
  return pki::SaveCredential(path, c);
}

// The CA (made on the first `herd up` in DATA) and the credentials of the
// master, each agent and the admin.
absl::Status EnsurePki(const UpOptions& o, const std::string& data) {
  absl::StatusOr<pki::Authority> ca = pki::LoadAuthority(PkiDir(data));
  if (!ca.ok()) {
    if (fs::exists(fs::path(PkiDir(data)) / "ca.key")) return ca.status();
    ca = pki::CreateAuthority(o.cell, time(nullptr), 10 * 365ll * 24 * 3600);
    if (!ca.ok()) return ca.status();
    HERD_RETURN_IF_ERROR(pki::SaveAuthority(PkiDir(data), *ca));
  }
  HERD_RETURN_IF_ERROR(EnsureCredential(*ca, (fs::path(data) / "master" / "credentials.pem").string(),
                                        pki::Subject{pki::Role::kMaster, "master"}));
  for (int i = 0; i < o.agents; ++i) {
    const std::string name = absl::StrCat("m", i);
    HERD_RETURN_IF_ERROR(EnsureCredential(*ca, (fs::path(AgentRoot(data, name)) / "credentials.pem").string(),
                                          pki::Subject{pki::Role::kMachine, name}));
  }
  return EnsureCredential(*ca, AdminCredentials(data), pki::Subject{pki::Role::kUser, OsUserName(), true});
}

Child StartMaster(const UpOptions& o, const std::string& data, const std::string& exe) {
  std::remove(MasterAddrFile(data).c_str());  // a previous master's
  const std::string host = o.listen.substr(0, o.listen.rfind(':'));
  std::vector<std::string> args = {exe,
                                   "master",
                                   "--data",
                                   (fs::path(data) / "master").string(),
                                   "--listen",
                                   o.listen,
                                   "--cell",
                                   o.cell,
                                   "--poll-interval",
                                   o.poll_interval,
                                   "--ca",
                                   PkiDir(data),
                                   "--http",
                                   absl::StrCat(host, ":0")};
  if (!o.dns.empty()) {
    args.push_back("--dns");
    args.push_back(o.dns);
  }
  if (!o.history_sample.empty()) {
    args.push_back("--history-sample");
    args.push_back(o.history_sample);
  }
  if (!o.reclaim.empty()) {
    args.push_back("--reclaim");
    args.push_back(o.reclaim);
  }
  args.insert(args.end(), o.master_args.begin(), o.master_args.end());
  return {"master", Spawn(args, (fs::path(data) / "logs" / "master.log").string())};
}

// The master's address: --listen, or, with port 0 there, the port it bound,
// from the master.addr it writes once it serves.
absl::StatusOr<std::string> MasterAddress(const UpOptions& o, const std::string& data, const Child& master) {
  if (!absl::EndsWith(o.listen, ":0")) return o.listen;
  const int64_t deadline = SteadyNowMs() + 30'000;
  while (SteadyNowMs() < deadline) {
    std::ifstream in(MasterAddrFile(data));
    std::string addr;
    if (in >> addr && !addr.empty()) return addr;
    if (waitpid(master.pid, nullptr, WNOHANG) == master.pid) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return absl::UnavailableError(absl::StrCat("the master did not start serving (see ", data, "/logs/master.log)"));
}

// Slices this machine among `o.agents` agents: each its share of CPU,
// memory and disk, its own port range, and a rack (two agents per rack).
struct Slice {
  int64_t cpu_millis = 0;
  int64_t memory_bytes = 0;
  int64_t disk_bytes = 0;
};

Slice SliceMachine(const UpOptions& o, const std::string& data) {
  ResourceVector total = agent::DetectCapacity(data);
  Slice slice{total.cpu_millis / o.agents, total.memory_bytes / o.agents, total.disk_bytes / o.agents};
  if (!o.agent_capacity.empty()) {
    // Checked by the caller (ValidateUp): what is named replaces the split.
    ResourceVector given = *ParseResourceList(o.agent_capacity);
    if (given.cpu_millis > 0) slice.cpu_millis = given.cpu_millis;
    if (given.memory_bytes > 0) slice.memory_bytes = given.memory_bytes;
    if (given.disk_bytes > 0) slice.disk_bytes = given.disk_bytes;
  }
  return slice;
}

std::vector<Child> StartAgents(const UpOptions& o, const std::string& data, const std::string& exe,
                               const std::string& master, const Slice& slice) {
  std::vector<Child> out;
  const std::string host = o.listen.substr(0, o.listen.rfind(':'));  // the master's host (or the first's)
  for (int i = 0; i < o.agents; ++i) {
    const std::string name = absl::StrCat("m", i);
    const std::string capacity =
        absl::StrCat("cpu=", slice.cpu_millis, "m,memory=", slice.memory_bytes, ",disk=", slice.disk_bytes);
    std::vector<std::string> args = {exe, "agent", "--master", master, "--listen", absl::StrCat(host, ":0"), "--name",
                                     name, "--root", AgentRoot(data, name), "--capacity", capacity, "--attr",
                                     absl::StrCat("rack=r", i / 2),
                                     // One host: one uid per user whichever agent runs the task.
                                     "--task-uid-file", (fs::path(data) / "task-uids").string(),
                                     // Agents on one machine share its ports: give each its own range.
                                     "--ports", absl::StrCat(20000 + 1000 * i, "-", 20999 + 1000 * i), "--http",
                                     absl::StrCat(host, ":0"), "--stop-tasks-on-exit",
                                     // Agents sharing the host's CPUs would each
                                     // pin tasks to "free" cores the others use.
                                     absl::StrCat("--cpu-pinning=", o.agents == 1 ? "true" : "false")};
    args.insert(args.end(), o.agent_args.begin(), o.agent_args.end());
    out.push_back({name, Spawn(args, (fs::path(data) / "logs" / (name + ".log")).string())});
  }
  return out;
}

// Waits until the master answers and `agents` machines are UP; *ready gets
// the cell as the master then describes it (its DNS and HTTPS endpoints).
bool WaitReady(const std::string& data, const std::string& master, int agents, int64_t timeout_ms, std::string* why,
               v1::CellInfo* ready) {
  absl::StatusOr<pki::Credential> admin = pki::LoadCredential(AdminCredentials(data));
  if (!admin.ok()) {
    *why = std::string(admin.status().message());
    return false;
  }
  auto stub = v1::Herd::NewStub(rpc::Channel(master, *admin, rpc::MasterIdentity()));
  const int64_t deadline = SteadyNowMs() + timeout_ms;
  while (SteadyNowMs() < deadline) {
    v1::CellInfo info;
    auto ctx = rpc::Context("", 1000);
    ctx->set_wait_for_ready(true);  // wait out (and drive) the connection attempt
    grpc::Status st = stub->GetCell(ctx.get(), v1::GetCellRequest(), &info);
    if (st.ok() && info.machines_up() >= agents) {
      *ready = info;
      return true;
    }
    *why = st.ok() ? absl::StrCat(info.machines_up(), " of ", agents, " agents registered")
                   : absl::StrCat("master not answering: ", st.error_message());
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

std::string Greeting(const UpOptions& o, const std::string& data, const std::string& master, const Slice& slice,
                     const std::string& ha_text, const v1::CellInfo& info) {
  std::string text =
      absl::StrCat("Herd cell '", o.cell, "' is up (pid ", getpid(), ").\n", o.ha ? "  masters " : "  master  ", master,
                   "   data: ", data, "   logs: ", data, "/logs\n", ha_text, "  agents  ");
  for (int i = 0; i < o.agents; ++i) absl::StrAppend(&text, i ? ", " : "", "m", i, " (rack r", i / 2, ")");
  absl::StrAppend(&text, "; each with cpu ", FormatCpu(slice.cpu_millis), ", memory ", FormatBytes(slice.memory_bytes),
                  "\n");
  if (!info.dns().empty()) {
    const std::string& dns = info.dns();
    const std::string port = dns.substr(dns.rfind(':') + 1);
    absl::StrAppend(&text, "  dns     ", dns, " (UDP and TCP; try: dig @", dns.substr(0, dns.rfind(':')), " -p ", port,
                    " hello.alice.", o.cell, ".herd, once examples/hello.yaml runs)\n");
  }
  if (!info.http().empty()) {
    absl::StrAppend(&text, "  ui      https://", info.http(),
                    "/ (web UI; 'herd ui' prints a link that logs your browser in)\n");
    absl::StrAppend(&text, "  metrics https://", info.http(),
                    "/metrics (and each agent's: herd machines --json, field http; docs/monitoring.md)\n");
  }
  absl::StrAppend(&text,
                  "Try:\n  herd submit examples/hello.yaml\n  herd jobs\n  herd status hello\n"
                  "  herd logs hello/0\n  herd machines\n");
  if (master != "127.0.0.1:7070") absl::StrAppend(&text, "(set HERD_MASTER=", master, " first)\n");
  if (AdminCredentials(data) != cli::DefaultCredentialsPath()) {
    absl::StrAppend(&text, "(set HERD_CREDENTIALS=", AdminCredentials(data), " first)\n");
  }
  absl::StrAppend(&text,
                  o.detach ? absl::StrCat("Stop it with: herd down --data ", data, "\n") : "Stop it with Ctrl-C.\n");
  return text;
}

// Until a stop signal: reports any child that exits on its own. It is not
// restarted, so failures stay visible (restart the cell to bring it back) --
// except a replicated master (--ha), which `restart` starts again, as a
// process supervisor would on real machines: it comes back as a follower.
void Supervise(std::vector<Child>& children, Hangup hangup, const std::string& data,
               const std::function<pid_t(const std::string&)>& restart) {
  InstallStopSignalHandlers(hangup);
  while (WaitForStopSignal(500) == 0) {
    int status = 0;
    pid_t pid;
    while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
      for (Child& c : children) {
        if (c.pid != pid) continue;  // else: an orphaned shim, just reaped
        std::fprintf(stderr, "herd up: %s exited (%s %d)", c.name.c_str(), WIFSIGNALED(status) ? "signal" : "code",
                     WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
        c.pid = restart ? restart(c.name) : -1;
        std::fprintf(stderr, c.pid > 0 ? "; started again\n" : "; the rest of the cell keeps running\n");
        if (c.pid > 0) WriteChildren(data, children);
      }
    }
  }
}

// ---- --ha: etcd and replicated masters -------------------------------------

constexpr int kReplicas = 3;

std::string EtcdBinary() {
  if (const char* e = std::getenv("HERD_ETCD"); e && *e) return e;
  for (const char* p : {"/usr/bin/etcd", "/usr/local/bin/etcd"}) {
    if (access(p, X_OK) == 0) return p;
  }
  return "";
}

// The ports of an --ha cell: picked on its first start, kept in
// DATA/ha.ports ("etcd CLIENT PEER" x3, "master PORT" x3), because etcd's
// members remember each other's addresses in their data.
struct HaPorts {
  int etcd_client[kReplicas] = {};
  int etcd_peer[kReplicas] = {};
  int master[kReplicas] = {};
};

absl::StatusOr<HaPorts> LoadOrPickHaPorts(const std::string& data, const std::string& host, int first_master) {
  const std::string path = (fs::path(data) / "ha.ports").string();
  HaPorts p;
  std::ifstream in(path);
  if (in) {
    std::string word;
    for (int i = 0; i < kReplicas; ++i) in >> word >> p.etcd_client[i] >> p.etcd_peer[i];
    for (int i = 0; i < kReplicas; ++i) in >> word >> p.master[i];
    if (in) return p;
    return absl::DataLossError(absl::StrCat(path, " is damaged; remove ", data, " to start afresh"));
  }
  for (int i = 0; i < kReplicas; ++i) {
    p.etcd_client[i] = FreePort(host);
    p.etcd_peer[i] = FreePort(host);
    p.master[i] = first_master > 0 ? first_master + i : FreePort(host);
    if (p.etcd_client[i] == 0 || p.etcd_peer[i] == 0 || p.master[i] == 0) {
      return absl::UnavailableError(absl::StrCat("cannot find free ports on ", host));
    }
  }
  std::ofstream out(path + ".tmp");
  for (int i = 0; i < kReplicas; ++i) out << "etcd " << p.etcd_client[i] << " " << p.etcd_peer[i] << "\n";
  for (int i = 0; i < kReplicas; ++i) out << "master " << p.master[i] << "\n";
  out.close();
  std::error_code ec;
  fs::rename(path + ".tmp", path, ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot write ", path, ": ", ec.message()));
  return p;
}

// TLS for etcd, with a CA of its own (DATA/pki/etcd; the cell's CA signs
// users' credentials, and users must not reach etcd): each member's
// certificate (for its clients and its peers, naming the host's address)
// under DATA/etcd/tls, and the masters' client credential there as
// master.pem. Made once, kept.
std::string EtcdTlsDir(const std::string& data) { return (fs::path(data) / "etcd" / "tls").string(); }

absl::Status EnsureEtcdTls(const std::string& data, const std::string& host) {
  return store::etcd::EnsureTls((fs::path(data) / "pki" / "etcd").string(), EtcdTlsDir(data),
                                std::vector<std::string>(kReplicas, absl::StrCat("IP:", host, ",DNS:localhost")));
}

std::vector<std::string> EtcdArgs(const std::string& data, const std::string& host, const HaPorts& p, int i) {
  std::string cluster;
  for (int j = 0; j < kReplicas; ++j) {
    absl::StrAppend(&cluster, j ? "," : "", "e", j, "=https://", host, ":", p.etcd_peer[j]);
  }
  const std::string client = absl::StrCat("https://", host, ":", p.etcd_client[i]);
  const std::string peer = absl::StrCat("https://", host, ":", p.etcd_peer[i]);
  std::vector<std::string> args = {EtcdBinary(),
                                   "--name",
                                   absl::StrCat("e", i),
                                   "--data-dir",
                                   (fs::path(data) / "etcd" / absl::StrCat("e", i)).string(),
                                   "--listen-client-urls",
                                   client,
                                   "--advertise-client-urls",
                                   client,
                                   "--listen-peer-urls",
                                   peer,
                                   "--initial-advertise-peer-urls",
                                   peer,
                                   "--initial-cluster",
                                   cluster,
                                   "--initial-cluster-state",
                                   "new",
                                   "--initial-cluster-token",
                                   "herd-up",
                                   "--logger",
                                   "zap",
                                   "--log-level",
                                   "warn"};
  for (std::string& f : store::etcd::MemberTlsFlags(EtcdTlsDir(data), i)) args.push_back(std::move(f));
  return args;
}

std::string EtcdUrl(const std::string& host, const HaPorts& p, const std::string& cell) {
  std::string url = "etcd://";
  for (int i = 0; i < kReplicas; ++i) absl::StrAppend(&url, i ? "," : "", host, ":", p.etcd_client[i]);
  return absl::StrCat(url, "/herd/", cell, "/");
}

std::vector<std::string> ReplicaArgs(const UpOptions& o, const std::string& data, const std::string& exe,
                                     const std::string& host, const HaPorts& p, int i) {
  std::vector<std::string> args = {exe,
                                   "master",
                                   "--data",
                                   (fs::path(data) / absl::StrCat("master", i)).string(),
                                   "--credentials",
                                   (fs::path(data) / "master" / "credentials.pem").string(),
                                   "--listen",
                                   absl::StrCat(host, ":", p.master[i]),
                                   "--store",
                                   EtcdUrl(host, p, o.cell),
                                   "--cell",
                                   o.cell,
                                   "--poll-interval",
                                   o.poll_interval,
                                   "--ca",
                                   PkiDir(data),
                                   "--etcd-credentials",
                                   store::etcd::MasterCredentialPath(EtcdTlsDir(data))};
  if (!o.reclaim.empty()) {
    args.push_back("--reclaim");
    args.push_back(o.reclaim);
  }
  args.insert(args.end(), o.master_args.begin(), o.master_args.end());
  return args;
}

// Agents first (they stop their tasks), then the masters, then etcd; each
// gets SIGTERM and a while to finish, then SIGKILL.
int StopRound(const Child& c) {
  if (absl::StartsWith(c.name, "etcd")) return 2;
  return absl::StartsWith(c.name, "master") ? 1 : 0;
}

void StopAll(std::vector<Child>& children) {
  for (int round = 0; round < 3; ++round) {
    auto in_round = [round](const Child& c) { return StopRound(c) == round && c.pid > 0; };
    for (const Child& c : children) {
      if (in_round(c)) kill(c.pid, SIGTERM);
    }
    for (Child& c : children) {
      if (!in_round(c)) continue;
      const int64_t deadline = SteadyNowMs() + 70'000;
      while (waitpid(c.pid, nullptr, WNOHANG) != c.pid && SteadyNowMs() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
      if (kill(c.pid, 0) == 0) {
        kill(c.pid, SIGKILL);
        waitpid(c.pid, nullptr, 0);
      }
      c.pid = -1;
    }
  }
}

// With --detach: forks; the parent waits for the child to report how
// start-up went (on a pipe) and exits with that; the child leaves the
// terminal's session and runs the cell. Returns the pipe's write end in the
// child (-1 without --detach), or the parent's exit code via `exit_code`.
int Detach(const std::string& data, int* exit_code) {
  int ready[2];
  if (pipe2(ready, O_CLOEXEC) != 0) {
    *exit_code = 1;
    return -1;
  }
  pid_t pid = fork();
  if (pid > 0) {
    close(ready[1]);
    char buf[4096];
    ssize_t n = read(ready[0], buf, sizeof(buf) - 1);
    buf[n > 0 ? n : 0] = 0;
    if (n <= 0) {
      std::fprintf(stderr, "herd up: the cell failed to start (see %s/up.log)\n", data.c_str());
      *exit_code = 1;
    } else {
      const bool failed = buf[0] == '!';
      std::fputs(buf + (failed ? 1 : 0), failed ? stderr : stdout);
      *exit_code = failed ? 1 : 0;
    }
    return -1;
  }
  close(ready[0]);
  setsid();
  int fd = open((fs::path(data) / "up.log").c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd >= 0) {
    dup2(fd, 1);
    dup2(fd, 2);
    close(fd);
  }
  int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (null >= 0) {
    dup2(null, 0);
    close(null);
  }
  *exit_code = -1;
  return ready[1];
}

}  // namespace

std::string DefaultUpDir() {
  if (const char* h = std::getenv("HERD_HOME"); h && *h) return h;
  const char* home = std::getenv("HOME");
  return absl::StrCat(home && *home ? home : "/tmp", "/.herd/up");
}

// The flags `herd up` checks before it touches anything.
absl::Status ValidateUp(const UpOptions& o) {
  if (o.agents < 1 || o.agents > 64) return absl::InvalidArgumentError("--agents must be between 1 and 64");
  if (absl::Status st = rpc::ValidateAddress(o.listen); !st.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--listen: ", st.message()));
  }
  if (!o.agent_capacity.empty()) {
    if (absl::StatusOr<ResourceVector> c = ParseResourceList(o.agent_capacity); !c.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--agent-capacity: ", c.status().message()));
    }
  }
  return absl::OkStatus();
}

// --ha: three etcd members and three master replicas (appended to
// `children`); `restart` starts replica "masterN" again for Supervise.
// Returns the masters' addresses, comma-separated, and says where etcd is
// in `ha_text`.
absl::StatusOr<std::string> StartHaCell(const UpOptions& o, const std::string& data, const std::string& exe,
                                        std::vector<Child>* children, std::function<pid_t(const std::string&)>* restart,
                                        std::string* ha_text) {
  const std::string host = o.listen.substr(0, o.listen.rfind(':'));
  int first_port = 0;
  (void)absl::SimpleAtoi(o.listen.substr(o.listen.rfind(':') + 1), &first_port);
  if (EtcdBinary().empty()) {
    return absl::FailedPreconditionError("--ha needs etcd (apt-get install etcd-server; scripts/setup.sh installs it)");
  }
  absl::StatusOr<HaPorts> ports = LoadOrPickHaPorts(data, host, first_port);
  if (!ports.ok()) return ports.status();
  if (absl::Status st = EnsureEtcdTls(data, host); !st.ok()) {
    return absl::Status(st.code(), absl::StrCat("cannot set up etcd's credentials in ", data, ": ", st.message()));
  }
  auto log = [&data](const std::string& name) { return (fs::path(data) / "logs" / (name + ".log")).string(); };
  std::vector<std::string> masters;
  for (int i = 0; i < kReplicas; ++i) {
    children->push_back(
        {absl::StrCat("etcd", i), Spawn(EtcdArgs(data, host, *ports, i), log(absl::StrCat("etcd", i)))});
  }
  for (int i = 0; i < kReplicas; ++i) {
    children->push_back(
        {absl::StrCat("master", i), Spawn(ReplicaArgs(o, data, exe, host, *ports, i), log(absl::StrCat("master", i)))});
    masters.push_back(absl::StrCat(host, ":", ports->master[i]));
  }
  WriteChildren(data, *children);
  *restart = [&o, data, exe, host, p = *ports, log](const std::string& name) -> pid_t {
    int i = -1;
    if (!absl::StartsWith(name, "master") || !absl::SimpleAtoi(name.substr(6), &i) || i < 0 || i >= kReplicas) {
      return -1;
    }
    return Spawn(ReplicaArgs(o, data, exe, host, p, i), log(name));
  };
  *ha_text = absl::StrCat("  etcd    ", EtcdUrl(host, *ports, o.cell), " (TLS; its CA in ", data, "/pki/etcd)\n");
  return absl::StrJoin(masters, ",");
}

int RunUp(const UpOptions& o) {
  if (absl::Status st = ValidateUp(o); !st.ok()) {
    std::fprintf(stderr, "herd up: %s\n", std::string(st.message()).c_str());
    return 2;
  }
  const std::string data = o.data_dir.empty() ? DefaultUpDir() : o.data_dir;
  std::error_code ec;
  fs::create_directories(fs::path(data) / "logs", ec);
  if (ec) {
    std::fprintf(stderr, "herd up: cannot create %s: %s\n", data.c_str(), ec.message().c_str());
    return 1;
  }
  // What the cell's processes print is the operator's, not the tasks'.
  fs::permissions(fs::path(data) / "logs", fs::perms::owner_all, ec);
  if (CellLock::Holder(data) != 0) {  // checked again, atomically, below
    std::fprintf(stderr, "herd up: a cell is already running from %s (pid %d); stop it with 'herd down --data %s'\n",
                 data.c_str(), CellLock::Holder(data), data.c_str());
    return 1;
  }
  int ready_fd = -1;
  if (o.detach) {
    int exit_code = -1;
    ready_fd = Detach(data, &exit_code);
    if (exit_code >= 0) return exit_code;
  }
  // Tells the user (or, detached, the waiting parent) how start-up went.
  auto report = [&](const std::string& text, bool ok) {
    std::string out = ok ? text : "herd up: " + text;
    if (ready_fd >= 0) {
      std::string msg = (ok ? "" : "!") + out;
      (void)!write(ready_fd, msg.data(), msg.size());
      close(ready_fd);
      ready_fd = -1;
    } else {
      std::fputs(out.c_str(), ok ? stdout : stderr);
      std::fflush(stdout);
    }
  };

  absl::StatusOr<CellLock> lock = CellLock::Acquire(data);
  if (!lock.ok()) {
    report(absl::StrCat(lock.status().message(), "\n"), false);
    return 1;
  }
  // A cell killed before it could stop leaves its master and agents behind
  // (its tasks too: the new agents re-adopt those).
  KillLeftoverDaemons(data);

  // Become the subreaper of everything below us: when an agent dies, its
  // task shims (which outlive it on purpose) are reparented here and reaped
  // when they end, rather than lingering as zombies.
  prctl(PR_SET_CHILD_SUBREAPER, 1);
  if (absl::Status st = EnsurePki(o, data); !st.ok()) {
    report(absl::StrCat("cannot set up the cell's credentials in ", data, ": ", st.message(), "\n"), false);
    return 1;
  }
  const std::string exe = SelfExe();
  const Slice slice = SliceMachine(o, data);
  std::vector<Child> children;
  absl::StatusOr<std::string> master;
  std::function<pid_t(const std::string&)> restart;
  std::string ha_text;
  if (o.ha) {
    master = StartHaCell(o, data, exe, &children, &restart, &ha_text);
  } else {
    children.push_back(StartMaster(o, data, exe));
    WriteChildren(data, children);
    master = MasterAddress(o, data, children[0]);
  }
  if (!master.ok()) {
    StopAll(children);
    report(absl::StrCat(master.status().message(), "\n"), false);
    return 1;
  }
  for (Child& c : StartAgents(o, data, exe, *master, slice)) children.push_back(std::move(c));
  WriteChildren(data, children);

  std::string why;
  v1::CellInfo ready;
  if (!WaitReady(data, *master, o.agents, 30'000, &why, &ready)) {
    StopAll(children);
    report(absl::StrCat("the cell did not come up within 30 s: ", why, " (see ", data, "/logs)\n"), false);
    return 1;
  }
  report(Greeting(o, data, *master, slice, ha_text, ready), true);

  Supervise(children, o.detach ? Hangup::kIgnore : Hangup::kStop, data, restart);
  std::fprintf(stderr, "herd up: stopping the cell (tasks are stopped, state stays in %s)\n", data.c_str());
  StopAll(children);
  // What the agents could not stop (or runs no agent knew of).
  if (int left = KillTasks(data); left > 0) {
    std::fprintf(stderr, "herd up: killed %d task processes the agents left\n", left);
  }
  std::remove(ChildrenPath(data).c_str());
  return 0;
}

int RunDown(const std::string& data_dir) {
  const std::string data = data_dir.empty() ? DefaultUpDir() : data_dir;
  const pid_t holder = CellLock::Holder(data);
  if (holder != 0) {
    if (holder > 0) kill(holder, SIGTERM);
    // The cell stops its agents (which stop their tasks) and its master,
    // then exits, which drops the lock.
    const int64_t deadline = SteadyNowMs() + 120'000;
    while (CellLock::Holder(data) != 0 && SteadyNowMs() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    if (CellLock::Holder(data) != 0) {
      std::fprintf(stderr, "herd down: the cell (pid %d) did not stop within 120 s\n", holder);
      return 1;
    }
  }
  // Whatever a killed cell left: its master and agents, and their tasks.
  int leftovers = 0;
  for (const ChildRecord& c : ReadChildren(data)) {
    if (!agent::IsRunning(c.id)) continue;
    kill(c.id.pid, SIGKILL);
    ++leftovers;
  }
  leftovers += KillTasks(data);
  std::vector<std::pair<std::string, ProcessId>> alive = CellProcesses(data);
  if (!alive.empty()) {
    std::string list;
    for (const auto& [what, id] : alive) absl::StrAppend(&list, list.empty() ? "" : ", ", what, " (pid ", id.pid, ")");
    std::fprintf(stderr, "herd down: processes of the cell in %s survive SIGKILL: %s\n", data.c_str(), list.c_str());
    return 1;
  }
  std::remove(ChildrenPath(data).c_str());
  if (holder == 0 && leftovers == 0) {
    std::fprintf(stderr, "herd down: no cell is running from %s\n", data.c_str());
    return 1;
  }
  if (holder == 0) {
    std::printf("no cell was running from %s; stopped %d processes a killed cell left (state kept)\n", data.c_str(),
                leftovers);
  } else {
    std::printf("cell stopped (state kept in %s)\n", data.c_str());
  }
  return 0;
}

}  // namespace herd
