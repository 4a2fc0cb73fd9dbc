// Test-only harness for the integration tests (tests/integration, later
// tests/fault): runs a real cell, a master and agents as child processes of
// the test, and drives it with the real `herd` CLI.
//
//   Cell cell;                                      // a per-test temp dir
//   ASSERT_TRUE(cell.StartMaster().ok());
//   ASSERT_TRUE(cell.StartAgents(3).ok());          // m1..m3 in racks r1..r3, all UP
//   RunResult r = cell.Herd({"submit", spec});      // exit code, stdout, stderr
//   absl::StatusOr<v1::ListTasksResponse> t = cell.Tasks("web");  // --json, parsed
//   ASSERT_TRUE(Eventually([&] { ... }, 10s));
//   cell.StopAgent("m1", SIGKILL);  cell.StopMaster(SIGKILL);  cell.StartMaster();
//
// Every process a Cell starts is gone when it is destroyed, also when the
// test failed: the master and agents (each in its own process group), and
// every task process of its agents (found through the agents' --root
// directories in /proc, since tasks run under herd-shim in sessions of their
// own and outlive their agent on purpose). The test process becomes a child
// subreaper so that shims orphaned by a killed agent are reaped, not left as
// zombies. The temp dir is removed when the test passed and kept (its path
// and the tails of the logs printed) when it failed.
#pragma once

#include <sys/types.h>

#include <csignal>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "pki/pki.h"
#include "herd/v1/api.pb.h"
#include "testing/eventually.h"

namespace herd::harness {

using namespace std::chrono_literals;
using Ms = std::chrono::milliseconds;

// $HERD_BINARY (set by herd_test()), else `herd` beside $HERD_BIN_DIR.
std::string HerdBinary();
// Another program built beside herd (herd-example-framework, herd-shim):
// NAME in $HERD_BIN_DIR, else beside $HERD_BINARY, else NAME on the PATH.
std::string BinaryBesideHerd(const std::string& name);
// $HERD_SOURCE_DIR: the source tree (for examples/).
std::string SourceDir();

// Waiting for an event (src/testing/eventually.h): the timeout only bounds a
// failure.
using herd::testing::Eventually;

// ---- Processes ----

struct RunResult {
  int exit_code = -1;  // -1: killed by a signal or timed out
  int signal = 0;
  bool timed_out = false;
  std::string out;
  std::string err;
  // "exit 1; stdout: ...; stderr: ..." for assertion messages.
  std::string Describe() const;
};

// Runs argv to completion (in its own process group; killed at `timeout`),
// capturing stdout and stderr.
RunResult Run(const std::vector<std::string>& argv, Ms timeout = 60s);

// A long-running child of the test in its own process group, stdout and
// stderr appended to a log file. Killed with SIGKILL when destroyed.
class Child {
 public:
  static absl::StatusOr<std::unique_ptr<Child>> Spawn(std::string name, std::vector<std::string> argv,
                                                      std::string log_path);
  ~Child();
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  const std::string& name() const { return name_; }
  pid_t pid() const { return pid_; }
  const std::string& log_path() const { return log_path_; }
  const std::vector<std::string>& argv() const { return argv_; }
  // Not yet exited (or exited and not yet reaped).
  bool Running();
  // Sends `sig` to the child's process group.
  void Signal(int sig);
  // Waits for it to exit; the raw wait status, or nullopt on timeout.
  std::optional<int> Wait(Ms timeout);
  // SIGKILL to the group, then waits.
  void Kill();
  // SIGTERM, then SIGKILL if it has not exited within `timeout`. True if it
  // exited on its own with code 0.
  bool Stop(Ms timeout = 10s);

