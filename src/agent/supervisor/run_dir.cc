#include "agent/supervisor/run_dir.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "agent/runtime/shim_protocol.h"
#include "base/files.h"
#include "base/status.h"
#include "base/errno_status.h"
#include "agent/runtime/process.h"

namespace herd::agent {
namespace {

constexpr char kSpecFile[] = "run.pb";
constexpr char kStateFile[] = "state";
constexpr char kDefaultPath[] = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

absl::Status Unlink(const std::string& path) {
  if (unlink(path.c_str()) != 0 && errno != ENOENT) {
    return ErrnoToStatus(errno, absl::StrCat("unlink ", path));
  }
  return absl::OkStatus();
}

template <typename T>
bool ParseInt(absl::string_view text, T* out) {
  return absl::SimpleAtoi(text, out);
}

}  // namespace

std::string EncodeRunState(const RunState& s) {
  // One key per line; the message is the only free text, kept to one line.
  auto one_line = [](const std::string& text) {
    return absl::StrReplaceAll(text, {{"\n", " "}, {"\r", " "}});
  };
  return absl::StrCat("phase=", v1::Task::Phase_Name(s.phase), "\n",
                      "desired=", s.desired ? 1 : 0, "\n",
                      "terminal=", s.terminal ? 1 : 0, "\n",
                      "removed=", s.removed ? 1 : 0, "\n",
                      "removed_ms=", s.removed_ms, "\n",
                      "restarts=", s.restarts, "\n",
                      "exit_code=", s.exit_code, "\n",
                      "exit_signal=", s.exit_signal, "\n",
                      "started_ms=", s.started_ms, "\n",
                      "backoff_ms=", s.backoff_ms, "\n",
                      "shim_pid=", s.shim.pid, "\n",
                      "shim_start=", s.shim.start_time, "\n",
                      "quick_failures=", s.quick_failures, "\n",
                      "oom=", s.oom ? 1 : 0, "\n",
                      "evicted=", s.evicted ? 1 : 0, "\n",
                      "last_exit=", one_line(s.last_exit), "\n",
                      "message=", one_line(s.message), "\n");
}

absl::StatusOr<RunState> DecodeRunState(absl::string_view text) {
  RunState s;
  bool saw_phase = false;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    std::pair<absl::string_view, absl::string_view> kv = absl::StrSplit(line, absl::MaxSplits('=', 1));
    absl::string_view key = kv.first, value = kv.second;
    bool ok = true;
    int flag = 0;
    if (key == "phase") {
      ok = v1::Task::Phase_Parse(std::string(value), &s.phase);
      saw_phase = ok;
    } else if (key == "desired") {
      ok = ParseInt(value, &flag);
      s.desired = flag != 0;
    } else if (key == "terminal") {
      ok = ParseInt(value, &flag);
      s.terminal = flag != 0;
    } else if (key == "removed") {
      ok = ParseInt(value, &flag);
      s.removed = flag != 0;
    } else if (key == "removed_ms") {
      ok = ParseInt(value, &s.removed_ms);
    } else if (key == "restarts") {
      ok = ParseInt(value, &s.restarts);
    } else if (key == "exit_code") {
      ok = ParseInt(value, &s.exit_code);
    } else if (key == "exit_signal") {
      ok = ParseInt(value, &s.exit_signal);
    } else if (key == "started_ms") {
      ok = ParseInt(value, &s.started_ms);
    } else if (key == "backoff_ms") {
      ok = ParseInt(value, &s.backoff_ms);
    } else if (key == "shim_pid") {
      ok = ParseInt(value, &s.shim.pid);
    } else if (key == "shim_start") {
      ok = ParseInt(value, &s.shim.start_time);
    } else if (key == "quick_failures") {
      ok = ParseInt(value, &s.quick_failures);
    } else if (key == "oom") {
      ok = ParseInt(value, &flag);
      s.oom = flag != 0;
    } else if (key == "evicted") {
      ok = ParseInt(value, &flag);
      s.evicted = flag != 0;
    } else if (key == "last_exit") {
      s.last_exit = std::string(value);
    } else if (key == "message") {
      s.message = std::string(value);
    }  // unknown keys: written by a newer agent; ignore
    if (!ok) return absl::DataLossError(absl::StrCat("bad run state line \"", line, "\""));
  }
  if (!saw_phase) return absl::DataLossError("run state has no phase");
  return s;
}

