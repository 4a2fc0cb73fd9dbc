// AgentLink: how the master reaches one agent. The gRPC implementation lives
// in master/server; the simulator's simulated agents implement it too.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "herd/v1/agent.pb.h"

namespace herd::master {

class AgentLink {
 public:
  using Done = std::function<void(absl::StatusOr<v1::PollResponse>)>;

  virtual ~AgentLink() = default;
  // Sends the machine's desired state and returns its observed state.
  // Must return within timeout_ms (DEADLINE_EXCEEDED / UNAVAILABLE otherwise).
  virtual absl::StatusOr<v1::PollResponse> Poll(const std::string& address, const v1::PollRequest& request,
                                                int64_t timeout_ms) = 0;

  // Starts a poll and calls `done` exactly once with what Poll would have
  // returned, on any thread -- possibly this one, before returning. A link
  // that can keep many polls in flight (gRPC) overrides it, so a master
  // polls thousands of machines with a few threads; the default polls here.
  virtual void PollAsync(const std::string& address, const v1::PollRequest& request, int64_t timeout_ms, Done done) {
    done(Poll(address, request, timeout_ms));
  }

  // Ends every poll in flight at once (each `done` gets CANCELLED); called
  // when the master stops.
  virtual void CancelAll() {}
};

}  // namespace herd::master
