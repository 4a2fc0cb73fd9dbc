#include "agent/supervisor/restart_policy.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace herd::agent {

RestartDecision DecideRestart(const v1::RestartPolicy& policy, const ExitStatus& exit,
                              int32_t restarts, int64_t last_delay_ms, int64_t ran_ms) {
  RestartDecision d;
  std::string what = exit.Describe();
  bool wants_restart = false;
  const char* why_not = "";
  switch (policy.mode()) {
    case v1::RestartPolicy::ALWAYS:
      wants_restart = true;
      break;
    case v1::RestartPolicy::NEVER:
      why_not = "restart policy NEVER";
      break;
    default:  // ON_FAILURE is the default
      wants_restart = !exit.success();
      break;
  }
  if (wants_restart && exit.permanent) {
    d.message = absl::StrCat(what, "; not restarted (retrying cannot help)");
    return d;
  }
  if (!wants_restart) {
    d.message = exit.success() ? what : absl::StrCat(what, "; not restarted (", why_not, ")");
    return d;
  }
  if (policy.max_restarts() > 0 && restarts >= policy.max_restarts()) {
    d.message = absl::StrCat(what, "; gave up after ", restarts, " restart", restarts == 1 ? "" : "s");
    return d;
  }
  int64_t initial = policy.backoff_initial_ms() > 0 ? policy.backoff_initial_ms() : kDefaultBackoffInitialMs;
  int64_t max = policy.backoff_max_ms() > 0 ? policy.backoff_max_ms() : std::max(initial, kDefaultBackoffMaxMs);
  max = std::max(max, initial);
  if (last_delay_ms <= 0 || ran_ms >= kBackoffResetAfterMs) {
    d.delay_ms = initial;
  } else {
    d.delay_ms = std::min(max, last_delay_ms * 2);
  }
  d.restart = true;
  d.message = absl::StrCat(what, "; restart ", restarts + 1, " in ", d.delay_ms, "ms");
  return d;
}

}  // namespace herd::agent
