// Stop signals for Herd's long-running roles (master, agent, scheduler,
// `herd up`): one latch, set by SIGINT or SIGTERM (and SIGHUP if asked), that
// any thread can wait on or test. The handler only sets a flag and posts a
// semaphore, both async-signal-safe. Once set, the latch stays set: a role
// that is stopping is stopping.
#pragma once

#include <cstdint>

namespace herd {

enum class Hangup {
  kDefault,  // leave SIGHUP as it is
  kStop,     // SIGHUP stops too (a terminal closing)
  kIgnore,   // ignore it (a detached process outliving its terminal)
};

// Installs the handlers (again is harmless) and ignores SIGPIPE (a peer that
// went away is an error on the write, not a reason to die).
void InstallStopSignalHandlers(Hangup hangup = Hangup::kDefault);

// Blocks until a stop signal has arrived and returns it, or returns 0 once
// `timeout_ms` (>= 0) has passed without one. Installs the handlers if they
// are not yet. Returns at once if a stop signal arrived earlier.
int WaitForStopSignal(int64_t timeout_ms = -1);

// True once a stop signal has arrived (for loops that must stop promptly).
bool StopSignalReceived();

}  // namespace herd
