// SimulatedAgents: every machine's agent, in memory, behind the master's own
// AgentLink interface. An agent obeys its desired state at once: new runs
// become ACTIVE at the current virtual time, runs no longer desired vanish;
// a run ends (exit 0, or a given code) when its scripted end time passes.
// Machines can be taken away (they stop answering) and brought back.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "base/clock.h"
#include "herd/v1/agent.pb.h"
#include "master/core/link/agent_link.h"

namespace herd::sim {

class SimulatedAgents final : public master::AgentLink {
 public:
  // When a run that starts now ends: (virtual end time, exit code), or
  // nullopt to run until stopped.
  using Script = std::function<std::optional<std::pair<int64_t, int32_t>>(const v1::TaskRun& run, int64_t start_ms)>;

  explicit SimulatedAgents(Clock* clock) : clock_(clock) {}
  void SetScript(Script script) { script_ = std::move(script); }

  absl::StatusOr<v1::PollResponse> Poll(const std::string& address, const v1::PollRequest& request,
                                        int64_t timeout_ms) override;

  void SetReachable(const std::string& address, bool reachable);
  int64_t runs() const;     // runs alive on all agents
  int64_t started() const;  // runs ever started

 private:
  struct Run {
    v1::RunStatus status;
    std::optional<int64_t> end_ms;
    int32_t exit_code = 0;
  };
  struct Agent {
    bool reachable = true;
    std::map<std::string, Run> runs;
  };
  Clock* const clock_;
  Script script_;
  mutable std::mutex mu_;
  std::map<std::string, Agent> agents_;
  int64_t started_ = 0;
  int64_t next_pid_ = 100;
};

}  // namespace herd::sim
