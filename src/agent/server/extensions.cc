#include "agent/server/extensions.h"

#include "agent/health/health_extension.h"
#include "agent/ports/ports_extension.h"

namespace herd::agent {

absl::StatusOr<std::vector<std::shared_ptr<Extension>>> BuildExtensions(const AgentOptions& options) {
  std::vector<std::shared_ptr<Extension>> out;
  // Each feature adds its extension here, in this order: packages (the
  // root directory must exist before the container is set up), containers,
  // ports, health checks.
  {
    // Ports, then health checks (which probe the ports allocated here).
    auto ports = std::make_shared<PortsExtension>(
        std::make_shared<PortAllocator>(options.port_min, options.port_max));
    out.push_back(ports);
    HealthExtension::Options h;
    h.ports = [ports](const std::string& run_id, const std::string& name) { return ports->PortOf(run_id, name); };
    h.shim_path = options.shim_path;
    out.push_back(std::make_shared<HealthExtension>(std::move(h)));
  }
  return out;
}

}  // namespace herd::agent
