#include "master/alerts/alert_manager.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include <curl/curl.h>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "base/exhaustive.h"
#include "base/log.h"
#include "base/priority.h"
#include "base/units.h"
#include "google/protobuf/util/json_util.h"
#include "master/core/admission/quota.h"
#include "master/core/committer.h"

extern char** environ;

namespace herd::master::alerts {
namespace {

constexpr int64_t kDayMs = 24 * 3600 * 1000;
constexpr int64_t kSinkTimeoutMs = 10'000;

// `s` as a JSON string literal.
std::string JsonString(absl::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(c);
    } else if (static_cast<unsigned char>(c) < 0x20) {
      absl::StrAppendFormat(&out, "\\u%04x", c);
    } else {
      out.push_back(c);
    }
  }
  out.push_back('"');
  return out;
}

std::string TaskName(const v1::TaskRef& ref) { return absl::StrCat(ref.job(), "/", ref.index()); }

// "file:line: key: message".
absl::Status At(const std::string& file, const YAML::Node& node, absl::string_view key, absl::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat(file, ":", node.Mark().line + 1, ": ", key, ": ", message));
}

// A duration, or false/0 for off.
absl::StatusOr<int64_t> DurationOrOff(const std::string& file, const YAML::Node& v, absl::string_view key) {
  const std::string text = v.Scalar();
  if (text == "false" || text == "off" || text == "0") return 0;
  absl::StatusOr<int64_t> ms = ParseDurationMs(text);
  if (!ms.ok() || *ms < 0) return At(file, v, key, absl::StrCat("'", text, "' is not a duration (e.g. 10m) or off"));
  return *ms;
}

}  // namespace

absl::StatusOr<Rules> ParseRules(const std::string& text, const std::string& file) {
  Rules rules;
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(file, ":", e.mark.line + 1, ": ", e.msg));
  }
  if (root.IsNull()) return rules;
  if (!root.IsMap()) return absl::InvalidArgumentError(absl::StrCat(file, ":1: expected a map of rules and sinks"));
  for (const auto& kv : root) {
    const std::string key = kv.first.Scalar();
    const YAML::Node& v = kv.second;
    if (key != "sinks" && !v.IsScalar()) return At(file, kv.first, key, "expected a single value");
    auto flag = [&](bool* out) -> absl::Status {
      const std::string s = v.Scalar();
      if (s == "true" || s == "on") {
        *out = true;
      } else if (s == "false" || s == "off") {
        *out = false;
      } else {
        return At(file, v, key, absl::StrCat("'", s, "' is not true or false"));
      }
      return absl::OkStatus();
    };
    absl::Status st;
    if (key == "crash_loop") {
      st = flag(&rules.crash_loop);
    } else if (key == "oom") {
      st = flag(&rules.oom);
    } else if (key == "machine_down") {
      st = flag(&rules.machine_down);
    } else if (key == "rollout_failed") {
      st = flag(&rules.rollout_failed);
    } else if (key == "pending") {
      absl::StatusOr<int64_t> ms = DurationOrOff(file, v, key);
      if (!ms.ok()) return ms.status();
      rules.pending_ms = *ms;
    } else if (key == "quiet") {
      absl::StatusOr<int64_t> ms = DurationOrOff(file, v, key);
      if (!ms.ok()) return ms.status();
      if (*ms < 1000) return At(file, v, key, "must be at least 1s");
      rules.quiet_ms = *ms;
    } else if (key == "evictions") {
      // N/WINDOW, e.g. 10/10m; or off.
      const std::string s = v.Scalar();
      if (s == "false" || s == "off" || s == "0") {
        rules.evictions = 0;
        continue;
      }
      std::vector<std::string> parts = absl::StrSplit(s, '/');
      int32_t n = 0;
      absl::StatusOr<int64_t> window = parts.size() == 2 ? ParseDurationMs(parts[1]) : absl::StatusOr<int64_t>(0);
      if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &n) || n < 1 || !window.ok() || *window < 1000) {
        return At(file, v, key, absl::StrCat("'", s, "' is not COUNT/WINDOW (e.g. 10/10m) or off"));
      }
      rules.evictions = n;
      rules.evictions_window_ms = *window;
    } else if (key == "quota") {
      const std::string s = v.Scalar();
      double pct = 0;
      if (s == "false" || s == "off") {
        rules.quota = 0;
        continue;
      }
      absl::string_view num = s;
      const bool percent = absl::ConsumeSuffix(&num, "%");
      if (!percent || !absl::SimpleAtod(num, &pct) || pct <= 0 || pct > 100) {
        return At(file, v, key, absl::StrCat("'", s, "' is not a percentage in (0%, 100%] (e.g. 90%) or off"));
      }
      rules.quota = pct / 100;
    } else if (key == "sinks") {
      if (!v.IsSequence()) return At(file, v, key, "expected a list of {command: [...]} or {webhook: URL}");
      for (const YAML::Node& s : v) {
        if (!s.IsMap() || s.size() != 1) return At(file, s, key, "each sink is {command: [...]} or {webhook: URL}");
        const std::string kind = s.begin()->first.Scalar();
        const YAML::Node& arg = s.begin()->second;
        if (kind == "command") {
          std::vector<std::string> argv;
          if (arg.IsSequence()) {
            for (const YAML::Node& a : arg) argv.push_back(a.Scalar());
          }
          if (argv.empty() || argv[0].empty() || argv[0][0] != '/') {
            return At(file, arg, "sinks.command", "expected a list whose first item is an absolute path");
          }
          rules.commands.push_back(std::move(argv));
        } else if (kind == "webhook") {
          const std::string url = arg.Scalar();
          if (!absl::StartsWith(url, "http://") && !absl::StartsWith(url, "https://")) {
            return At(file, arg, "sinks.webhook", absl::StrCat("'", url, "' is not an http:// or https:// URL"));
          }
          rules.webhooks.push_back(url);
        } else {
          return At(file, s, "sinks", absl::StrCat("unknown sink '", kind, "' (command or webhook)"));
        }
      }
    } else {
      return At(file, kv.first, key,
                "unknown key (crash_loop, oom, machine_down, rollout_failed, pending, evictions, quota, quiet, sinks)");
    }
    if (!st.ok()) return st;
  }
  return rules;
}

