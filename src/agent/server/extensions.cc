#include "agent/server/extensions.h"

namespace herd::agent {

absl::StatusOr<std::vector<std::shared_ptr<Extension>>> BuildExtensions(const AgentOptions& options) {
  std::vector<std::shared_ptr<Extension>> out;
  // Each feature adds its extension here, in this order: packages (the
  // root directory must exist before the container is set up), containers,
  // ports, health checks.
  return out;
}

}  // namespace herd::agent
