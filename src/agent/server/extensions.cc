#include "agent/server/extensions.h"

#include <unistd.h>

#include <filesystem>

#include "agent/cgroup/cgroup_extension.h"
#include "agent/health/health_extension.h"
#include "agent/packages/isolation_extension.h"
#include "agent/packages/packages_extension.h"
#include "agent/packages/unpack.h"
#include "agent/ports/ports_extension.h"
#include "base/status.h"

namespace herd::agent {

absl::StatusOr<std::vector<std::shared_ptr<Extension>>> BuildExtensions(const AgentOptions& options) {
  std::vector<std::shared_ptr<Extension>> out;
  Clock* const clock = options.clock != nullptr ? options.clock : RealClock::Get();
  // Health checks' latency, read by the containers' interference control.
  auto slow_checks = std::make_shared<SlowChecks>();
  // Each feature adds its extension here, in this order: packages (the
  // root directory must exist before the container is set up), containers,
  // ports, health checks.
  {
    // Packages first (a run's packages, and a root built from them, are in
    // place before anything else sets an attempt up), then the isolation
    // options (namespaces, that root, a user).
    std::shared_ptr<TaskUsers> users;
    if (options.task_uid_count > 0) {
      TaskUsers::Options u;
      u.state_file = options.task_uid_file;
      if (u.state_file.empty()) {
        u.state_file = geteuid() == 0 ? std::string(kHostTaskUidFile) : options.root_dir + "/task-uids";
      }
      if (size_t slash = u.state_file.rfind('/'); slash != std::string::npos && slash > 0) {
        std::error_code ec;
        std::filesystem::create_directories(u.state_file.substr(0, slash), ec);
      }
      u.first_uid = options.task_uid_min;
      u.count = options.task_uid_count;
      HERD_ASSIGN_OR_RETURN(std::unique_ptr<TaskUsers> opened, TaskUsers::Open(u));
      users = std::move(opened);
    }
    PackagesExtension::Options p;
    p.cache.dir = options.package_dir.empty() ? options.root_dir + "/packages" : options.package_dir;
    p.cache.budget_bytes = options.package_cache_bytes;
    p.cache.local_dirs = options.package_file_dirs;
    // Package servers may hold certificates the cell issued.
    p.cache.fetch.extra_ca_pem = options.identity.ca_pem;
    p.cache.fetch.max_bytes = options.package_max_bytes > 0 ? options.package_max_bytes : options.package_cache_bytes;
    p.cache.clock = clock;
    // tar runs as an account of its own, never as root (unpack.h).
    if (users != nullptr && geteuid() == 0) {
      p.cache.unpack_account = [users, account = UnpackAccount(options.name)] { return users->For(account); };
    }
    HERD_ASSIGN_OR_RETURN(std::shared_ptr<PackagesExtension> packages, PackagesExtension::Create(std::move(p)));
    out.push_back(std::move(packages));
    out.push_back(std::make_shared<IsolationExtension>(std::move(users)));
  }
  {
    // Containers. Keep after packages (a root built from packages must exist
    // before the task's group is set up) and before ports and health checks.
    // cgroup_root "none", or cgroups not usable here: no containers (the
    // extension then only reports machine usage and evicts by requests).
    CgroupOptions c;
    c.root = options.cgroup_root;
    c.parent = options.cgroup_parent;
    c.agent_name = options.name;
    c.owner_dir = options.root_dir;
    c.colocation = options.colocation;
    c.cpu_pinning = options.cpu_pinning && options.colocation;
    if (options.batch_box && options.colocation) {
      c.batch_box_cpu_millis = options.capacity.cpu_millis;
      c.batch_box_memory_bytes = options.capacity.memory_bytes;
    }
    c.memory_reserve_bytes = options.memory_reserve_bytes;
    c.disk_reserve_bytes = options.disk_reserve_bytes;
    if (options.capacity_given) c.capacity_memory_bytes = options.capacity.memory_bytes;
    c.clock = clock;
    c.slow_checks = slow_checks;
    out.push_back(CgroupExtension::Create(std::move(c)));
  }
  {
    // Ports, then health checks (which probe the ports allocated here).
    auto ports = std::make_shared<PortsExtension>(
        std::make_shared<PortAllocator>(options.port_min, options.port_max));
    out.push_back(ports);
    HealthExtension::Options h;
    h.ports = [ports](const std::string& run_id, const std::string& name) { return ports->PortOf(run_id, name); };
    h.shim_path = options.shim_path;
    h.clock = clock;
    h.slow_checks = slow_checks;
    out.push_back(std::make_shared<HealthExtension>(std::move(h)));
  }
  return out;
}

}  // namespace herd::agent