namespace {

// Runs argv with the notification on its stdin; killed after the timeout.
class Command final : public Sink {
 public:
  explicit Command(std::vector<std::string> argv) : argv_(std::move(argv)) {}
  std::string Name() const override { return absl::StrCat("command ", argv_[0]); }
  absl::Status Send(const std::string& json) override {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) return absl::InternalError(absl::StrCat("pipe: ", std::strerror(errno)));
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, fds[0], 0);
    std::vector<char*> argv;
    for (std::string& a : argv_) argv.push_back(a.data());
    argv.push_back(nullptr);
    pid_t pid = 0;
    const int rc = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    close(fds[0]);
    if (rc != 0) {
      close(fds[1]);
      return absl::FailedPreconditionError(absl::StrCat("cannot run ", argv_[0], ": ", std::strerror(rc)));
    }
    // A command that does not read its stdin must not block us (the
    // notification is small, well under a pipe's 64 KiB), nor kill us: a
    // write to a pipe whose reader is gone raises SIGPIPE, so it is blocked
    // in this thread for the write and a pending one is taken back.
    fcntl(fds[1], F_SETFL, O_NONBLOCK);
    sigset_t pipe_only, old;
    sigemptyset(&pipe_only);
    sigaddset(&pipe_only, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_only, &old);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(kSinkTimeoutMs);
    size_t sent = 0;
    bool broken = false;
    while (sent < json.size() && !broken && std::chrono::steady_clock::now() < deadline) {
      const ssize_t n = write(fds[1], json.data() + sent, json.size() - sent);
      if (n > 0) {
        sent += static_cast<size_t>(n);
      } else if (n < 0 && errno == EAGAIN) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));  // the command reads slowly
      } else if (n < 0 && errno != EINTR) {
        broken = true;  // EPIPE: it stopped reading
      }
    }
    if (broken) {
      const timespec zero{0, 0};
      while (sigtimedwait(&pipe_only, nullptr, &zero) == SIGPIPE) {
      }
    }
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
    close(fds[1]);
    int status = 0;
    while (waitpid(pid, &status, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > deadline) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        return absl::DeadlineExceededError(absl::StrCat(argv_[0], " ran longer than 10s; killed"));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      return absl::UnknownError(absl::StrCat(argv_[0], " failed (status ", status, ")"));
    }
    return absl::OkStatus();
  }

 private:
  std::vector<std::string> argv_;
};

