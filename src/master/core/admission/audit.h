// The audit log: every mutating request and every exec or log read, who
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
  };
  static absl::StatusOr<std::unique_ptr<AuditLog>> Open(Options options, Clock* clock);
  ~AuditLog();

  void Record(const Principal& who, Action action, const Resource& on, const absl::Status& decision);

 private:
  AuditLog(Options o, Clock* clock) : options_(std::move(o)), clock_(clock) {}
  void RotateLocked();

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

 private:
  std::shared_ptr<const Authorizer> inner_;
  std::shared_ptr<AuditLog> log_;
};

}  // namespace herd::master
