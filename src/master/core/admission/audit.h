// The audit log: every mutating request, every exec or log read and every
// refusal (a revoked credential and a refused act-as included), who
// asked (and on whose behalf, with which credential), what, on what, when,
// and whether it was allowed (and if not, why), one JSON object per line.
// It wraps the cell's Authorizer, so nothing that is decided escapes it.
//
//   {"time":"2026-11-25T00:42:19.123Z","who":"user bob","user":"bob","acting_for":"",
//    "credential":"5f3a...","action":"kill-job","on":"job alice/web","allowed":false,
//    "why":"user bob may not kill-job on job alice/web: it needs the permission 'admin'"}
//
// Lines are written whole (one write each) and flushed, not synced: a
// crash may lose the last lines, never corrupt earlier ones. The file is
// rotated at max_bytes (AUDIT.1 ... AUDIT.keep).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "absl/status/statusor.h"
#include "base/clock.h"
#include "master/core/admission/authorizer.h"

namespace herd::master {

class AuditLog {
 public:
  struct Options {
    std::string path;
    int64_t max_bytes = 64ll << 20;
    int keep = 5;
    // Records per second one user may add (and a burst): past it, that
    // user's records are counted, not written, and one line says how many
    // went, so no user can rotate the others' records away. 0: no limit.
    double per_user_rate = 20;
    double per_user_burst = 2000;
  };
  static absl::StatusOr<std::unique_ptr<AuditLog>> Open(Options options, Clock* clock);
  ~AuditLog();

  void Record(const Principal& who, Action action, const Resource& on, const absl::Status& decision);
  // A caller whose identity was refused (Authorizer::Unidentified).
  void RecordUnidentified(const std::string& name, const std::string& credential, const std::string& acting_as,
                          const absl::Status& why);
  // A join (Authorizer::Joined): who is "token ID from PEER", the action
  // join-machine, rate-limited per PEER (the caller's address).
  void RecordJoin(const std::string& peer, const std::string& token_id, const std::string& machine,
                  const absl::Status& outcome);

 private:
  AuditLog(Options o, Clock* clock) : options_(std::move(o)), clock_(clock) {}
  void RotateLocked();
  // Writes `line` if `user` is within its rate (first a line for what it
  // had suppressed).
  void WriteFor(const std::string& user, const std::string& line);
  void WriteLocked(const std::string& line);
  struct Bucket {
    double tokens = 0;
    int64_t last_ms = 0;
    int64_t suppressed = 0;
  };
  std::map<std::string, Bucket> buckets_;  // guarded by mu_

  const Options options_;
  Clock* const clock_;
  std::mutex mu_;
  int fd_ = -1;
  int64_t size_ = 0;
};

// True for what the audit log records: mutations, exec and log reads.
bool IsAudited(Action a);

// Asks `inner` and records audited decisions in `log`.
class AuditingAuthorizer final : public Authorizer {
 public:
  AuditingAuthorizer(std::shared_ptr<const Authorizer> inner, std::shared_ptr<AuditLog> log)
      : inner_(std::move(inner)), log_(std::move(log)) {}
  absl::Status Authorize(const Principal& who, Action action, const Resource& on) const override;
  void Unidentified(const std::string& name, const std::string& credential, const std::string& acting_as,
                    const absl::Status& why) const override {
    log_->RecordUnidentified(name, credential, acting_as, why);
  }
  void Joined(const std::string& peer, const std::string& token_id, const std::string& machine,
              const absl::Status& outcome) const override {
    log_->RecordJoin(peer, token_id, machine, outcome);
  }

 private:
  std::shared_ptr<const Authorizer> inner_;
  std::shared_ptr<AuditLog> log_;
};

}  // namespace herd::master