size_t Discard(char*, size_t size, size_t n, void*) { return size * n; }

// POSTs the notification (application/json); a 2xx answer is success.
class Webhook final : public Sink {
 public:
  explicit Webhook(std::string url) : url_(std::move(url)) {}
  std::string Name() const override { return absl::StrCat("webhook ", url_); }
  absl::Status Send(const std::string& json) override {
    CURL* curl = curl_easy_init();
    if (curl == nullptr) return absl::InternalError("curl_easy_init failed");
    curl_slist* headers = curl_slist_append(nullptr, "Content-Type: application/json");
    curl_easy_setopt(curl, CURLOPT_URL, url_.c_str());
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, json.c_str());
    curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE, static_cast<long>(json.size()));
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, static_cast<long>(kSinkTimeoutMs));
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, Discard);
    const CURLcode rc = curl_easy_perform(curl);
    long code = 0;
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &code);
    curl_slist_free_all(headers);
    curl_easy_cleanup(curl);
    if (rc != CURLE_OK) return absl::UnavailableError(absl::StrCat(url_, ": ", curl_easy_strerror(rc)));
    if (code < 200 || code >= 300) return absl::UnavailableError(absl::StrCat(url_, " answered ", code));
    return absl::OkStatus();
  }

 private:
  std::string url_;
};

}  // namespace

std::unique_ptr<Sink> CommandSink(std::vector<std::string> argv) { return std::make_unique<Command>(std::move(argv)); }
std::unique_ptr<Sink> WebhookSink(std::string url) { return std::make_unique<Webhook>(std::move(url)); }

AlertManager::AlertManager(Rules rules, std::string cell, Clock* clock)
    : rules_(std::move(rules)), cell_(std::move(cell)), clock_(clock) {
  for (const auto& argv : rules_.commands) sinks_.push_back(CommandSink(argv));
  for (const auto& url : rules_.webhooks) sinks_.push_back(WebhookSink(url));
}

AlertManager::~AlertManager() { Stop(); }

void AlertManager::AddSink(std::unique_ptr<Sink> sink) { sinks_.push_back(std::move(sink)); }

void AlertManager::Start(Committer* committer, int64_t scan_ms) {
  committer_ = committer;
  // From the revision at the call: what is committed after Start returns
  // is seen, however late the thread gets going.
  const int64_t after = committer_->revision();
  thread_ = std::thread([this, scan_ms, after] { Loop(scan_ms, after); });
  sender_ = std::thread([this] { SendLoop(); });
}

