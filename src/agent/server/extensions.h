// The extensions an agent runs (supervisor/extension.h), built from its
// options: containers, ports, health checks, packages.
#pragma once

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/server/agent_server.h"
#include "agent/supervisor/extension.h"

namespace herd::agent {

// In the order the supervisor calls them. Fails if one cannot be set up
// (say, cgroups asked for but not mountable).
absl::StatusOr<std::vector<std::shared_ptr<Extension>>> BuildExtensions(const AgentOptions& options);

}  // namespace herd::agent
