#include "agent/supervisor/supervisor.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/file.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/time.h"
#include "agent/runtime/shim_protocol.h"
#include "agent/supervisor/restart_policy.h"
#include "base/check.h"
#include "base/log.h"
#include "base/status.h"
#include "base/errno_status.h"
#include "base/files.h"

namespace herd::agent {
namespace {

constexpr uint64_t kWakeToken = 1;
constexpr uint64_t kInotifyToken = 2;
// While a started shim has not reported its task, look for task.pid at least
// this often (inotify normally reports it at once).
constexpr int64_t kStartingPollMs = 1'000;
// The loop wakes at least this often.
constexpr int64_t kMaxSleepMs = 60'000;

std::vector<std::string> ListDir(const std::string& path) {
  std::vector<std::string> names;
  DIR* dir = opendir(path.c_str());
  if (dir == nullptr) return names;
  while (struct dirent* e = readdir(dir)) {
    std::string name = e->d_name;
    if (name != "." && name != "..") names.push_back(std::move(name));
  }
  closedir(dir);
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace

// One run: the spec, its persisted state and the live handles of its
// current attempt.
struct Supervisor::Run {
  explicit Run(std::string path) : dir(std::move(path)) {}

  v1::TaskRun spec;
  RunDir dir;
  RunState state;
  uint64_t token = 0;           // epoll key of the shim's pidfd
  bool on_disk = false;         // directory and run.pb written
  bool invalid = false;         // cannot be started at all (bad run id)
  bool spawn_pending = false;   // STARTING, shim not spawned yet
  Fd shim_pidfd;                // valid while the current shim runs
  ProcessId task;               // once the shim reported it
  int watch = -1;               // inotify watch on dir
  int64_t attempt_mono_ms = 0;  // monotonic start of the attempt (0: recovered)
  int64_t backoff_until_mono_ms = 0;
  int64_t kill_at_mono_ms = 0;  // when stopping: SIGKILL then
  bool sigterm_sent = false;
  bool sigkill_sent = false;
  // An extension is not ready for the attempt yet: ask it again then.
  int64_t prepare_retry_mono_ms = 0;
  // The agent ended the current attempt (KillAttempt): why, and whether the
  // run is evicted rather than restarted.
  std::string kill_reason;
  bool evict = false;
};

class Supervisor::Control final : public SupervisorControl {
 public:
  explicit Control(Supervisor* s) : s_(s) {}
  void KillAttempt(const std::string& run_id, std::string reason, bool evict) override {
    Push({run_id, std::move(reason), evict});
  }
  void Retry() override { Push({}); }
  void Changed() override { Push({"", "", false}); }

 private:
  void Push(Action a) {
    {
      absl::MutexLock l(&s_->actions_mu_);
      s_->actions_.push_back(std::move(a));
    }
    s_->Wake();
  }
  Supervisor* const s_;
};

Supervisor::Supervisor(Options options)
    : options_(std::move(options)), started_ms_(options_.clock->NowMs()), control_(std::make_unique<Control>(this)) {}

absl::StatusOr<std::unique_ptr<Supervisor>> Supervisor::Create(Options options) {
  if (options.root_dir.empty()) return absl::InvalidArgumentError("Supervisor needs a root_dir");
  // Shims get the run directory as an argument but run elsewhere.
  std::error_code ec;
  options.root_dir = std::filesystem::absolute(options.root_dir, ec).lexically_normal().string();
  if (ec) return absl::InvalidArgumentError("bad root_dir: " + ec.message());
  while (options.root_dir.size() > 1 && options.root_dir.back() == '/') options.root_dir.pop_back();
  if (options.shim_path.empty()) options.shim_path = DefaultShimPath();
  if (access(options.shim_path.c_str(), X_OK) != 0) {
    return absl::FailedPreconditionError(
        ErrnoToStatus(errno, absl::StrCat("herd-shim not executable at ", options.shim_path)).message());
  }
  if (options.clock == nullptr) options.clock = RealClock::Get();
  std::unique_ptr<Supervisor> s(new Supervisor(std::move(options)));
  HERD_RETURN_IF_ERROR(s->Init());
  return s;
}

absl::Status Supervisor::Init() {
  HERD_RETURN_IF_ERROR(MakeDir(options_.root_dir, 0711));
  // Tasks pass through runs/ to their sandboxes but cannot list it (run ids
  // name other users' jobs); an older agent made it 0755.
  HERD_RETURN_IF_ERROR(MakeDir(options_.root_dir + "/runs", 0711));
  if (chmod((options_.root_dir + "/runs").c_str(), 0711) != 0) {
    return ErrnoToStatus(errno, absl::StrCat("chmod ", options_.root_dir, "/runs"));
  }
  if (geteuid() == 0) {
    // Tasks under their own uids reach their sandboxes and packages by path
    // as themselves: every directory above them must let others pass (o+x).
    std::string dir = std::filesystem::absolute(options_.root_dir).lexically_normal().string();
    while (!dir.empty() && dir != "/") {
      struct stat st;
      if (stat(dir.c_str(), &st) == 0 && (st.st_mode & S_IXOTH) == 0) {
        HERD_LOG_WARN("{} is mode {:o}: tasks running as their own uids start in their sandboxes but cannot "
                      "reach them or their packages by path ($HERD_TASK_DIR, $HERD_PACKAGE_*); give it o+x "
                      "(e.g. chmod 0711)", dir, st.st_mode & 07777);
        break;
      }
      dir = dir.substr(0, dir.rfind('/'));
    }
  }
  if (absl::StatusOr<std::string> boot = ReadFile(shim::kBootIdPath); boot.ok()) {
    boot_id_ = std::string(absl::StripAsciiWhitespace(*boot));
  }
  // The lease a previous agent held on this boot still stands (its shims
  // go by it); one from an earlier boot means nothing (CLOCK_MONOTONIC
  // started over).
  if (absl::StatusOr<std::string> text = ReadFile(LeasePath()); text.ok()) {
    shim::Lease lease;
    if (shim::ParseLease(text->c_str(), &lease) && lease.boot_id == boot_id_) {
      absl::MutexLock l(&mu_);
      lease_deadline_ms_ = lease.deadline_ms;
    }
  }
  std::string lock_path = options_.root_dir + "/supervisor.lock";
  lock_fd_.Reset(open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644));
  if (!lock_fd_.valid()) return ErrnoToStatus(errno, "open " + lock_path);
  if (flock(lock_fd_.get(), LOCK_EX | LOCK_NB) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("another agent supervises ", options_.root_dir, " (", lock_path, " is locked)"));
  }
  epoll_fd_.Reset(epoll_create1(EPOLL_CLOEXEC));
  wake_fd_.Reset(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  inotify_fd_.Reset(inotify_init1(IN_NONBLOCK | IN_CLOEXEC));
  if (!epoll_fd_.valid() || !wake_fd_.valid() || !inotify_fd_.valid()) return ErrnoToStatus(errno, "epoll/eventfd/inotify");
  for (auto [fd, token] : {std::pair{wake_fd_.get(), kWakeToken}, std::pair{inotify_fd_.get(), kInotifyToken}}) {
    struct epoll_event ev = {};
    ev.events = EPOLLIN;
    ev.data.u64 = token;
    if (epoll_ctl(epoll_fd_.get(), EPOLL_CTL_ADD, fd, &ev) != 0) return ErrnoToStatus(errno, "epoll_ctl");
  }
  for (const auto& ext : options_.extensions) {
    if (absl::Status st = ext->Init(control_.get()); !st.ok()) {
      return absl::Status(st.code(), absl::StrCat(ext->name(), ": ", st.message()));
    }
  }
  {
    absl::MutexLock l(&mu_);
    for (const std::string& name : ListDir(options_.root_dir + "/runs")) {
      if (!ValidateRunId(name).ok()) continue;
      RecoverRunLocked(name);
    }
    HERD_LOG_INFO("supervisor on {}: recovered {} run(s)", options_.root_dir, runs_.size());
    next_gc_mono_ms_ = options_.clock->MonotonicMs();
  }
  loop_ = std::thread([this] { Loop(); });
  return absl::OkStatus();
}

Supervisor::~Supervisor() {
  {
    absl::MutexLock l(&mu_);
    stopping_ = true;
  }
  Wake();
  if (loop_.joinable()) loop_.join();
  for (const auto& ext : options_.extensions) ext->Shutdown();
  absl::MutexLock l(&mu_);
  for (auto& [id, run] : runs_) PersistLocked(*run);
}

RunView Supervisor::ViewOf(const Run& run) const {
  return RunView{run.spec, run.dir, run.state.phase, run.task, run.state.desired};
}

std::string Supervisor::RunPath(absl::string_view run_id) const {
  return absl::StrCat(options_.root_dir, "/runs/", run_id);
}

int64_t Supervisor::GraceMs(const Run& run) const {
  return run.spec.grace_period_ms() > 0 ? run.spec.grace_period_ms() : options_.default_grace_period_ms;
}

// ---- The lease (at-most-once runs) ---------------------------------------

std::string Supervisor::LeasePath() const { return absl::StrCat(options_.root_dir, "/", shim::kLeaseFile); }

void Supervisor::RenewLease(int64_t contact_age_ms, int64_t lease_ms) {
  if (lease_ms <= 0) return;
  // CLOCK_MONOTONIC, whatever options_.clock is: the shims compare it.
  const int64_t now = SteadyNowMs();
  const int64_t contact = now - std::max<int64_t>(0, contact_age_ms);
  const int64_t deadline = contact + lease_ms;
  absl::MutexLock w(&lease_write_mu_);
  absl::Status st = WriteFileAtomic(
      LeasePath(), absl::StrCat(deadline, " ", contact, " ", boot_id_.empty() ? "-" : boot_id_, "\n"));
  if (!st.ok()) {
    // The shims go by the file: so does the supervisor.
    if (!lease_write_warned_) HERD_LOG_ERROR("cannot renew the lease of at-most-once tasks: {}", st.ToString());
    lease_write_warned_ = true;
    return;
  }
  lease_write_warned_ = false;
  absl::MutexLock l(&mu_);
  const bool was_valid = now < lease_deadline_ms_;
  lease_deadline_ms_ = deadline;
  if (!was_valid && now < deadline) {
    bool held = false;
    for (const auto& [id, run] : runs_) held |= run->spec.at_most_once();
    if (held) {
      HERD_LOG_INFO("the master renewed the lease: at-most-once runs may start");
      Wake();
    }
  }
}

bool Supervisor::LeaseValid() const {
  absl::MutexLock l(&mu_);
  return SteadyNowMs() < lease_deadline_ms_;
}

bool Supervisor::HeldForLeaseLocked(const Run& run, int64_t steady_now_ms) const {
  return run.spec.at_most_once() && steady_now_ms >= lease_deadline_ms_;
}

void Supervisor::SayHeldForLeaseLocked(Run& run) {
  // A run stopped for the lease already says so (AttemptEndedLocked).
  if (run.state.phase != v1::Task::STARTING) return;
  SayWaitingLocked(
      run, lease_deadline_ms_ == 0
               ? "waiting: at-most-once, and no lease from the master yet; starts once a poll renews it"
               : "waiting: at-most-once, and the lease from the master has expired; starts once a poll renews it");
}

void Supervisor::SayWaitingLocked(Run& run, std::string message) {
  if (run.state.message == message) return;
  HERD_LOG_INFO("run {}: {}", run.spec.run_id(), message);
  run.state.message = std::move(message);
  PersistLocked(run);
  ChangedLocked();
}

void Supervisor::Wake() {
  uint64_t one = 1;
  (void)!write(wake_fd_.get(), &one, sizeof(one));
}

void Supervisor::ChangedLocked() {
  ++version_;
  changed_.SignalAll();
}

void Supervisor::PersistLocked(const Run& run) {
  if (!run.on_disk) return;
  absl::Status st = run.dir.WriteState(run.state);
  if (!st.ok()) HERD_LOG_ERROR("run {}: cannot persist state: {}", run.spec.run_id(), st.ToString());
}

// ---- Recovery ----------------------------------------------------------

void Supervisor::RecoverRunLocked(const std::string& run_id) {
  auto run = std::make_unique<Run>(RunPath(run_id));
  absl::StatusOr<v1::TaskRun> spec = run->dir.ReadSpec();
  if (!spec.ok()) {
    HERD_LOG_WARN("run dir {} has no readable spec ({}); leaving it to retention", run_id, spec.status().ToString());
    return;
  }
  absl::StatusOr<RunState> state = run->dir.ReadState();
  if (state.ok() && state->removed) return;  // only logs remain
  if (!state.ok() && !absl::IsNotFound(state.status())) {
    HERD_LOG_WARN("run {}: unreadable state ({}); treating it as starting", run_id, state.status().ToString());
  }
  run->spec = *std::move(spec);
  run->spec.set_run_id(run_id);
  run->state = state.ok() ? *state : RunState{};
  run->on_disk = true;
  run->token = next_token_++;
  run->watch = inotify_add_watch(inotify_fd_.get(), run->dir.path().c_str(), IN_MOVED_TO);
  if (run->watch >= 0) watch_to_run_[run->watch] = run_id;
  Run& r = *run;
  runs_[run_id] = std::move(run);
  for (const auto& ext : options_.extensions) ext->Recovered(ViewOf(r));
  const int64_t now = options_.clock->MonotonicMs();
  if (!r.state.desired) r.kill_at_mono_ms = now + GraceMs(r);  // the stop starts over

  if (r.state.terminal) {
    r.state.phase = v1::Task::EXITED;
    return;
  }
  if (r.state.phase == v1::Task::BACKOFF) {
    // The backoff starts over: we do not know how much of it had passed.
    r.backoff_until_mono_ms = now + r.state.backoff_ms;
    return;
  }
  // STARTING, ACTIVE or STOPPING: an attempt was (being) started.
  absl::StatusOr<ExitStatus> exit = ReadExitFile(r.dir.path());
  absl::StatusOr<TaskPidRecord> pids = ReadTaskPidFile(r.dir.path());
  ProcessId shim = pids.ok() ? pids->shim : r.state.shim;
  if (!exit.ok() && shim.known()) {
    absl::StatusOr<Fd> pidfd = PidfdOpenChecked(shim);
    if (pidfd.ok()) {
      // The shim still runs (or has just exited; the pidfd then reports it).
      r.state.shim = shim;
      if (pids.ok()) r.task = pids->task;
      if (r.state.phase != v1::Task::STOPPING) {
        r.state.phase = r.task.known() ? v1::Task::ACTIVE : v1::Task::STARTING;
      }
      WatchShimLocked(r, *std::move(pidfd));
      HERD_LOG_INFO("run {}: adopted shim {} (task {})", run_id, shim.pid, r.task.pid);
      if (r.task.known()) {
        for (const auto& ext : options_.extensions) ext->Started(ViewOf(r), /*recovered=*/true);
      }
      return;
    }
    exit = ReadExitFile(r.dir.path());  // it may have exited just now
  }
  if (exit.ok()) {
    if (absl::StatusOr<Fd> pidfd = PidfdOpenChecked(shim); pidfd.ok()) ReapIfChild(pidfd->get());
    HERD_LOG_INFO("run {}: ended while no agent ran: {}", run_id, exit->Describe());
    AttemptEndedLocked(r, *exit);
    return;
  }
  if (!shim.known()) {
    // The agent died before it spawned the shim: start the attempt again.
    r.state.phase = v1::Task::STARTING;
    r.spawn_pending = true;
    return;
  }
  ExitStatus lost;
  lost.kind = ExitStatus::Kind::kFailed;
  lost.exit_code = -1;
  if (pids.ok() && IsRunning(pids->task)) {
    // The task outlived its shim, so nobody can learn its exit status: end it.
    r.task = pids->task;
    KillAllLocked(r);
    lost.message = "herd-shim died; task killed (exit status unknowable)";
  } else {
    lost.message = "lost: herd-shim and task gone without an exit record (machine restarted?)";
  }
  HERD_LOG_WARN("run {}: {}", run_id, lost.message);
  AttemptEndedLocked(r, lost);
}

// ---- Public API --------------------------------------------------------

void Supervisor::SetDesired(const std::vector<v1::TaskRun>& desired) {
  absl::MutexLock l(&mu_);
  bool changed = false;
  absl::flat_hash_set<std::string> wanted;
  for (const v1::TaskRun& spec : desired) {
    wanted.insert(spec.run_id());
    auto it = runs_.find(spec.run_id());
    if (it != runs_.end()) {
      // Known: never restarted by a repeated call; an update may change it
      // in place.
      if (spec.job_version() != it->second->spec.job_version()) changed |= UpdateInPlaceLocked(*it->second, spec);
      continue;
    }
    auto run = std::make_unique<Run>(RunPath(spec.run_id()));
    run->spec = spec;
    if (spec.alloc() && spec.argv().empty()) {
      // An alloc runs nothing of its own: a placeholder holds its cgroup.
      run->spec.add_argv(options_.shim_path);
      run->spec.add_argv(std::string(shim::kOptPause));
    }
    run->token = next_token_++;
    run->state.phase = v1::Task::STARTING;
    if (absl::Status st = ValidateRunId(spec.run_id()); !st.ok()) {
      run->invalid = true;
      run->state.message = std::string(st.message());
    } else if (run->spec.argv().empty()) {
      run->invalid = true;
      run->state.message = "empty argv";
    }
    if (run->invalid) {
      run->state.phase = v1::Task::EXITED;
      run->state.terminal = true;
      run->state.exit_code = -1;
    } else {
      run->spawn_pending = true;
    }
    runs_[spec.run_id()] = std::move(run);
    changed = true;
  }
  std::vector<std::string> to_stop;
  for (auto& [id, run] : runs_) {
    if (run->state.desired && !wanted.contains(id)) to_stop.push_back(id);
  }
  for (const std::string& id : to_stop) {
    Run& run = *runs_[id];
    run.state.desired = false;
    changed = true;
    if (!run.shim_pidfd.valid()) {
      RemoveLocked(id);  // nothing runs: forget it now
      continue;
    }
    run.state.phase = v1::Task::STOPPING;
    run.kill_at_mono_ms = options_.clock->MonotonicMs() + GraceMs(run);
    PersistLocked(run);
  }
  if (changed) {
    ChangedLocked();
    Wake();
  }
}

bool Supervisor::UpdateInPlaceLocked(Run& run, const v1::TaskRun& spec) {
  v1::TaskRun& s = run.spec;
  HERD_LOG_INFO("run {}: updated in place to job version {}", s.run_id(), spec.job_version());
  *s.mutable_resources() = spec.resources();
  s.set_priority(spec.priority());
  s.set_grace_period_ms(spec.grace_period_ms());
  *s.mutable_restart() = spec.restart();
  s.set_job_version(spec.job_version());
  if (run.on_disk) {
    if (absl::Status st = run.dir.WriteSpec(s); !st.ok()) {
      HERD_LOG_ERROR("run {}: cannot persist its updated spec: {}", s.run_id(), st.ToString());
    }
  }
  RunView view = ViewOf(run);
  for (const auto& ext : options_.extensions) ext->Updated(view);
  return true;
}

std::vector<v1::RunStatus> Supervisor::Observe(uint64_t* version) const {
  absl::MutexLock l(&mu_);
  std::vector<v1::RunStatus> out;
  out.reserve(runs_.size());
  for (const auto& [id, run] : runs_) out.push_back(StatusOf(*run));
  if (version != nullptr) *version = version_;
  return out;
}

v1::RunStatus Supervisor::StatusOf(const Run& run) const {
  v1::RunStatus s;
  *s.mutable_ref() = run.spec.ref();
  s.set_run_id(run.spec.run_id());
  s.set_phase(run.state.phase);
  if (run.shim_pidfd.valid() && run.task.known()) s.set_pid(run.task.pid);
  s.set_restarts(run.state.restarts);
  s.set_exit_code(run.state.exit_code);
  s.set_exit_signal(run.state.exit_signal);
  s.set_terminal(run.state.terminal);
  s.set_message(run.state.message);
  s.set_started_ms(run.state.started_ms);
  s.set_desired(run.state.desired);
  s.set_crash_looping(!run.state.terminal && run.state.quick_failures >= options_.crash_loop_failures);
  s.set_oom_killed(run.state.oom);
  s.set_evicted(run.state.evicted);
  RunView view = ViewOf(run);
  for (const auto& ext : options_.extensions) ext->Describe(view, &s);
  return s;
}

void Supervisor::DescribeMachine(v1::PollResponse* response) const {
  for (const auto& ext : options_.extensions) ext->DescribeMachine(response);
}

absl::StatusOr<ProcessId> Supervisor::TaskOf(absl::string_view run_id) const {
  absl::MutexLock l(&mu_);
  auto it = runs_.find(std::string(run_id));
  if (it == runs_.end()) return absl::NotFoundError(absl::StrCat("no run ", run_id, " on this machine"));
  const Run& run = *it->second;
  if (!run.shim_pidfd.valid() || !run.task.known() || run.state.phase != v1::Task::ACTIVE) {
    return absl::FailedPreconditionError(
        absl::StrCat("run ", run_id, " is not running (", v1::Task::Phase_Name(run.state.phase), ")"));
  }
  return run.task;
}

absl::StatusOr<std::string> Supervisor::LogPath(absl::string_view run_id, bool stderr_stream) const {
  if (!ValidateRunId(run_id).ok()) return absl::NotFoundError(absl::StrCat("no run ", run_id));
  std::string path = absl::StrCat(RunPath(run_id), "/", stderr_stream ? shim::kStderrFile : shim::kStdoutFile);
  {
    absl::MutexLock l(&mu_);
    if (runs_.contains(std::string(run_id))) return path;
  }
  struct stat st;
  if (stat(path.c_str(), &st) == 0) return path;  // a stopped run whose logs are retained
  return absl::NotFoundError(absl::StrCat("no logs for run ", run_id));
}

uint64_t Supervisor::Version() const {
  absl::MutexLock l(&mu_);
  return version_;
}

uint64_t Supervisor::WaitForChange(uint64_t last_version, int64_t timeout_ms) const {
  absl::MutexLock l(&mu_);
  absl::Time deadline = absl::Now() + absl::Milliseconds(timeout_ms);
  while (version_ == last_version) {
    if (changed_.WaitWithDeadline(&mu_, deadline)) break;
  }
  return version_;
}

// ---- The loop ----------------------------------------------------------

void Supervisor::Loop() {
  struct epoll_event events[64];
  while (true) {
    int timeout;
    {
      absl::MutexLock l(&mu_);
      if (stopping_) return;
      RunActionsLocked();
      ReconcileLocked();
      timeout = NextTimeoutMsLocked();
    }
    int n = epoll_wait(epoll_fd_.get(), events, 64, timeout);
    if (n < 0 && errno != EINTR) {
      HERD_LOG_ERROR("epoll_wait: {}", strerror(errno));
      usleep(100'000);
      continue;
    }
    absl::MutexLock l(&mu_);
    if (stopping_) return;
    for (int i = 0; i < n; ++i) {
      uint64_t token = events[i].data.u64;
      if (token == kWakeToken) {
        uint64_t count;
        (void)!read(wake_fd_.get(), &count, sizeof(count));
      } else if (token == kInotifyToken) {
        HandleInotifyLocked();
      } else if (auto it = token_to_run_.find(token); it != token_to_run_.end()) {
        auto run = runs_.find(it->second);
        if (run != runs_.end() && run->second->token == token) OnShimExitLocked(*run->second);
      }
    }
  }
}

int Supervisor::NextTimeoutMsLocked() {
  if (starts_left_) return 0;
  const int64_t now = options_.clock->MonotonicMs();
  const int64_t steady_now = SteadyNowMs();
  int64_t next = now + kMaxSleepMs;
  if (options_.gc_interval_ms > 0) next = std::min(next, next_gc_mono_ms_);
  if (!options_.extensions.empty()) next = std::min(next, next_tick_mono_ms_);
  for (const auto& [id, run] : runs_) {
    if (run->state.desired && !run->shim_pidfd.valid() && HeldForLeaseLocked(*run, steady_now)) {
      continue;  // nothing to do until RenewLease wakes the loop
    }
    if (run->state.phase == v1::Task::BACKOFF && run->state.desired) {
      next = std::min(next, run->backoff_until_mono_ms);
    }
    if (!run->state.desired && !run->sigkill_sent && run->task.known()) {
      next = std::min(next, run->kill_at_mono_ms);
    }
    if (run->shim_pidfd.valid() && !run->task.known()) next = std::min(next, now + kStartingPollMs);
    if (run->state.phase == v1::Task::STARTING && run->spawn_pending && run->prepare_retry_mono_ms > 0) {
      next = std::min(next, run->prepare_retry_mono_ms);
    }
  }
  return static_cast<int>(std::clamp<int64_t>(next - now, 0, kMaxSleepMs));
}

void Supervisor::HandleInotifyLocked() {
  alignas(struct inotify_event) char buf[16 * 1024];
  while (true) {
    ssize_t n = read(inotify_fd_.get(), buf, sizeof(buf));
    if (n <= 0) return;
    for (char* p = buf; p < buf + n;) {
      auto* ev = reinterpret_cast<struct inotify_event*>(p);
      p += sizeof(struct inotify_event) + ev->len;
      if (ev->mask & IN_Q_OVERFLOW) {
        for (auto& [id, run] : runs_) ReadTaskPidLocked(*run);
        continue;
      }
      if (ev->len == 0 || strcmp(ev->name, shim::kTaskPidFile) != 0) continue;
      auto w = watch_to_run_.find(ev->wd);
      if (w == watch_to_run_.end()) continue;
      auto run = runs_.find(w->second);
      if (run != runs_.end()) ReadTaskPidLocked(*run->second);
    }
  }
}

void Supervisor::ReconcileLocked() {
  const int64_t now = options_.clock->MonotonicMs();
  std::vector<std::string> ids;
  ids.reserve(runs_.size());
  for (const auto& [id, run] : runs_) ids.push_back(id);
  const int max_starts = std::max(1, options_.max_starts_per_pass);
  const int64_t steady_now = SteadyNowMs();
  int starts = 0;
  starts_left_ = false;
  // Tasks with a run still stopping here, by its incarnation: a later run of
  // the same task (restarted by an update, or placed here again) starts once
  // the old one's processes are gone, so one task never runs twice here.
  absl::flat_hash_map<std::pair<std::string, int32_t>, int64_t> stopping;
  for (const auto& [id, run] : runs_) {
    if (run->state.desired || !run->shim_pidfd.valid()) continue;
    int64_t& inc = stopping[{run->spec.ref().job(), run->spec.ref().index()}];
    inc = std::max(inc, run->spec.ref().incarnation());
  }
  auto follows_a_stopping_run = [&](const Run& run) {
    auto it = stopping.find({run.spec.ref().job(), run.spec.ref().index()});
    return it != stopping.end() && it->second < run.spec.ref().incarnation();
  };
  for (const std::string& id : ids) {
    auto it = runs_.find(id);
    if (it == runs_.end()) continue;
    Run& run = *it->second;
    if (run.state.desired) {
      if ((run.state.phase == v1::Task::STARTING && run.spawn_pending && now >= run.prepare_retry_mono_ms) ||
          (run.state.phase == v1::Task::BACKOFF && now >= run.backoff_until_mono_ms)) {
        if (HeldForLeaseLocked(run, steady_now)) {
          // It may have been placed elsewhere since: no start without a
          // lease (RenewLease wakes the loop).
          SayHeldForLeaseLocked(run);
          continue;
        }
        if (run.spawn_pending && follows_a_stopping_run(run)) {
          SayWaitingLocked(run, "waiting: the task's previous run here is stopping");
          continue;  // its shim's exit wakes the loop
        }
        if (starts == max_starts) {
          starts_left_ = true;  // the next pass, after the lock was let go
          continue;
        }
        ++starts;
        StartAttemptLocked(run);
      }
    } else if (!run.shim_pidfd.valid()) {
      RemoveLocked(id);
    } else {
      StopLocked(run);
    }
  }
  if (options_.gc_interval_ms > 0 && now >= next_gc_mono_ms_) {
    CollectGarbageLocked();
    next_gc_mono_ms_ = now + options_.gc_interval_ms;
  }
  if (!options_.extensions.empty() && now >= next_tick_mono_ms_) {
    std::vector<RunView> views;
    views.reserve(runs_.size());
    for (const auto& [id, run] : runs_) views.push_back(ViewOf(*run));
    for (const auto& ext : options_.extensions) ext->Tick(views);
    next_tick_mono_ms_ = now + std::max<int64_t>(10, options_.tick_ms);
  }
}

void Supervisor::RunActionsLocked() {
  std::vector<Action> actions;
  {
    absl::MutexLock l(&actions_mu_);
    actions.swap(actions_);
  }
  if (actions.empty()) return;
  bool changed = false;
  for (Action& a : actions) {
    if (a.run_id.empty()) {
      // Retry (or Changed): runs waiting on an extension try again now.
      for (auto& [id, run] : runs_) run->prepare_retry_mono_ms = 0;
      changed = true;
      continue;
    }
    auto it = runs_.find(a.run_id);
    if (it == runs_.end()) continue;
    Run& run = *it->second;
    if (!run.shim_pidfd.valid() || !run.task.known() || !run.state.desired || !run.kill_reason.empty()) continue;
    HERD_LOG_WARN("run {}: {}; killing it{}", a.run_id, a.reason, a.evict ? " (evicted)" : "");
    run.kill_reason = std::move(a.reason);
    run.evict = a.evict;
    KillAllLocked(run);
  }
  if (changed) ChangedLocked();
}

void Supervisor::KillAllLocked(Run& run) {
  bool done = false;
  RunView view = ViewOf(run);
  for (const auto& ext : options_.extensions) done |= ext->KillAll(view);
  // The process group too: the task may not be in a cgroup (no extension,
  // or the cgroup could not be joined), and the shim keeps its pgid reserved.
  if (run.task.known() && (!run.shim_pidfd.valid() || !PidfdExited(run.shim_pidfd.get()))) {
    (void)SignalProcessGroup(run.task.pid, SIGKILL);
  } else if (!done) {
    HERD_LOG_DEBUG("run {}: nothing to kill", run.spec.run_id());
  }
}

// ---- Attempts ----------------------------------------------------------

absl::Status Supervisor::EnsureOnDiskLocked(Run& run) {
  if (!run.on_disk) {
    HERD_RETURN_IF_ERROR(run.dir.Create());
    HERD_RETURN_IF_ERROR(run.dir.WriteSpec(run.spec));
    run.on_disk = true;
  }
  if (run.watch < 0) {
    run.watch = inotify_add_watch(inotify_fd_.get(), run.dir.path().c_str(), IN_MOVED_TO);
    if (run.watch < 0) return ErrnoToStatus(errno, "inotify_add_watch " + run.dir.path());
    watch_to_run_[run.watch] = run.spec.run_id();
  }
  return absl::OkStatus();
}

void Supervisor::StartAttemptLocked(Run& run) {
  const std::string& id = run.spec.run_id();
  run.spawn_pending = false;
  run.task = ProcessId{};
  run.state.phase = v1::Task::STARTING;
  run.state.shim = ProcessId{};
  run.state.started_ms = options_.clock->NowMs();
  run.attempt_mono_ms = options_.clock->MonotonicMs();
  auto fail = [&](absl::string_view what, const absl::Status& st, bool permanent) {
    ExitStatus exit;
    exit.kind = ExitStatus::Kind::kFailed;
    exit.exit_code = -1;
    exit.message = absl::StrCat(what, ": ", st.message());
    exit.permanent = permanent;
    HERD_LOG_WARN("run {}: {}", id, exit.message);
    AttemptEndedLocked(run, exit);
  };
  if (absl::Status st = EnsureOnDiskLocked(run); !st.ok()) return fail("cannot create run directory", st, false);
  if (absl::Status st = run.dir.ClearAttempt(); !st.ok()) return fail("cannot clear run directory", st, false);
  absl::StatusOr<std::string> workdir = PrepareWorkdir(run.spec, run.dir);
  if (!workdir.ok()) return fail("bad working directory", workdir.status(), true);
  AttemptSetup setup;
  if (!PrepareAttemptLocked(run, &setup)) return;
  if (absl::StartsWith(run.state.message, "waiting:")) run.state.message.clear();  // it no longer waits
  if (run.state.restarts > 0 && !run.state.last_exit.empty()) {
    run.state.message = absl::StrCat("restart ", run.state.restarts, " after: ", run.state.last_exit);
  }
  // Persisted before the spawn: should the agent die right after it, the
  // next one knows an attempt began (and finds its shim through task.pid)
  // instead of resuming the backoff and starting a second shim.
  PersistLocked(run);

  SpawnOptions spawn;
  spawn.path = options_.shim_path;
  spawn.argv = {options_.shim_path, run.dir.path()};
  if (options_.log_max_bytes > 0) {
    spawn.argv.insert(spawn.argv.end(), {shim::kOptLogMaxBytes, absl::StrCat(options_.log_max_bytes),
                                         shim::kOptLogKeep, absl::StrCat(std::max(0, options_.log_keep))});
  }
  spawn.argv.insert(spawn.argv.end(), setup.shim_args.begin(), setup.shim_args.end());
  // The shim starts in the run directory (the agent's own); its child enters
  // the working directory only as the task's uid, for the task may have left
  // a symlink there. (A task root's --cwd comes from IsolationExtension.)
  if (std::find(setup.shim_args.begin(), setup.shim_args.end(), shim::kOptCwd) == setup.shim_args.end()) {
    const std::string& wd = run.spec.workdir();
    if (!wd.empty() && wd[0] == '/') {
      spawn.argv.insert(spawn.argv.end(), {shim::kOptCwd, wd});
    } else {
      spawn.argv.insert(spawn.argv.end(), {shim::kOptCwdBase, run.dir.Sandbox(), shim::kOptCwd, wd.empty() ? "." : wd});
    }
  }
  if (run.spec.at_most_once()) {
    spawn.argv.insert(spawn.argv.end(),
                      {shim::kOptLeaseFile, LeasePath(), shim::kOptLeaseGraceMs, absl::StrCat(GraceMs(run))});
  }
  spawn.argv.push_back("--");
  for (const std::string& arg : run.spec.argv()) spawn.argv.push_back(SubstituteVariables(arg, setup.substitutions));
  if (!run.spec.alloc_run_id().empty() && ValidateRunId(run.spec.alloc_run_id()).ok()) {
    // Shared by the tasks of one alloc (the logsaver pattern): the alloc's sandbox.
    setup.env["HERD_ALLOC_DIR"] = RunDir(RunPath(run.spec.alloc_run_id())).Sandbox();
  }
  spawn.env = TaskEnvironment(run.spec, run.dir, setup.env);
  for (auto& [key, value] : spawn.env) value = SubstituteVariables(value, setup.substitutions);
  spawn.cwd = run.dir.path();
  if (!run.spec.workdir().empty() && run.spec.workdir()[0] == '/' && !run.spec.isolation().root_from_packages()) {
    // An absolute workdir that is not there will not be on a restart either.
    struct stat st;
    const int err = stat(workdir->c_str(), &st) != 0 ? errno : (S_ISDIR(st.st_mode) ? 0 : ENOTDIR);
    if (err != 0) return fail("cannot start herd-shim", ErrnoToStatus(err, absl::StrCat("chdir ", *workdir)), true);
  }
  spawn.stderr_path = run.dir.File(shim::kShimLogFile);
  absl::StatusOr<pid_t> pid = Spawn(spawn);
  if (!pid.ok()) {
    // A chdir failure means the (absolute) workdir is unusable: permanent.
    return fail("cannot start herd-shim", pid.status(), absl::IsNotFound(pid.status()));
  }
  absl::StatusOr<ProcessId> shim = IdentifyProcess(*pid);
  absl::StatusOr<Fd> pidfd = PidfdOpen(*pid);
  if (!shim.ok() || !pidfd.ok()) {
    // Cannot happen for an unreaped child; do not leave it unwatched.
    HERD_BUG(absl::StrCat("cannot watch shim of ", id));
    kill(*pid, SIGKILL);
    waitpid(*pid, nullptr, 0);
    return fail("cannot watch herd-shim", shim.ok() ? pidfd.status() : shim.status(), false);
  }
  run.state.shim = *shim;
  WatchShimLocked(run, *std::move(pidfd));
  PersistLocked(run);
  ReadTaskPidLocked(run);  // a fast task may already have been reported
  ChangedLocked();
  HERD_LOG_DEBUG("run {}: started shim {}", id, *pid);
}

bool Supervisor::PrepareAttemptLocked(Run& run, AttemptSetup* setup) {
  RunView view = ViewOf(run);
  for (const auto& ext : options_.extensions) {
    absl::Status st = ext->Prepare(view, setup);
    if (st.ok()) continue;
    if (absl::IsUnavailable(st)) {
      // Not ready (a package is being fetched): stay STARTING, ask again on
      // Retry() or in a second.
      run.spawn_pending = true;
      run.prepare_retry_mono_ms = options_.clock->MonotonicMs() + kStartingPollMs;
      std::string message = absl::StrCat("waiting: ", st.message());
      if (run.state.message != message) {
        run.state.message = std::move(message);
        PersistLocked(run);
        ChangedLocked();
      }
      return false;
    }
    ExitStatus exit;
    exit.kind = ExitStatus::Kind::kFailed;
    exit.exit_code = -1;
    exit.message = std::string(st.message());
    exit.permanent = absl::IsFailedPrecondition(st) || absl::IsInvalidArgument(st);
    HERD_LOG_WARN("run {}: {}: {}", run.spec.run_id(), ext->name(), exit.message);
    AttemptEndedLocked(run, exit);
    return false;
  }
  run.prepare_retry_mono_ms = 0;
  return true;
}

void Supervisor::WatchShimLocked(Run& run, Fd pidfd) {
  struct epoll_event ev = {};
  ev.events = EPOLLIN;
  ev.data.u64 = run.token;
  if (epoll_ctl(epoll_fd_.get(), EPOLL_CTL_ADD, pidfd.get(), &ev) != 0) {
    HERD_BUG(absl::StrCat("epoll_ctl(pidfd): ", strerror(errno)));
  }
  token_to_run_[run.token] = run.spec.run_id();
  run.shim_pidfd = std::move(pidfd);
}

void Supervisor::ReadTaskPidLocked(Run& run) {
  if (!run.shim_pidfd.valid() || run.task.known()) return;
  absl::StatusOr<TaskPidRecord> rec = ReadTaskPidFile(run.dir.path());
  if (!rec.ok() || !(rec->shim == run.state.shim)) return;
  run.task = rec->task;
  if (run.state.phase == v1::Task::STARTING) {
    run.state.phase = v1::Task::ACTIVE;
    PersistLocked(run);
    HERD_LOG_INFO("run {}: active, pid {}", run.spec.run_id(), run.task.pid);
  }
  for (const auto& ext : options_.extensions) ext->Started(ViewOf(run), /*recovered=*/false);
  ChangedLocked();
}

void Supervisor::OnShimExitLocked(Run& run) {
  ReadTaskPidLocked(run);
  epoll_ctl(epoll_fd_.get(), EPOLL_CTL_DEL, run.shim_pidfd.get(), nullptr);
  ReapIfChild(run.shim_pidfd.get());
  run.shim_pidfd.Reset();
  token_to_run_.erase(run.token);
  run.token = next_token_++;
  absl::StatusOr<ExitStatus> exit = ReadExitFile(run.dir.path());
  if (!exit.ok()) {
    ExitStatus lost;
    lost.kind = ExitStatus::Kind::kFailed;
    lost.exit_code = -1;
    lost.message = "herd-shim exited without an exit record";
    if (IsRunning(run.task)) {
      KillAllLocked(run);
      lost.message = "herd-shim died; task killed (exit status unknowable)";
    }
    HERD_LOG_WARN("run {}: {} ({})", run.spec.run_id(), lost.message, exit.status().ToString());
    exit = lost;
  }
  AttemptEndedLocked(run, *exit);
}

void Supervisor::AttemptEndedLocked(Run& run, const ExitStatus& ended) {
  const std::string id = run.spec.run_id();
  ExitStatus exit = ended;
  {
    RunView view = ViewOf(run);
    for (const auto& ext : options_.extensions) ext->Ended(view, &exit);
  }
  if (!run.kill_reason.empty()) exit.killed_because = std::move(run.kill_reason);
  run.kill_reason.clear();
  const bool evict = std::exchange(run.evict, false);
  run.task = ProcessId{};
  run.state.shim = ProcessId{};
  if (!run.state.desired) {
    HERD_LOG_INFO("run {}: stopped ({})", id, exit.Describe());
    RemoveLocked(id);
    return;
  }
  run.state.oom = exit.oom;
  run.state.exit_code = exit.kind == ExitStatus::Kind::kSignaled ? 0 : exit.exit_code;
  run.state.exit_signal = exit.kind == ExitStatus::Kind::kSignaled ? exit.signal : 0;
  run.state.last_exit = exit.Describe();
  if (exit.lease_expired && !evict) {
    // The shim stopped an at-most-once task: the machine lost contact with
    // the master, which may place it elsewhere. Not the task's failure
    // (no backoff, no crash loop, whatever its restart policy): it starts
    // again as soon as a poll renews the lease, if the master still wants
    // it here (ReconcileLocked holds it until then).
    ++run.state.restarts;
    run.state.phase = v1::Task::BACKOFF;
    run.backoff_until_mono_ms = options_.clock->MonotonicMs();
    run.state.message = absl::StrCat(exit.Describe(), "; starts again once a poll of the master renews the lease");
    HERD_LOG_WARN("run {}: {}", id, run.state.message);
    PersistLocked(run);
    ChangedLocked();
    return;
  }
  const int64_t ran_ms = run.attempt_mono_ms > 0
                             ? options_.clock->MonotonicMs() - run.attempt_mono_ms
                             : options_.clock->NowMs() - run.state.started_ms;
  if (exit.success() || ran_ms >= kBackoffResetAfterMs) {
    run.state.quick_failures = 0;
  } else {
    ++run.state.quick_failures;
  }
  RestartDecision d = DecideRestart(run.spec.restart(), exit, run.state.restarts, run.state.backoff_ms, ran_ms);
  if (evict) {
    d.restart = false;
    d.message = exit.Describe();
    run.state.evicted = true;
  }
  run.state.message = d.message;
  if (d.restart) {
    ++run.state.restarts;
    run.state.backoff_ms = d.delay_ms;
    run.state.phase = v1::Task::BACKOFF;
    run.backoff_until_mono_ms = options_.clock->MonotonicMs() + d.delay_ms;
  } else {
    run.state.phase = v1::Task::EXITED;
    run.state.terminal = true;
  }
  HERD_LOG_INFO("run {}: {}", id, d.message);
  PersistLocked(run);
  ChangedLocked();
}

void Supervisor::StopLocked(Run& run) {
  if (!run.task.known()) ReadTaskPidLocked(run);
  // Signal the group only while its shim runs: the shim kills the group
  // before reaping the task, so until the shim exits the pgid cannot have
  // been reused by an unrelated process.
  if (!run.task.known() || PidfdExited(run.shim_pidfd.get())) return;
  const int64_t now = options_.clock->MonotonicMs();
  if (!run.sigterm_sent) {
    run.sigterm_sent = true;
    absl::Status st = SignalProcessGroup(run.task.pid, SIGTERM);
    HERD_LOG_INFO("run {}: SIGTERM to group {} ({}ms grace){}", run.spec.run_id(), run.task.pid, GraceMs(run),
                  st.ok() ? "" : " failed: " + st.ToString());
  }
  if (!run.sigkill_sent && now >= run.kill_at_mono_ms) {
    run.sigkill_sent = true;
    HERD_LOG_INFO("run {}: grace over, SIGKILL to all of it (task {})", run.spec.run_id(), run.task.pid);
    KillAllLocked(run);
    run.state.message = "grace period over; killed";
  }
}

void Supervisor::RemoveLocked(const std::string& run_id) {
  auto it = runs_.find(run_id);
  if (it == runs_.end()) return;
  Run& run = *it->second;
  if (run.watch >= 0) {
    inotify_rm_watch(inotify_fd_.get(), run.watch);
    watch_to_run_.erase(run.watch);
  }
  token_to_run_.erase(run.token);
  {
    RunView view = ViewOf(run);
    for (const auto& ext : options_.extensions) ext->Released(view);
  }
  run.state.removed = true;
  run.state.removed_ms = options_.clock->NowMs();
  run.state.desired = false;
  PersistLocked(run);
  runs_.erase(it);
  ChangedLocked();
}

// ---- Log retention -----------------------------------------------------

void Supervisor::CollectGarbageLocked() {
  const int64_t now_ms = options_.clock->NowMs();
  const std::string runs_dir = options_.root_dir + "/runs";
  absl::StatusOr<Fd> runs;  // opened on the first deletion
  for (const std::string& name : ListDir(runs_dir)) {
    if (runs_.contains(name)) continue;
    RunDir dir(runs_dir + "/" + name);
    absl::StatusOr<RunState> state = dir.ReadState();
    int64_t since_ms;
    if (state.ok() && state->removed) {
      since_ms = state->removed_ms;
    } else {
      // Not ours to judge by state (unreadable, or a leftover): go by age,
      // and never delete the directory of a live shim.
      absl::StatusOr<TaskPidRecord> pids = ReadTaskPidFile(dir.path());
      if (pids.ok() && IsRunning(pids->shim)) continue;
      if (state.ok() && IsRunning(state->shim)) continue;
      struct stat st;
      if (stat(dir.path().c_str(), &st) != 0) continue;
      since_ms = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000 + st.st_mtim.tv_nsec / 1'000'000;
    }
    if (now_ms - since_ms < options_.log_retention_ms) continue;
    // The sandbox is the task's: removed through descriptors, never
    // following what it left there.
    if (!runs.ok()) runs = OpenDirectory(runs_dir);
    absl::Status removed = runs.ok() ? RemoveTreeAt(runs->get(), name) : runs.status();
    if (!removed.ok()) {
      HERD_LOG_WARN("cannot delete run dir {}: {}", dir.path(), removed.ToString());
    } else {
      HERD_LOG_INFO("deleted run dir {} (retention over)", dir.path());
    }
  }
}

}  // namespace herd::agent