void AlertManager::Stop() {
  {
    absl::MutexLock l(&mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
  if (sender_.joinable()) sender_.join();
}

namespace {
// Rules whose subject is a task ("alice/web/3").
bool IsTaskRule(absl::string_view rule) { return rule == "crash_loop" || rule == "oom"; }
}  // namespace

void AlertManager::Notify(const v1::Alert& a, const char* status) {
  if (sinks_.empty()) return;
  const bool task_rule = IsTaskRule(a.rule());
  if (queue_.size() >= (task_rule ? kMaxQueuedForTasks : kMaxQueued)) {
    ++dropped_;
    return;
  }
  std::string alert;
  google::protobuf::util::JsonPrintOptions opts;
  opts.preserve_proto_field_names = true;
  (void)google::protobuf::util::MessageToJsonString(a, &alert, opts);
  queue_.push_back(
      absl::StrCat("{\"status\":\"", status, "\",\"cell\":", JsonString(cell_), ",\"alert\":", alert, "}"));
}

void AlertManager::Fire(const std::string& rule, const std::string& subject, const std::string& full_message,
                        int64_t now) {
  // Messages carry text from tasks (an agent's message): bounded here.
  const std::string message = full_message.size() > kMaxMessageBytes
                                  ? absl::StrCat(full_message.substr(0, kMaxMessageBytes), "...")
                                  : full_message;
  if (IsTaskRule(rule) && !alerts_.contains({rule, subject})) {
    // Past kMaxTaskAlarmsPerJob of one job's tasks, the job's own alarm
    // counts the rest.
    const std::string job = subject.substr(0, subject.rfind('/'));
    const std::string prefix = job + "/";
    size_t firing = 0;
    for (auto it = alerts_.lower_bound({rule, prefix});
         it != alerts_.end() && it->first.first == rule && absl::StartsWith(it->first.second, prefix); ++it) {
      if (it->second.firing() && ++firing >= kMaxTaskAlarmsPerJob) break;
    }
    if (firing >= kMaxTaskAlarmsPerJob) {
      v1::Alert& j = alerts_[{rule, job}];
      const bool was_firing = j.firing();
      j.set_rule(rule);
      j.set_subject(job);
      j.set_message(absl::StrCat("more than ", kMaxTaskAlarmsPerJob, " tasks of ", job, " (", rule,
                                 "); the latest: ", message));
      j.set_last_ms(now);
      if (was_firing) {
        j.set_count(j.count() + 1);
        return;
      }
      j.set_firing(true);
      j.set_first_ms(now);
      j.set_resolved_ms(0);
      j.set_count(1);
      HERD_LOG_WARN("alert {} {}: {}", rule, job, j.message());
      Notify(j, "firing");
      return;
    }
  }
  v1::Alert& a = alerts_[{rule, subject}];
  a.set_last_ms(now);
  if (a.firing()) {
    a.set_count(a.count() + 1);
    a.set_message(message);
    return;
  }
  a.set_rule(rule);
  a.set_subject(subject);
  a.set_message(message);
  a.set_firing(true);
  a.set_first_ms(now);
  a.set_resolved_ms(0);
  a.set_count(1);
  HERD_LOG_WARN("alert {} {}: {}", rule, subject, message);
  Notify(a, "firing");
}

void AlertManager::Resolve(const Key& key, int64_t now) {
  auto it = alerts_.find(key);
  if (it == alerts_.end() || !it->second.firing()) return;
  it->second.set_firing(false);
  it->second.set_resolved_ms(now);
  HERD_LOG_INFO("alert {} {} resolved", key.first, key.second);
  Notify(it->second, "resolved");
}

void AlertManager::Observe(const v1::Mutation& m) {
  absl::MutexLock l(&mu_);
  const int64_t now = m.time_ms() > 0 ? m.time_ms() : clock_->NowMs();
  auto evicted = [&](int n) {
    if (rules_.evictions <= 0 || n <= 0) return;
    for (int i = 0; i < n; ++i) evictions_.push_back(now);
    while (!evictions_.empty() && evictions_.front() < now - rules_.evictions_window_ms) evictions_.pop_front();
    if (static_cast<int64_t>(evictions_.size()) > rules_.evictions) {
      Fire("evictions", "cell",
           absl::StrCat(evictions_.size(), " evictions and preemptions within ",
                        FormatDurationMs(rules_.evictions_window_ms), " (the rule: more than ", rules_.evictions, ")"),
           now);
    }
  };
  auto oom = [&](const v1::TaskRef& ref, int32_t restarts, bool killed) {
    if (!rules_.oom || !killed) return;
    if (!ooms_.insert({TaskName(ref), ref.incarnation(), restarts}).second) return;
    Fire("oom", TaskName(ref),
         absl::StrCat("task ", TaskName(ref), " was killed for using more memory than its limit"), now);
  };
  HERD_EXHAUSTIVE_BEGIN
  switch (m.kind_case()) {
    case v1::Mutation::kTaskRescheduled: {
      const v1::TaskRescheduled& r = m.task_rescheduled();
      if (absl::StartsWith(r.reason(), "crash loop") && rules_.crash_loop) {
        Fire("crash_loop", TaskName(r.task()), absl::StrCat("task ", TaskName(r.task()), ": ", r.reason()), now);
      } else if (absl::StartsWith(r.reason(), "evicted")) {
        evicted(1);
      }
      break;
    }
    case v1::Mutation::kTaskScheduled:
      evicted(m.task_scheduled().victims_size());
      break;
    case v1::Mutation::kTaskObserved:
      oom(m.task_observed().task(), m.task_observed().restarts(), m.task_observed().oom_killed());
      break;
    case v1::Mutation::kTaskExited:
      oom(m.task_exited().task(), m.task_exited().restarts(), m.task_exited().oom_killed());
      break;
    case v1::Mutation::kMachineDown:
      if (rules_.machine_down) {
        Fire("machine_down", m.machine_down().name(),
             absl::StrCat("machine ", m.machine_down().name(), " is down: ", m.machine_down().reason()), now);
      }
      break;
    case v1::Mutation::kMachineUp:
      Resolve({"machine_down", m.machine_up().name()}, now);
      break;
    // Kinds no event rule watches (the state rules see them in Scan).
    case v1::Mutation::kJobsSubmitted:
    case v1::Mutation::kJobKilled:
    case v1::Mutation::kTaskLost:
    case v1::Mutation::kMachineRegistered:
    case v1::Mutation::kQuotaSet:
    case v1::Mutation::kReservationsSet:
    case v1::Mutation::kMachinePackages:
    case v1::Mutation::kUserSet:
    case v1::Mutation::kJoinTokenSet:
    case v1::Mutation::kMachineDrained:
    case v1::Mutation::kJobUpdated:
    case v1::Mutation::kTasksUpdated:
    case v1::Mutation::kRolloutChanged:
    case v1::Mutation::kJobReleased:
    case v1::Mutation::kScheduleTriggered:
    case v1::Mutation::kMachineInterference:
    case v1::Mutation::KIND_NOT_SET:
      break;
  }
  HERD_EXHAUSTIVE_END
}

void AlertManager::Scan(const cell::CellState& state) {
  const int64_t now = clock_->NowMs();
  // What the state rules match now.
  std::map<Key, std::string> matched;
  if (rules_.pending_ms > 0) {
    for (const auto& [id, job] : state.jobs()) {
      // A WAITING job's tasks are held back on purpose (after:), not stuck.
      if (job->pending == 0 || job->waiting()) continue;
      int n = 0;
      int64_t oldest = now;
      for (const cell::Task& t : job->tasks) {
        if (t.state() != v1::Task::PENDING) continue;
        const int64_t since = t.last_event() != nullptr ? t.last_event()->time_ms : job->submit_time_ms;
        if (since <= now - rules_.pending_ms) {
          ++n;
          oldest = std::min(oldest, since);
        }
      }
      if (n > 0) {
        matched[{"pending", id}] =
            absl::StrCat(n, " task", n == 1 ? "" : "s", " of ", id, " pending for over ",
                         FormatDurationMs(rules_.pending_ms), " (the oldest ", FormatDurationMs(now - oldest),
                         "; herd why ", id, ")");
      }
    }
  }
  if (rules_.rollout_failed) {
    for (const auto& [id, job] : state.jobs()) {
      const v1::Rollout& r = job->rollout;
      if (r.state() != v1::Rollout::FAILED) continue;
      matched[{"rollout_failed", id}] =
          absl::StrCat("the update of ", id, " to version ", r.version(), " failed",
                       r.message().empty() ? "" : ": ", r.message(), " (herd history ", id, "; herd rollback ", id,
                       " or herd resume ", id, ")");
    }
  }
  if (rules_.machine_down) {
    for (const cell::Machine* m : state.machines()) {
      if (m->state() == v1::Machine::DOWN) matched[{"machine_down", m->name()}] = absl::StrCat("machine ", m->name(), " is down");
    }
  }
  if (rules_.quota > 0) {
    for (const auto& [key, q] : state.quotas()) {
      std::optional<Band> band = ParseBand(q.band());
      if (!band) continue;
      const ResourceVector used = state.Usage(q.user(), *band);
      const ResourceVector limit = ResourceVector::FromProto(q.limit());
      for (const std::string& dim : LimitedDimensions(q)) {
        const int64_t lim = limit.Get(dim);
        if (lim <= 0) continue;
        const double share = static_cast<double>(used.Get(dim)) / static_cast<double>(lim);
        if (share >= rules_.quota) {
          matched[{"quota", absl::StrCat(q.user(), "/", q.band())}] = absl::StrFormat(
              "%s's %s usage is %.0f%% of its %s quota (%s of %s)", q.user(), q.band(), 100 * share, dim,
              FormatDimension(dim, used.Get(dim)), FormatDimension(dim, lim));
          break;
        }
      }
    }
  }
  absl::MutexLock l(&mu_);
  for (const auto& [key, message] : matched) {
    auto it = alerts_.find(key);
    // A state alarm counts once per firing, not once per scan.
    if (it != alerts_.end() && it->second.firing()) {
      it->second.set_last_ms(now);
      it->second.set_message(message);
      continue;
    }
    Fire(key.first, key.second, message, now);
  }
  std::vector<Key> resolve;
  for (const auto& [key, a] : alerts_) {
    if (!a.firing()) continue;
    const bool state_rule = key.first == "pending" || key.first == "quota" || key.first == "machine_down" ||
                            key.first == "rollout_failed";
    if (state_rule ? !matched.contains(key) : a.last_ms() < now - rules_.quiet_ms) resolve.push_back(key);
  }
  for (const Key& k : resolve) Resolve(k, now);
  Trim(now);
}

void AlertManager::Trim(int64_t now) {
  for (auto it = alerts_.begin(); it != alerts_.end();) {
    it = !it->second.firing() && it->second.resolved_ms() < now - kDayMs ? alerts_.erase(it) : std::next(it);
  }
  if (alerts_.size() > kMaxAlerts) {
    // The oldest resolved first; firing ones only if nothing else is left.
    std::vector<std::tuple<bool, int64_t, Key>> order;
    order.reserve(alerts_.size());
    for (const auto& [key, a] : alerts_) order.emplace_back(a.firing(), a.last_ms(), key);
    std::sort(order.begin(), order.end());
    for (size_t i = 0; alerts_.size() > kMaxAlerts && i < order.size(); ++i) alerts_.erase(std::get<2>(order[i]));
  }
  for (auto it = ooms_.begin(); ooms_.size() > kMaxAlerts && it != ooms_.end();) it = ooms_.erase(it);
}

v1::ListAlertsResponse AlertManager::List(bool all) const {
  absl::MutexLock l(&mu_);
  std::vector<const v1::Alert*> out;
  for (const auto& [key, a] : alerts_) {
    if (a.firing() || all) out.push_back(&a);
  }
  std::sort(out.begin(), out.end(), [](const v1::Alert* a, const v1::Alert* b) {
    if (a->firing() != b->firing()) return a->firing();
    return a->first_ms() > b->first_ms();
  });
  v1::ListAlertsResponse r;
  for (const v1::Alert* a : out) *r.add_alerts() = *a;
  r.set_dropped_notifications(dropped_);
  return r;
}

void AlertManager::Loop(int64_t scan_ms, int64_t after) {
  // The scans' cadence is the process's own time; what they decide uses the
  // injected clock (Scan).
  auto last_scan = std::chrono::steady_clock::time_point();
  while (true) {
    {
      absl::MutexLock l(&mu_);
      if (stopping_) return;
    }
    absl::StatusOr<std::vector<v1::Mutation>> muts = committer_->WaitForMutations(after, 500, 5000);
    if (muts.ok()) {
      for (const v1::Mutation& m : *muts) {
        Observe(m);
        after = m.revision();
      }
    } else if (muts.status().code() == absl::StatusCode::kOutOfRange) {
      // Fell behind the in-memory feed: go on from its start (alarms are
      // about now, not about what the log holds).
      after = committer_->FeedStart() - 1;
    }
    const auto now = std::chrono::steady_clock::now();
    if (now - last_scan >= std::chrono::milliseconds(scan_ms)) {
      committer_->Read([&](const cell::CellState& s) {
        Scan(s);
        return 0;
      });
      last_scan = now;
    }
  }
}

void AlertManager::SendLoop() {
  while (true) {
    std::string next;
    {
      absl::MutexLock l(&mu_);
      auto ready = [&]() { return stopping_ || !queue_.empty(); };
      mu_.Await(absl::Condition(&ready));
      if (stopping_) return;  // what is left is dropped: the master is going
      next = std::move(queue_.front());
      queue_.pop_front();
    }
    for (const auto& sink : sinks_) {
      absl::Status st = sink->Send(next);
      if (!st.ok()) HERD_LOG_WARN("alert sink {}: {}", sink->Name(), st.ToString());
    }
  }
}

}  // namespace herd::master::alerts
