// What to do when a task attempt ends: restart it in place after a backoff,
// or declare the run over. Pure functions, no I/O.
#pragma once

#include <cstdint>
#include <string>

#include "agent/runtime/process.h"
#include "herd/v1/objects.pb.h"

namespace herd::agent {

// Defaults for a RestartPolicy whose fields are unset (0).
inline constexpr int64_t kDefaultBackoffInitialMs = 1'000;
inline constexpr int64_t kDefaultBackoffMaxMs = 60'000;
// An attempt that ran at least this long resets the backoff delay to the
// initial value (a service that crashes once a day should not wait minutes).
inline constexpr int64_t kBackoffResetAfterMs = 10 * 60'000;

struct RestartDecision {
  bool restart = false;
  int64_t delay_ms = 0;  // when restarting: wait this long first
  // Human-readable: "exited with code 3; restart 2 in 400ms" or
  // "exited with code 3; gave up after 5 restarts".
  std::string message;
};

// `restarts` is how many times this run was already restarted;
// `last_delay_ms` the delay used before the previous restart (0 if none);
// `ran_ms` how long the ended attempt ran.
RestartDecision DecideRestart(const v1::RestartPolicy& policy, const ExitStatus& exit,
                              int32_t restarts, int64_t last_delay_ms, int64_t ran_ms);

}  // namespace herd::agent
