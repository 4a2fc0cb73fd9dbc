#include "agent/cgroup/driver.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <functional>
#include <set>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "agent/runtime/process.h"
#include "base/status.h"
#include "base/errno_status.h"

namespace herd::agent {
namespace {

namespace fs = std::filesystem;

bool IsFile(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

bool IsDir(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

std::string Join(absl::string_view dir, absl::string_view group) {
  if (group.empty()) return std::string(dir);
  return absl::StrCat(dir, "/", group);
}

int64_t ReadInt(const std::string& path, int64_t dflt = -1) {
  absl::StatusOr<std::string> text = ReadSmallFile(path);
  int64_t v;
  if (!text.ok() || !absl::SimpleAtoi(absl::StripAsciiWhitespace(*text), &v)) return dflt;
  return v;
}

std::vector<pid_t> ReadPids(const std::string& procs_file) {
  std::vector<pid_t> out;
  absl::StatusOr<std::string> text = ReadSmallFile(procs_file);
  if (!text.ok()) return out;
  for (absl::string_view line : absl::StrSplit(*text, '\n', absl::SkipEmpty())) {
    pid_t pid;
    if (absl::SimpleAtoi(line, &pid) && pid > 0) out.push_back(pid);
  }
  return out;
}

// A listed pid that has not exited yet (zombies have: only their parent's
// wait is missing).
bool Live(pid_t pid) {
  absl::StatusOr<ProcStat> st = ReadProcStat(pid);
  return st.ok() && st->state != 'Z';
}

std::vector<std::string> SubDirs(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->is_directory(ec)) out.push_back(it->path().filename().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

absl::Status MakeDirs(const std::string& path) {
  std::error_code ec;
  fs::create_directories(path, ec);
  if (ec) return absl::InternalError(absl::StrCat("mkdir ", path, ": ", ec.message()));
  return absl::OkStatus();
}

// rmdir of a cgroup and, first, of any child groups under it (cgroup
// directories hold only kernel files, which rmdir takes with them).
absl::Status RemoveTree(const std::string& path) {
  if (!IsDir(path)) return absl::OkStatus();
  for (const std::string& child : SubDirs(path)) HERD_RETURN_IF_ERROR(RemoveTree(path + "/" + child));
  if (rmdir(path.c_str()) == 0 || errno == ENOENT) return absl::OkStatus();
  if (errno == EBUSY) return absl::UnavailableError(absl::StrCat("rmdir ", path, ": busy (processes left)"));
  if (errno == ENOTEMPTY) {
    // A fake tree (tests): plain files in the directory.
    std::error_code ec;
    fs::remove_all(path, ec);
    if (!ec) return absl::OkStatus();
  }
  return ErrnoToStatus(errno, absl::StrCat("rmdir ", path));
}

// Kills every live process listed in `procs_files` until none is left or
// the deadline passes. `freeze`/`thaw` (may be empty) stop the group from
// forking while its members are listed and signalled.
// The driver's waits on the kernel (a group freezing, SIGKILLed processes
// leaving) are bounded by the clock and also by a count of polls, so that a
// clock that does not move (a test's ManualClock) cannot make them spin
// forever.
bool WaitOver(Clock* clock, int64_t deadline_ms, int polls, int max_polls) {
  return clock->MonotonicMs() >= deadline_ms || polls >= max_polls;
}

absl::Status KillLoop(Clock* clock, const std::vector<std::string>& procs_files, const std::function<void()>& freeze,
                      const std::function<void()>& thaw, int64_t timeout_ms) {
  const int64_t deadline = clock->MonotonicMs() + timeout_ms;
  bool frozen = false;
  if (freeze) {
    freeze();
    frozen = true;
  }
  for (int polls = 0;; ++polls) {
    std::set<pid_t> live;
    for (const std::string& f : procs_files) {
      for (pid_t pid : ReadPids(f)) {
        if (Live(pid)) live.insert(pid);
      }
    }
    for (pid_t pid : live) kill(pid, SIGKILL);
    if (frozen) {
      // Frozen, nobody could fork in between: each member now has a
      // SIGKILL pending, which it acts on as soon as it is thawed.
      thaw();
      return absl::OkStatus();
    }
    if (live.empty()) return absl::OkStatus();
    if (WaitOver(clock, deadline, polls, static_cast<int>(timeout_ms))) {  // polls are >= 1 ms apart
      return absl::UnavailableError(absl::StrCat(live.size(), " processes still in the group after SIGKILL"));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

// ---- v1 ----------------------------------------------------------------

class V1Driver : public CgroupDriver {
 public:
  V1Driver(const std::string& root, Clock* clock) : CgroupDriver(root, clock) {
    auto find = [&](const char* controller) -> std::string {
      std::string path = absl::StrCat(root, "/", controller);
      if (!IsDir(path)) return "";
      // cpu and cpuacct are often one hierarchy ("cpu,cpuacct" with two
      // symlinks): the real path tells them apart.
      char* real = realpath(path.c_str(), nullptr);
      if (real == nullptr) return path;
      std::string out = real;
      free(real);
      return out;
    };
    memory_ = find("memory");
    cpu_ = find("cpu");
    cpuacct_ = find("cpuacct");
    pids_ = find("pids");
    freezer_ = find("freezer");
    for (const std::string* h : {&memory_, &cpu_, &cpuacct_, &pids_, &freezer_}) {
      if (!h->empty() && std::find(hierarchies_.begin(), hierarchies_.end(), *h) == hierarchies_.end()) {
        hierarchies_.push_back(*h);
      }
    }
  }

  absl::string_view version() const override { return "v1"; }

  absl::Status Create(absl::string_view group) override {
    for (const std::string& h : hierarchies_) {
      HERD_RETURN_IF_ERROR(h == cpuset_ ? CreateCpuset(group) : MakeDirs(Join(h, group)));
    }
    return absl::OkStatus();
  }

  bool Exists(absl::string_view group) const override { return IsDir(Join(memory_, group)); }

  absl::Status EnableCpuset() override {
    if (!cpuset_.empty()) return absl::OkStatus();
    std::string path = absl::StrCat(root_, "/cpuset");
    if (!IsFile(path + "/cpuset.cpus")) return absl::NotFoundError(absl::StrCat("no cpuset hierarchy at ", path));
    char* real = realpath(path.c_str(), nullptr);
    cpuset_ = real != nullptr ? real : path;
    free(real);
    if (std::find(hierarchies_.begin(), hierarchies_.end(), cpuset_) == hierarchies_.end()) {
      hierarchies_.push_back(cpuset_);
    }
    return absl::OkStatus();
  }

  bool cpuset_enabled() const override { return !cpuset_.empty(); }

  absl::Status SetCpuset(absl::string_view group, absl::string_view cpus, absl::string_view mems) override {
    if (cpuset_.empty()) return absl::FailedPreconditionError("cpuset not enabled");
    const std::string dir = Join(cpuset_, group);
    if (!mems.empty()) HERD_RETURN_IF_ERROR(WriteCgroupFile(dir + "/cpuset.mems", mems));
    return WriteCgroupFile(dir + "/cpuset.cpus", cpus);
  }

  absl::StatusOr<std::string> Cpuset(absl::string_view group) const override {
    if (cpuset_.empty()) return absl::FailedPreconditionError("cpuset not enabled");
    absl::StatusOr<std::string> text = ReadSmallFile(Join(cpuset_, group) + "/cpuset.cpus");
    if (!text.ok()) return text.status();
    return std::string(absl::StripAsciiWhitespace(*text));
  }

  absl::Status SetLimits(absl::string_view group, const CgroupLimits& l) override {
    if (l.memory_bytes) {
      std::string dir = Join(memory_, group);
      std::string value = *l.memory_bytes > 0 ? absl::StrCat(*l.memory_bytes) : "-1";
      std::string limit = dir + "/memory.limit_in_bytes", memsw = dir + "/memory.memsw.limit_in_bytes";
      // memory+swap must stay >= memory: set them in the order that keeps
      // it so. Equal values mean no swap for the group.
      bool has_memsw = IsFile(memsw);
      if (!WriteCgroupFile(limit, value).ok()) {
        if (has_memsw) HERD_RETURN_IF_ERROR(WriteCgroupFile(memsw, value));
        HERD_RETURN_IF_ERROR(WriteCgroupFile(limit, value));
      }
      if (has_memsw) HERD_RETURN_IF_ERROR(WriteCgroupFile(memsw, value));
    }
    if (l.cpu_quota_millis) {
      std::string dir = Join(cpu_, group);
      int64_t quota = *l.cpu_quota_millis > 0 ? std::max<int64_t>(1000, *l.cpu_quota_millis * kCfsPeriodUs / 1000) : -1;
      HERD_RETURN_IF_ERROR(WriteCgroupFile(dir + "/cpu.cfs_period_us", absl::StrCat(kCfsPeriodUs)));
      HERD_RETURN_IF_ERROR(WriteCgroupFile(dir + "/cpu.cfs_quota_us", absl::StrCat(quota)));
    }
    if (l.cpu_shares) {
      int64_t shares = std::clamp(*l.cpu_shares, kMinShares, kMaxShares);
      HERD_RETURN_IF_ERROR(WriteCgroupFile(Join(cpu_, group) + "/cpu.shares", absl::StrCat(shares)));
    }
    if (l.pids_max && !pids_.empty()) {
      std::string value = *l.pids_max > 0 ? absl::StrCat(*l.pids_max) : "max";
      HERD_RETURN_IF_ERROR(WriteCgroupFile(Join(pids_, group) + "/pids.max", value));
    }
    return absl::OkStatus();
  }

  std::vector<std::string> ProcsFiles(absl::string_view group) const override {
    std::vector<std::string> out;
    for (const std::string& h : hierarchies_) out.push_back(Join(h, group) + "/cgroup.procs");
    return out;
  }

  absl::StatusOr<CgroupSample> Sample(absl::string_view group) const override {
    std::string mem = Join(memory_, group);
    if (!IsDir(mem)) return absl::NotFoundError(absl::StrCat("no cgroup ", mem));
    CgroupSample s;
    s.cpu_usage_ns = std::max<int64_t>(0, ReadInt(Join(cpuacct_, group) + "/cpuacct.usage", 0));
    if (absl::StatusOr<std::string> cpu = ReadSmallFile(Join(cpu_, group) + "/cpu.stat"); cpu.ok()) {
      s.cpu_periods = std::max<int64_t>(0, StatValue(*cpu, "nr_periods"));
      s.cpu_throttled_periods = std::max<int64_t>(0, StatValue(*cpu, "nr_throttled"));
      s.cpu_throttled_ns = std::max<int64_t>(0, StatValue(*cpu, "throttled_time"));
    }
    s.memory_usage_bytes = std::max<int64_t>(0, ReadInt(mem + "/memory.usage_in_bytes", 0));
    absl::StatusOr<std::string> stat = ReadSmallFile(mem + "/memory.stat");
    if (stat.ok()) {
      int64_t rss = StatValue(*stat, "total_rss");
      if (rss < 0) rss = StatValue(*stat, "rss");
      int64_t inactive = StatValue(*stat, "total_inactive_file");
      if (inactive < 0) inactive = StatValue(*stat, "inactive_file");
      s.memory_rss_bytes = std::max<int64_t>(0, rss);
      s.memory_working_set_bytes = std::max<int64_t>(0, s.memory_usage_bytes - std::max<int64_t>(0, inactive));
    }
    absl::StatusOr<std::string> oom = ReadSmallFile(mem + "/memory.oom_control");
    if (oom.ok()) s.oom_kills = std::max<int64_t>(0, StatValue(*oom, "oom_kill"));
    return s;
  }

  std::vector<pid_t> Pids(absl::string_view group) const override {
    std::set<pid_t> all;
    for (const std::string& f : ProcsFiles(group)) {
      for (pid_t p : ReadPids(f)) all.insert(p);
    }
    return {all.begin(), all.end()};
  }

  absl::Status Kill(absl::string_view group, int64_t timeout_ms) override {
    std::string state = Join(freezer_, group) + "/freezer.state";
    std::function<void()> freeze, thaw;
    if (!freezer_.empty() && IsFile(state)) {
      freeze = [state, clock = clock_] {
        if (!WriteCgroupFile(state, "FROZEN").ok()) return;
        // Freezing is asynchronous (FREEZING until every task stopped).
        const int64_t until = clock->MonotonicMs() + 100;
        for (int polls = 0; !WaitOver(clock, until, polls, 500); ++polls) {  // 200 us apart
          absl::StatusOr<std::string> s = ReadSmallFile(state);
          if (!s.ok() || absl::StripAsciiWhitespace(*s) == "FROZEN") break;
          std::this_thread::sleep_for(std::chrono::microseconds(200));
        }
      };
      thaw = [state] { (void)WriteCgroupFile(state, "THAWED"); };
    }
    return KillLoop(clock_, ProcsFiles(group), freeze, thaw, timeout_ms);
  }

  absl::Status Remove(absl::string_view group) override {
    absl::Status first;
    for (const std::string& h : hierarchies_) {
      absl::Status st = RemoveTree(Join(h, group));
      if (first.ok()) first = st;
    }
    return first;
  }

  std::vector<std::string> Children(absl::string_view group) const override {
    return SubDirs(Join(memory_, group));
  }

  std::string Dir(absl::string_view group) const override { return Join(memory_, group); }

 private:
  // Each level of `group` in the cpuset hierarchy, made with its parent's
  // CPUs and memory nodes where it has none yet (what a new v1 cpuset
  // starts with unless cgroup.clone_children is set).
  absl::Status CreateCpuset(absl::string_view group) {
    std::string dir = cpuset_;
    for (absl::string_view part : absl::StrSplit(group, '/', absl::SkipEmpty())) {
      const std::string parent = dir;
      dir = absl::StrCat(dir, "/", part);
      if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) return ErrnoToStatus(errno, absl::StrCat("mkdir ", dir));
      for (const char* file : {"cpuset.mems", "cpuset.cpus"}) {
        absl::StatusOr<std::string> mine = ReadSmallFile(absl::StrCat(dir, "/", file));
        if (mine.ok() && !absl::StripAsciiWhitespace(*mine).empty()) continue;
        absl::StatusOr<std::string> theirs = ReadSmallFile(absl::StrCat(parent, "/", file));
        if (!theirs.ok()) return theirs.status();
        HERD_RETURN_IF_ERROR(WriteCgroupFile(absl::StrCat(dir, "/", file), absl::StripAsciiWhitespace(*theirs)));
      }
    }
    return absl::OkStatus();
  }

  std::string memory_, cpu_, cpuacct_, pids_, freezer_, cpuset_;
  std::vector<std::string> hierarchies_;  // distinct, memory first
};

// ---- v2 ----------------------------------------------------------------

class V2Driver : public CgroupDriver {
 public:
  V2Driver(const std::string& root, Clock* clock) : CgroupDriver(root, clock) {}

  absl::string_view version() const override { return "v2"; }

  absl::Status Create(absl::string_view group) override {
    // Every parent hands the controllers down to its children (a parent
    // then may hold no processes itself: ours never do). The leaf does
    // not, so processes can join it.
    std::string dir = root_;
    for (absl::string_view part : absl::StrSplit(group, '/', absl::SkipEmpty())) {
      HERD_RETURN_IF_ERROR(EnableControllers(dir));
      dir = absl::StrCat(dir, "/", part);
      if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
        return ErrnoToStatus(errno, absl::StrCat("mkdir ", dir));
      }
    }
    return absl::OkStatus();
  }

  bool Exists(absl::string_view group) const override { return IsDir(Join(root_, group)); }

  absl::Status EnableCpuset() override {
    absl::StatusOr<std::string> available = ReadSmallFile(root_ + "/cgroup.controllers");
    if (!available.ok()) return available.status();
    for (absl::string_view c : absl::StrSplit(*available, absl::ByAnyChar(" \n"), absl::SkipEmpty())) {
      if (c == "cpuset") cpuset_ = true;
    }
    if (!cpuset_) return absl::NotFoundError(absl::StrCat("no cpuset in ", root_, "/cgroup.controllers"));
    return absl::OkStatus();
  }

  bool cpuset_enabled() const override { return cpuset_; }

  absl::Status SetCpuset(absl::string_view group, absl::string_view cpus, absl::string_view mems) override {
    if (!cpuset_) return absl::FailedPreconditionError("cpuset not enabled");
    const std::string dir = Join(root_, group);
    if (!mems.empty()) HERD_RETURN_IF_ERROR(WriteCgroupFile(dir + "/cpuset.mems", mems));
    return WriteCgroupFile(dir + "/cpuset.cpus", cpus);
  }

  absl::StatusOr<std::string> Cpuset(absl::string_view group) const override {
    if (!cpuset_) return absl::FailedPreconditionError("cpuset not enabled");
    absl::StatusOr<std::string> text = ReadSmallFile(Join(root_, group) + "/cpuset.cpus");
    if (!text.ok()) return text.status();
    return std::string(absl::StripAsciiWhitespace(*text));
  }

  absl::Status SetLimits(absl::string_view group, const CgroupLimits& l) override {
    std::string dir = Join(root_, group);
    if (l.memory_bytes) {
      HERD_RETURN_IF_ERROR(
          WriteCgroupFile(dir + "/memory.max", *l.memory_bytes > 0 ? absl::StrCat(*l.memory_bytes) : "max"));
      // No swap: the limit is a hard limit on memory the task really uses.
      if (IsFile(dir + "/memory.swap.max")) HERD_RETURN_IF_ERROR(WriteCgroupFile(dir + "/memory.swap.max", "0"));
    }
    if (l.cpu_quota_millis) {
      std::string quota = *l.cpu_quota_millis > 0
                              ? absl::StrCat(std::max<int64_t>(1000, *l.cpu_quota_millis * kCfsPeriodUs / 1000))
                              : "max";
      HERD_RETURN_IF_ERROR(WriteCgroupFile(dir + "/cpu.max", absl::StrCat(quota, " ", kCfsPeriodUs)));
    }
    if (l.cpu_shares) {
      HERD_RETURN_IF_ERROR(WriteCgroupFile(dir + "/cpu.weight", absl::StrCat(SharesToWeight(*l.cpu_shares))));
    }
    if (l.pids_max) {
      HERD_RETURN_IF_ERROR(WriteCgroupFile(dir + "/pids.max", *l.pids_max > 0 ? absl::StrCat(*l.pids_max) : "max"));
    }
    return absl::OkStatus();
  }

  std::vector<std::string> ProcsFiles(absl::string_view group) const override {
    return {Join(root_, group) + "/cgroup.procs"};
  }

  absl::StatusOr<CgroupSample> Sample(absl::string_view group) const override {
    std::string dir = Join(root_, group);
    if (!IsDir(dir)) return absl::NotFoundError(absl::StrCat("no cgroup ", dir));
    CgroupSample s;
    if (absl::StatusOr<std::string> cpu = ReadSmallFile(dir + "/cpu.stat"); cpu.ok()) {
      s.cpu_usage_ns = std::max<int64_t>(0, StatValue(*cpu, "usage_usec")) * 1000;
      s.cpu_periods = std::max<int64_t>(0, StatValue(*cpu, "nr_periods"));
      s.cpu_throttled_periods = std::max<int64_t>(0, StatValue(*cpu, "nr_throttled"));
      s.cpu_throttled_ns = std::max<int64_t>(0, StatValue(*cpu, "throttled_usec")) * 1000;
    }
    if (absl::StatusOr<std::string> p = ReadSmallFile(dir + "/cpu.pressure"); p.ok()) {
      s.cpu_pressure_some_us = PressureSomeTotalUs(*p);
    }
    s.memory_usage_bytes = std::max<int64_t>(0, ReadInt(dir + "/memory.current", 0));
    if (absl::StatusOr<std::string> stat = ReadSmallFile(dir + "/memory.stat"); stat.ok()) {
      s.memory_rss_bytes = std::max<int64_t>(0, StatValue(*stat, "anon"));
      int64_t inactive = std::max<int64_t>(0, StatValue(*stat, "inactive_file"));
      s.memory_working_set_bytes = std::max<int64_t>(0, s.memory_usage_bytes - inactive);
    }
    if (absl::StatusOr<std::string> ev = ReadSmallFile(dir + "/memory.events"); ev.ok()) {
      s.oom_kills = std::max<int64_t>(0, StatValue(*ev, "oom_kill"));
    }
    return s;
  }

  std::vector<pid_t> Pids(absl::string_view group) const override {
    return ReadPids(Join(root_, group) + "/cgroup.procs");
  }

  absl::Status Kill(absl::string_view group, int64_t timeout_ms) override {
    std::string dir = Join(root_, group);
    // Linux >= 5.14: one write kills the whole subtree, atomically with
    // respect to forks.
    if (IsFile(dir + "/cgroup.kill")) return WriteCgroupFile(dir + "/cgroup.kill", "1");
    std::function<void()> freeze, thaw;
    if (IsFile(dir + "/cgroup.freeze")) {
      freeze = [dir, clock = clock_] {
        if (!WriteCgroupFile(dir + "/cgroup.freeze", "1").ok()) return;
        const int64_t until = clock->MonotonicMs() + 100;
        for (int polls = 0; !WaitOver(clock, until, polls, 500); ++polls) {  // 200 us apart
          absl::StatusOr<std::string> ev = ReadSmallFile(dir + "/cgroup.events");
          if (!ev.ok() || StatValue(*ev, "frozen") == 1) break;
          std::this_thread::sleep_for(std::chrono::microseconds(200));
        }
      };
      thaw = [dir] { (void)WriteCgroupFile(dir + "/cgroup.freeze", "0"); };
    }
    return KillLoop(clock_, ProcsFiles(group), freeze, thaw, timeout_ms);
  }

  absl::Status Remove(absl::string_view group) override { return RemoveTree(Join(root_, group)); }

  std::vector<std::string> Children(absl::string_view group) const override {
    return SubDirs(Join(root_, group));
  }

  std::string Dir(absl::string_view group) const override { return Join(root_, group); }

 private:
  absl::Status EnableControllers(const std::string& dir) {
    absl::StatusOr<std::string> available = ReadSmallFile(dir + "/cgroup.controllers");
    if (!available.ok()) return available.status();
    absl::StatusOr<std::string> enabled = ReadSmallFile(dir + "/cgroup.subtree_control");
    std::set<std::string> have;
    if (enabled.ok()) {
      for (absl::string_view c : absl::StrSplit(*enabled, absl::ByAnyChar(" \n"), absl::SkipEmpty())) {
        have.insert(std::string(c));
      }
    }
    std::set<std::string> can;
    for (absl::string_view c : absl::StrSplit(*available, absl::ByAnyChar(" \n"), absl::SkipEmpty())) {
      can.insert(std::string(c));
    }
    std::string add;
    for (const char* c : {"cpu", "memory", "pids", "cpuset"}) {
      if (c == absl::string_view("cpuset") && !cpuset_) continue;
      if (can.contains(c) && !have.contains(c)) absl::StrAppend(&add, add.empty() ? "" : " ", "+", c);
    }
    if (add.empty()) return absl::OkStatus();
    return WriteCgroupFile(dir + "/cgroup.subtree_control", add);
  }

  bool cpuset_ = false;
};

}  // namespace

int64_t SharesToWeight(int64_t shares) {
  shares = std::clamp(shares, kMinShares, kMaxShares);
  return 1 + ((shares - 2) * 9999) / 262142;
}

absl::StatusOr<std::string> ReadSmallFile(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return ErrnoToStatus(errno, path);
  }
  std::string out;
  char buf[4096];
  while (true) {
    ssize_t n = read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  return out;
}

absl::Status WriteCgroupFile(const std::string& path, absl::string_view value) {
  // O_TRUNC as a shell's "echo v > file": ignored by cgroupfs, and keeps a
  // fake tree's files holding the last value written.
  int fd = open(path.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
  if (fd < 0) return ErrnoToStatus(errno, absl::StrCat("open ", path));
  ssize_t n = write(fd, value.data(), value.size());
  int err = errno;
  close(fd);
  if (n != static_cast<ssize_t>(value.size())) {
    return ErrnoToStatus(err, absl::StrCat("write '", value, "' to ", path));
  }
  return absl::OkStatus();
}

int64_t StatValue(absl::string_view text, absl::string_view key) {
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    if (!absl::StartsWith(line, key)) continue;
    absl::string_view rest = line.substr(key.size());
    if (rest.empty() || !(rest[0] == ' ' || rest[0] == ':' || rest[0] == '\t')) continue;
    if (rest[0] == ':') rest.remove_prefix(1);
    rest = absl::StripAsciiWhitespace(rest);
    int64_t scale = 1;
    if (absl::ConsumeSuffix(&rest, " kB")) scale = 1024;
    int64_t v;
    if (absl::SimpleAtoi(rest, &v)) return v * scale;
  }
  return -1;
}

int64_t PressureSomeTotalUs(absl::string_view text) {
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    if (!absl::ConsumePrefix(&line, "some ")) continue;
    for (absl::string_view field : absl::StrSplit(line, ' ', absl::SkipEmpty())) {
      int64_t v;
      if (absl::ConsumePrefix(&field, "total=") && absl::SimpleAtoi(field, &v)) return v;
    }
  }
  return -1;
}

std::unique_ptr<CgroupDriver> NewCgroupV1Driver(const std::string& root, Clock* clock) {
  return std::make_unique<V1Driver>(root, clock);
}
std::unique_ptr<CgroupDriver> NewCgroupV2Driver(const std::string& root, Clock* clock) {
  return std::make_unique<V2Driver>(root, clock);
}

absl::StatusOr<std::unique_ptr<CgroupDriver>> OpenCgroupDriver(const std::string& root, Clock* clock) {
  if (IsFile(root + "/cgroup.controllers")) return NewCgroupV2Driver(root, clock);
  if (IsDir(root + "/memory") && IsDir(root + "/cpu") && IsDir(root + "/cpuacct")) return NewCgroupV1Driver(root, clock);
  return absl::NotFoundError(absl::StrCat("no cgroups at ", root,
                                          " (neither v2's cgroup.controllers nor v1's memory, cpu, cpuacct)"));
}

}  // namespace herd::agent
