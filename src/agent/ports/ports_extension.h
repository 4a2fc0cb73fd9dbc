// The ports extension: a run's named ports (TaskRun.port_names), allocated
// from the agent's range once per run (restarts keep them), written to
// RUN_DIR/ports so a restarted agent takes them back, passed to the task as
// HERD_PORT_<NAME> and ${port.NAME}, and reported in RunStatus.ports.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "agent/ports/port_allocator.h"
#include "agent/supervisor/extension.h"

namespace herd::agent {

// RUN_DIR/ports: one "NAME PORT" line per named port.
inline constexpr char kPortsFile[] = "ports";
std::string EncodePorts(const PortMap& ports);
absl::StatusOr<PortMap> DecodePorts(absl::string_view text);

// "HERD_PORT_" + NAME upper-cased, anything but [A-Z0-9] as '_'
// ("grpc-web" -> HERD_PORT_GRPC_WEB).
std::string PortEnvName(absl::string_view name);

class PortsExtension : public Extension {
 public:
  explicit PortsExtension(std::shared_ptr<PortAllocator> allocator) : allocator_(std::move(allocator)) {}

  absl::string_view name() const override { return "ports"; }
  absl::Status Init(SupervisorControl* control) override {
    control_ = control;
    return absl::OkStatus();
  }
  void Recovered(const RunView& run) override;
  absl::Status Prepare(const RunView& run, AttemptSetup* setup) override;
  void Released(const RunView& run) override;
  void Describe(const RunView& run, v1::RunStatus* status) const override;

  // The port of a run's named port, if allocated (for health checks).
  std::optional<int32_t> PortOf(const std::string& run_id, const std::string& port_name) const;
  const std::shared_ptr<PortAllocator>& allocator() const { return allocator_; }

 private:
  const std::shared_ptr<PortAllocator> allocator_;
  SupervisorControl* control_ = nullptr;
};

}  // namespace herd::agent
