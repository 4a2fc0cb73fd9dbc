#include "agent/ports/ports_extension.h"

#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/log.h"

namespace herd::agent {

std::string EncodePorts(const PortMap& ports) {
  std::string out;
  for (const auto& [name, port] : ports) absl::StrAppend(&out, name, " ", port, "\n");
  return out;
}

absl::StatusOr<PortMap> DecodePorts(absl::string_view text) {
  PortMap ports;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipWhitespace())) {
    std::vector<absl::string_view> f = absl::StrSplit(line, ' ', absl::SkipEmpty());
    int32_t port = 0;
    if (f.size() != 2 || !absl::SimpleAtoi(f[1], &port) || port <= 0 || port > 65535) {
      return absl::DataLossError(absl::StrCat("bad ports line \"", line, "\""));
    }
    ports[std::string(f[0])] = port;
  }
  return ports;
}

std::string PortEnvName(absl::string_view name) {
  std::string out = "HERD_PORT_";
  for (char c : name) {
    unsigned char u = static_cast<unsigned char>(c);
    out.push_back(absl::ascii_isalnum(u) ? static_cast<char>(absl::ascii_toupper(u)) : '_');
  }
  return out;
}

void PortsExtension::Recovered(const RunView& run) {
  absl::StatusOr<std::string> text = ReadFile(run.dir.File(kPortsFile));
  if (!text.ok()) {
    // No ports asked for, or the agent died between allocating and writing
    // them: Prepare allocates afresh for the next attempt.
    if (!absl::IsNotFound(text.status())) {
      HERD_LOG_WARN("run {}: cannot read its ports: {}", run.spec.run_id(), text.status().ToString());
    }
    return;
  }
  absl::StatusOr<PortMap> ports = DecodePorts(*text);
  if (!ports.ok()) {
    HERD_LOG_WARN("run {}: {}", run.spec.run_id(), ports.status().ToString());
    return;
  }
  if (absl::Status st = allocator_->Reserve(run.spec.run_id(), *ports); !st.ok()) {
    // Two runs recorded the same port: cannot happen unless files were
    // copied by hand. The first keeps it; this one gets new ports on its
    // next attempt.
    HERD_LOG_ERROR("run {}: cannot take back its ports: {}", run.spec.run_id(), st.ToString());
  }
}

absl::Status PortsExtension::Prepare(const RunView& run, AttemptSetup* setup) {
  if (run.spec.port_names().empty()) return absl::OkStatus();
  const std::string& id = run.spec.run_id();
  std::vector<std::string> names;
  for (const std::string& name : run.spec.port_names()) {
    if (name.empty()) return absl::InvalidArgumentError("a named port has an empty name");
    names.push_back(name);
  }
  PortMap before = allocator_->PortsOf(id);
  absl::StatusOr<PortMap> ports = allocator_->Allocate(id, names);
  if (!ports.ok()) return ports.status();  // UNAVAILABLE: waits for a port to be freed
  if (*ports != before) {
    // On disk before the task learns them: a restarted agent must know
    // every port a running task may be listening on.
    if (absl::Status st = WriteFileAtomic(run.dir.File(kPortsFile), EncodePorts(*ports)); !st.ok()) {
      allocator_->Release(id);
      if (!before.empty()) (void)allocator_->Reserve(id, before);
      return absl::InternalError(absl::StrCat("cannot record ports: ", st.message()));
    }
    std::string list;
    for (const auto& [name, port] : *ports) absl::StrAppend(&list, list.empty() ? "" : " ", name, "=", port);
    HERD_LOG_INFO("run {}: ports {}", id, list);
  }
  for (const std::string& name : names) {
    int32_t port = ports->at(name);
    setup->env[PortEnvName(name)] = absl::StrCat(port);
    setup->substitutions["port." + name] = absl::StrCat(port);
  }
  return absl::OkStatus();
}

void PortsExtension::Released(const RunView& run) {
  if (allocator_->PortsOf(run.spec.run_id()).empty()) return;
  allocator_->Release(run.spec.run_id());
  // A run waiting for a port may start now rather than at its next check.
  if (control_ != nullptr) control_->Retry();
}

void PortsExtension::Describe(const RunView& run, v1::RunStatus* status) const {
  for (const auto& [name, port] : allocator_->PortsOf(run.spec.run_id())) (*status->mutable_ports())[name] = port;
}

std::optional<int32_t> PortsExtension::PortOf(const std::string& run_id, const std::string& port_name) const {
  PortMap ports = allocator_->PortsOf(run_id);
  auto it = ports.find(port_name);
  if (it == ports.end()) return std::nullopt;
  return it->second;
}

}  // namespace herd::agent