absl::Status ValidateRunId(absl::string_view run_id) {
  if (run_id.empty() || run_id.size() > 200 || run_id[0] == '.') {
    return absl::InvalidArgumentError(absl::StrCat("bad run id \"", run_id, "\""));
  }
  for (char c : run_id) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '.' && c != ':' &&
        c != '-') {
      return absl::InvalidArgumentError(absl::StrCat("bad run id \"", run_id, "\""));
    }
  }
  return absl::OkStatus();
}

std::string RunDir::File(absl::string_view name) const { return absl::StrCat(path_, "/", name); }

absl::Status RunDir::Create() const {
  // Private: the directory lets the task's uid pass through to its sandbox
  // (0711) and every file in it is the agent's alone (0600: run.pb holds the
  // env, secrets included, and the logs are the task's output). The sandbox
  // is 0700, handed to the task's uid by IsolationExtension.
  for (auto [dir, mode] : {std::pair{path_, 0711}, std::pair{Sandbox(), 0700}}) {
    HERD_RETURN_IF_ERROR(MakeDir(dir, mode));
    // Exactly this mode, whatever the umask; through the directory held,
    // never a symlink in its place.
    absl::StatusOr<Fd> held = OpenDirectory(dir);
    if (!held.ok()) return held.status();
    if (fchmod(held->get(), mode) != 0) return ErrnoToStatus(errno, absl::StrCat("chmod ", dir));
  }
  return absl::OkStatus();
}

absl::Status RunDir::WriteSpec(const v1::TaskRun& spec) const {
  std::string bytes;
  if (!spec.SerializeToString(&bytes)) return absl::InternalError("cannot serialize TaskRun");
  // Not synced: a lost spec is sent again by the master.
  return WriteFileAtomic(File(kSpecFile), bytes, {.durable = false});
}

absl::StatusOr<v1::TaskRun> RunDir::ReadSpec() const {
  absl::StatusOr<std::string> bytes = ReadFile(File(kSpecFile));
  if (!bytes.ok()) return bytes.status();
  v1::TaskRun spec;
  if (!spec.ParseFromString(*bytes)) return absl::DataLossError("corrupt " + File(kSpecFile));
  return spec;
}

namespace {
// States longer than this (never, in practice) are written the old way.
constexpr size_t kStateInPlaceMax = 4096;
}  // namespace

absl::Status RunDir::WriteState(const RunState& state) const {
  // In place, not a new file renamed over the old: a run's state is written
  // two or three times per start, and each new file is an inode made and
  // the old one freed -- on a file system without a journal, allocating
  // inodes while many were freed moments ago scans past each of them
  // (ext4's recently_deleted), which took a third of the agents' CPU in a
  // burst of starts. The record is one write of less than a block (a kill
  // cannot tear it; like the rename, it is not synced), padded with blank
  // lines, which the reader skips, to the old length so the file never
  // shrinks and needs no truncate.
  std::string text = EncodeRunState(state);
  if (text.size() > kStateInPlaceMax) return WriteFileAtomic(File(kStateFile), text, {.durable = false});
  const std::string path = File(kStateFile);
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return ErrnoToStatus(errno, path);
  Fd owned(fd);
  struct stat st;
  if (fstat(fd, &st) != 0) return ErrnoToStatus(errno, path);
  if (st.st_size > static_cast<off_t>(kStateInPlaceMax)) {
    owned.Reset();
    return WriteFileAtomic(path, text, {.durable = false});
  }
  if (static_cast<off_t>(text.size()) < st.st_size) text.append(static_cast<size_t>(st.st_size) - text.size(), '\n');
  const ssize_t n = pwrite(fd, text.data(), text.size(), 0);
  if (n < 0) return ErrnoToStatus(errno, path);
  if (static_cast<size_t>(n) != text.size()) return absl::InternalError(absl::StrCat("short write to ", path));
  return absl::OkStatus();
}