 private:
  Child(std::string name, std::vector<std::string> argv, std::string log_path, pid_t pid)
      : name_(std::move(name)), argv_(std::move(argv)), log_path_(std::move(log_path)), pid_(pid) {}
  std::string name_;
  std::vector<std::string> argv_;
  std::string log_path_;
  pid_t pid_;
  std::optional<int> status_;
};

// What /proc says of one process.
struct ProcInfo {
  pid_t pid = 0;
  pid_t ppid = 0;
  pid_t pgid = 0;
  pid_t sid = 0;
  char state = '?';         // R, S, D, Z, ...
  uint64_t start_time = 0;  // field 22 of /proc/PID/stat: identifies the process across pid reuse
  std::vector<std::string> cmdline;
  std::string cwd;
};
std::optional<ProcInfo> ReadProc(pid_t pid);
// Every pid in /proc.
std::vector<pid_t> ListPids();
// The process exists and is not a zombie.
bool ProcessAlive(pid_t pid);
// The same process (pid and start time) is alive: false once it ended, even
// if the pid was reused since.
bool ProcessAlive(const ProcInfo& p);
// The value of `key` in /proc/PID/environ, if readable and set.
std::optional<std::string> ProcEnv(pid_t pid, const std::string& key);

// Live (non-zombie) processes that belong to an agent root: shims whose
// command line names a path under `root`, every process in their sessions,
// and any process whose working directory is under `root`.
std::vector<ProcInfo> ProcessesUnder(const std::string& root);
// SIGKILLs them until none is left (or `timeout`); true if none is left.
bool KillProcessesUnder(const std::string& root, Ms timeout = 10s);

// ---- Files ----

// A fresh directory for the running test. Removed when destroyed if the test
// passed; kept, and its path printed, if it failed.
class TestDir {
 public:
  TestDir();
  ~TestDir();
  TestDir(const TestDir&) = delete;
  TestDir& operator=(const TestDir&) = delete;
  const std::string& path() const { return path_; }
  // path()/name (not created).
  std::string Sub(const std::string& name) const;
  // Writes `contents` to path()/name; returns the path.
  std::string Write(const std::string& name, const std::string& contents) const;
  // Called with the directory's path when it is kept, before the message.
  void OnKeep(std::function<void()> fn) { on_keep_ = std::move(fn); }

 private:
  std::string path_;
  std::function<void()> on_keep_;
};

std::string ReadFileOrEmpty(const std::string& path);

// ---- JSON ----

// Parses `herd ... --json` output strictly (unknown fields are an error).
absl::Status ParseJson(const std::string& json, google::protobuf::Message* out);

template <typename M>
absl::StatusOr<M> ParseJsonAs(const std::string& json) {
  M m;
  if (absl::Status st = ParseJson(json, &m); !st.ok()) return st;
  return m;
}

// ---- A cell ----

class Cell {
 public:
  struct Options {
    std::string poll_interval = "200ms";
    int down_after = 3;
    std::string capacity = "cpu=2,memory=2Gi";
    std::string user = "alice";  // whose credential Herd() presents
    // Users whose credentials are admin ones (the rest are plain users).
    std::vector<std::string> admins = {"alice"};
    std::vector<std::string> master_flags;  // extra `herd master` flags
    // Extra `herd agent` flags, by agent name (e.g. "m1" -> {"--metrics", ...}).
    std::map<std::string, std::vector<std::string>> agent_flags;
  };

  Cell();
  explicit Cell(Options options);
  // Kills everything it started, then the temp dir goes (or stays).
  ~Cell();
  Cell(const Cell&) = delete;
  Cell& operator=(const Cell&) = delete;

  const TestDir& dir() const { return dir_; }
  const Options& options() const { return options_; }

  // Where a process of the cell runs (the fault suite puts each in a network
  // namespace of its own, harness/netns.h): `wrapper` goes before its argv
  // (e.g. nsenter --net=/run/netns/NS --) and it listens on `host`, which
  // an agent also gives the master as its address.
  struct Site {
    std::vector<std::string> wrapper;
    std::string host = "127.0.0.1";
  };
  // Places replica I (process "master<I>", StartReplicas) or agent NAME;
  // takes effect at its next start. Processes not placed run as they are,
  // on 127.0.0.1.
  void Place(const std::string& process, Site site) { sites_[process] = std::move(site); }

