// AgentLink: how the master reaches one agent. The gRPC implementation lives
// in master/server; the simulator's simulated agents implement it too.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "herd/v1/agent.pb.h"

namespace herd::master {

class AgentLink {
 public:
  virtual ~AgentLink() = default;
  // Sends the machine's desired state and returns its observed state.
  // Must return within timeout_ms (DEADLINE_EXCEEDED / UNAVAILABLE otherwise).
  virtual absl::StatusOr<v1::PollResponse> Poll(const std::string& address, const v1::PollRequest& request,
                                                int64_t timeout_ms) = 0;
};

}  // namespace herd::master
