// MasterPart: one part of a master process that MasterLifecycle starts and
// stops (master/core/lifecycle.h): a thread, a server, a controller.
#pragma once

#include <functional>
#include <string>

#include "absl/status/status.h"

namespace herd::master {

struct MasterPart {
  std::string name;  // in logs and in MasterLifecycle::LeaderPartNames()
  // Starts its threads or servers (null: nothing to start). An error stops
  // the phase that started it.
  std::function<absl::Status()> start;
  // Stops it and waits for its threads (null: nothing to stop); called
  // only if start succeeded.
  std::function<void()> stop;
  // One round on the caller's thread, for the simulator (null: none).
  std::function<absl::Status()> step;
};

}  // namespace herd::master