  // Starts the master on --data dir()/master. The first start listens on a
  // free port; restarts reuse it. Returns once it answers `herd cell`.
  absl::Status StartMaster();
  // Signals the master (default SIGKILL) and waits for it to exit.
  void StopMaster(int sig = SIGKILL);

  // Replicated masters instead (issue #12): `n` masters on `store_url`
  // (etcd://...), each with its own data directory and fixed port, sharing
  // the master credential. master_address() becomes the list of them all.
  // Returns once the CLI gets an answer through the list (a leader serves).
  absl::Status StartReplicas(int n, const std::string& store_url, const std::vector<std::string>& flags = {});
  // Starts replica i again (same port, same data directory).
  absl::Status RestartReplica(int i);
  void StopReplica(int i, int sig = SIGKILL);
  Child* replica(int i) { return replicas_[i].child.get(); }
  int replica_count() const { return static_cast<int>(replicas_.size()); }
  // The replica that says it leads (asked one by one: a follower's idea of
  // the leader may be a moment old); -1 if none does.
  int LeaderIndex() const;

  // Waits until all `n` tasks of `job` are RUNNING and active; their pids by
  // index (fails the test, naming the tasks, if they are not within timeout).
  std::map<int, int64_t> WaitRunning(const std::string& job, int n, Ms timeout = 120s) const;
  // The tasks of `job` once `pred` holds for them; if it never does within
  // `timeout`, the last seen, with a test failure naming `what` and the
  // cell's log tails.
  v1::ListTasksResponse WaitTasks(const std::string& job, const std::function<bool(const v1::ListTasksResponse&)>& pred,
                                  const std::string& what, Ms timeout = 60s) const;
  // WaitTasks until `job` has exactly `n` tasks, all RUNNING with a process
  // (phase ACTIVE and a pid).
  v1::ListTasksResponse WaitActive(const std::string& job, int n, Ms timeout = 60s) const;
  Child* master() { return master_.get(); }
  const std::string& master_address() const { return master_address_; }

  // Starts agent `name` (root dir()/agents/NAME, --attr rack=RACK). If
  // `wait_up`, returns once the master lists the machine UP at the agent's
  // current address.
  absl::Status StartAgent(const std::string& name, const std::string& rack, bool wait_up = true);
  // Starts m1..mN in racks r1..rN and waits until all are UP.
  absl::Status StartAgents(int n);
  // Signals the agent (default SIGKILL) and waits for it to exit. Its tasks
  // stay (that is the design); Shutdown() or the destructor kills them.
  void StopAgent(const std::string& name, int sig = SIGKILL);
  // Same --name and --root as before. A `binary` other than "" runs the
  // agent from that herd binary from now on (an in-place upgrade; herd-shim
  // is looked for next to it).
  absl::Status RestartAgent(const std::string& name, bool wait_up = true, const std::string& binary = "");
  Child* agent(const std::string& name);
  std::string AgentRoot(const std::string& name) const;
  // Processes under `root` (an agent the test started itself) are killed
  // with the cell's own (Shutdown).
  void TrackRoot(const std::string& root) { roots_.push_back(root); }
  std::vector<std::string> AgentNames() const;

  // Starts `herd scheduler --master ADDR --name NAME flags...` (log in
  // logs/NAME.log, appended across restarts). Returns at once: it follows the
  // master on its own. A name may be started again once it has stopped.
  absl::Status StartScheduler(const std::string& name, const std::vector<std::string>& flags = {});
  // Signals it (default SIGKILL) and waits for it to exit.
  void StopScheduler(const std::string& name, int sig = SIGKILL);
  Child* scheduler(const std::string& name);
  std::string SchedulerLog(const std::string& name) const { return dir_.Sub("logs/" + name + ".log"); }

  // The cell's PKI (made by the constructor): its CA in dir()/pki, and a
  // credential file per identity, issued on first use.
  std::string CaDir() const { return dir_.Sub("pki"); }
  // USER's credential (an admin one if USER is in options().admins).
  std::string UserCredential(const std::string& user) const;
  std::string MachineCredential(const std::string& machine) const;
  // Issues a credential for any identity into dir()/pki/FILE (for attacks:
  // a user posing as a machine, a machine's credential used elsewhere).
  std::string IssueCredential(const pki::Subject& who, const std::string& file) const;