absl::StatusOr<RunState> RunDir::ReadState() const {
  absl::StatusOr<std::string> text = ReadFile(File(kStateFile));
  if (!text.ok()) return text.status();
  return DecodeRunState(*text);
}

absl::Status RunDir::ClearAttempt() const {
  HERD_RETURN_IF_ERROR(Unlink(File(shim::kTaskPidFile)));
  return Unlink(File(shim::kExitFile));
}

std::map<std::string, std::string> TaskEnvironment(const v1::TaskRun& spec, const RunDir& dir,
                                                   const std::map<std::string, std::string>& extra) {
  std::map<std::string, std::string> env;
  auto add = [&](const std::string& key, const std::string& value) {
    // A key with '=' or NUL cannot be expressed in an environment.
    if (key.empty() || key.find('=') != std::string::npos || key.find('\0') != std::string::npos) return;
    env[key] = value;
  };
  for (const auto& [key, value] : spec.env()) add(key, value);
  for (const auto& [key, value] : extra) add(key, value);
  env["HERD_TASK_INDEX"] = absl::StrCat(spec.ref().index());
  env["HERD_JOB"] = spec.ref().job();
  env["HERD_RUN_ID"] = spec.run_id();
  env["HERD_TASK_DIR"] = dir.Sandbox();
  if (env.find("PATH") == env.end()) env["PATH"] = kDefaultPath;
  return env;
}

std::string SubstituteVariables(absl::string_view text, const std::map<std::string, std::string>& vars) {
  if (vars.empty() || text.find("${") == absl::string_view::npos) return std::string(text);
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    size_t open = text.find("${", i);
    if (open == absl::string_view::npos) break;
    size_t close = text.find('}', open + 2);
    if (close == absl::string_view::npos) break;
    absl::StrAppend(&out, text.substr(i, open - i));
    auto it = vars.find(std::string(text.substr(open + 2, close - open - 2)));
    if (it != vars.end()) {
      out.append(it->second);
    } else {
      absl::StrAppend(&out, text.substr(open, close + 1 - open));
    }
    i = close + 1;
  }
  absl::StrAppend(&out, text.substr(i));
  return out;
}

absl::StatusOr<std::string> PrepareWorkdir(const v1::TaskRun& spec, const RunDir& dir) {
  const std::string& workdir = spec.workdir();
  if (workdir.empty()) return dir.Sandbox();
  if (workdir[0] == '/') return workdir;
  std::string path = dir.Sandbox();
  for (absl::string_view part : absl::StrSplit(workdir, '/', absl::SkipEmpty())) {
    if (part == "..") return absl::InvalidArgumentError("workdir escapes the sandbox: " + workdir);
    if (part != ".") absl::StrAppend(&path, "/", part);
  }
  // The sandbox is the task's to change: made through descriptors, never
  // following a symlink the task left where a directory was (the agent is
  // root; the shim enters the directory only as the task's uid).
  absl::StatusOr<Fd> sandbox = OpenDirectory(dir.Sandbox());
  if (!sandbox.ok()) return sandbox.status();
  absl::StatusOr<Fd> made = MakeDirsBeneath(sandbox->get(), workdir, 0755);
  if (!made.ok()) return absl::FailedPreconditionError(absl::StrCat("workdir ", workdir, ": ", made.status().message()));
  return path;
}

}  // namespace herd::agent
