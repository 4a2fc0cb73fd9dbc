#include "master/core/admission/audit.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <ctime>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "base/errno_status.h"

namespace herd::master {

namespace {

std::string Rfc3339(int64_t unix_ms) {
  std::time_t s = unix_ms / 1000;
  std::tm tm{};
  gmtime_r(&s, &tm);
  char buf[40];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
  char out[64];
  std::snprintf(out, sizeof(out), "%s.%03dZ", buf, static_cast<int>(unix_ms % 1000));
  return out;
}

}  // namespace

bool IsAudited(Action a) { return IsMutating(a) || a == Action::kExecTask || a == Action::kReadLogs; }

absl::StatusOr<std::unique_ptr<AuditLog>> AuditLog::Open(Options options, Clock* clock) {
  std::unique_ptr<AuditLog> log(new AuditLog(std::move(options), clock));
  log->fd_ = open(log->options_.path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (log->fd_ < 0) return ErrnoToStatus(errno, absl::StrCat("open the audit log ", log->options_.path));
  struct stat st;
  if (fstat(log->fd_, &st) == 0) log->size_ = st.st_size;
  return log;
}

AuditLog::~AuditLog() {
  if (fd_ >= 0) close(fd_);
}

void AuditLog::RotateLocked() {
  for (int k = options_.keep - 1; k >= 1; --k) {
    rename(absl::StrCat(options_.path, ".", k).c_str(), absl::StrCat(options_.path, ".", k + 1).c_str());
  }
  rename(options_.path.c_str(), absl::StrCat(options_.path, ".1").c_str());
  close(fd_);
  fd_ = open(options_.path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  size_ = 0;
}

void AuditLog::Record(const Principal& who, Action action, const Resource& on, const absl::Status& decision) {
  nlohmann::json j;
  j["time"] = Rfc3339(clock_->NowMs());
  j["who"] = who.ToString();
  j["user"] = who.acting_user.empty() ? who.name : who.acting_user;
  j["acting_for"] = who.acting_user.empty() ? "" : who.name;
  j["credential"] = who.credential;
  j["action"] = std::string(ActionName(action));
  j["on"] = on.ToString();
  j["allowed"] = decision.ok();
  if (!decision.ok()) j["why"] = std::string(decision.message());
  // Names come from users: replace what is not UTF-8 rather than throw.
  WriteFor(who.acting_user.empty() ? who.name : who.acting_user,
           j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
}

void AuditLog::RecordUnidentified(const std::string& name, const std::string& credential,
                                  const std::string& acting_as, const absl::Status& why) {
  nlohmann::json j;
  j["time"] = Rfc3339(clock_->NowMs());
  j["who"] = absl::StrCat("user ", name);
  j["user"] = name;
  j["acting_for"] = acting_as;
  j["credential"] = credential;
  j["action"] = "identify";
  j["on"] = "the cell";
  j["allowed"] = false;
  j["why"] = std::string(why.message());
  WriteFor(name, j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
}

void AuditLog::RecordJoin(const std::string& peer, const std::string& token_id, const std::string& machine,
                          const absl::Status& outcome) {
  nlohmann::json j;
  j["time"] = Rfc3339(clock_->NowMs());
  j["who"] = absl::StrCat("join token ", token_id, " from ", peer);
  j["user"] = absl::StrCat("join@", peer);
  j["acting_for"] = "";
  j["credential"] = "";
  j["action"] = "join-machine";
  j["on"] = absl::StrCat("machine ", machine);
  j["allowed"] = outcome.ok();
  if (!outcome.ok()) j["why"] = std::string(outcome.message());
  // Held to a rate by the caller's address, which it cannot choose as it
  // chooses token ids.
  WriteFor(absl::StrCat("join@", peer), j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
}

void AuditLog::WriteFor(const std::string& user, const std::string& line) {
  std::lock_guard l(mu_);
  if (options_.per_user_rate > 0) {
    const int64_t now = clock_->MonotonicMs();
    if (buckets_.size() > 100'000) buckets_.clear();  // bounded: forgetting only refills buckets
    auto [it, fresh] = buckets_.try_emplace(user);
    Bucket& b = it->second;
    if (fresh) {
      b.tokens = options_.per_user_burst;
    } else {
      b.tokens = std::min(options_.per_user_burst,
                          b.tokens + static_cast<double>(now - b.last_ms) / 1000.0 * options_.per_user_rate);
    }
    b.last_ms = now;
    if (b.tokens < 1) {
      ++b.suppressed;
      return;
    }
    b.tokens -= 1;
    if (b.suppressed > 0) {
      nlohmann::json s;
      s["time"] = Rfc3339(clock_->NowMs());
      s["user"] = user;
      s["suppressed"] = b.suppressed;
      s["why"] = absl::StrCat("over the audit rate of ", options_.per_user_rate, " records a second");
      WriteLocked(s.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
      b.suppressed = 0;
    }
  }
  WriteLocked(line);
}

void AuditLog::WriteLocked(const std::string& line) {
  if (fd_ < 0) return;
  if (size_ + static_cast<int64_t>(line.size()) > options_.max_bytes && size_ > 0) RotateLocked();
  if (fd_ < 0) return;
  if (write(fd_, line.data(), line.size()) == static_cast<ssize_t>(line.size())) size_ += line.size();
}

absl::Status AuditingAuthorizer::Authorize(const Principal& who, Action action, const Resource& on) const {
  absl::Status st = inner_->Authorize(who, action, on);
  // The master's own parts (its scheduler committing placements) are the
  // cell at work, not requests.
  // Every refusal too: a refused export or act-as is what an audit is for.
  if ((IsAudited(action) || !st.ok()) && who.kind != Principal::Kind::kInternal) log_->Record(who, action, on, st);
  return st;
}

}  // namespace herd::master