  // `herd --master ADDR --credentials <USER's> args...` (USER =
  // options().user).
  // (args may start with "--master ADDR" to talk to one replica only.)
  RunResult Herd(const std::vector<std::string>& args, Ms timeout = 30s) const;
  RunResult HerdAs(const std::string& user, const std::vector<std::string>& args, Ms timeout = 30s) const;
  // `herd --master ADDR --credentials FILE args...`.
  RunResult HerdWith(const std::string& credentials, const std::vector<std::string>& args, Ms timeout = 30s) const;
  // `herd ... args... --json`, parsed into M; an error if it exits non-zero.
  template <typename M>
  absl::StatusOr<M> HerdJson(const std::vector<std::string>& args) const {
    std::vector<std::string> a = args;
    a.push_back("--json");
    RunResult r = Herd(a);
    if (r.exit_code != 0) return absl::InternalError("herd " + Join(a) + ": " + r.Describe());
    return ParseJsonAs<M>(r.out);
  }
  absl::StatusOr<v1::ListTasksResponse> Tasks(const std::string& job) const;
  absl::StatusOr<v1::ListMachinesResponse> Machines() const;
  absl::StatusOr<v1::ListJobsResponse> Jobs(bool include_dead = false) const;
  // The live job `id` ("user/name") as `herd jobs` lists it; NOT_FOUND if absent.
  absl::StatusOr<v1::Job> Job(const std::string& id) const;
  // The machine as the master lists it.
  absl::StatusOr<v1::Machine> Machine(const std::string& name) const;

  // Writes a job spec (or any file) into the test dir; returns its path.
  std::string WriteSpec(const std::string& name, const std::string& yaml) const { return dir_.Write(name, yaml); }

  // Kills the agents' tasks, the agents and the master. Idempotent.
  void Shutdown();
  // The last lines of every log, for failure messages.
  std::string LogTails(size_t bytes = 3000) const;

  static std::string Join(const std::vector<std::string>& v);

 private:
  struct AgentSlot {
    std::string rack;
    std::string binary;  // "" = HerdBinary()
    std::unique_ptr<Child> child;
    std::string address;  // as registered
  };
  absl::Status WaitAgentUp(const std::string& name, Ms timeout);

  Options options_;
  TestDir dir_;
  std::unique_ptr<Child> master_;
  std::string master_address_;
  int master_starts_ = 0;
  std::map<std::string, AgentSlot> agents_;
  std::map<std::string, std::unique_ptr<Child>> schedulers_;
  std::vector<std::string> roots_;  // every agent root ever used
  struct Replica {
    std::unique_ptr<Child> child;
    std::string address;
    std::vector<std::string> argv;
  };
  std::vector<Replica> replicas_;
  std::map<std::string, Site> sites_;  // by process name (Place)
  const Site& SiteOf(const std::string& process) const;
};

// A package archive made in `dir`: NAME.tar holding bin/hello.txt = `text`.
struct Archive {
  std::string path;
  std::string sha256;  // lower-case hex
};
Archive MakeArchive(const TestDir& dir, const std::string& name, const std::string& text);

// A shared cell's tenants (issue #33's attacks): alice (whose credential
// Herd() presents), bob and carol are plain users; root is the admin.
Cell::Options TenantCellOptions(std::vector<std::string> master_flags = {});

// Task helpers over a ListTasksResponse.
int CountTasks(const v1::ListTasksResponse& r, v1::Task::State state, v1::Task::Phase phase = v1::Task::PHASE_UNSPECIFIED);
// Exactly `n` tasks, each RUNNING with a process (phase ACTIVE and a pid).
bool AllActive(const v1::ListTasksResponse& r, int n);
// "0:RUNNING/ACTIVE@m1#1 pid 123; 1:..." for assertion messages.
std::string Summarize(const v1::ListTasksResponse& r);

}  // namespace herd::harness
