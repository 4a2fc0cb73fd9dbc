// RunTable: what the agent's protocol (agent/server/agent_protocol.h) needs
// of whatever runs tasks on a machine -- the desired runs in, the observed
// runs out. The Supervisor implements it with real processes; hollow agents
// (agent/hollow/) implement it in memory, so that a benchmark can run
// thousands of agents' real protocol code in one process (as kubemark runs
// the real kubelet with a fake container runtime).
#pragma once

#include <cstdint>
#include <vector>

#include "herd/v1/agent.pb.h"

namespace herd::agent {

class RunTable {
 public:
  virtual ~RunTable() = default;
  // The complete set of runs wanted here (see Supervisor::SetDesired).
  virtual void SetDesired(const std::vector<v1::TaskRun>& desired) = 0;
  // Every known run, sorted by run_id; `version` (if given) receives the
  // state version the result corresponds to.
  virtual std::vector<v1::RunStatus> Observe(uint64_t* version = nullptr) const = 0;
  // Blocks until the state's version differs from `last_version` or
  // `timeout_ms` passed; returns the current version.
  virtual uint64_t WaitForChange(uint64_t last_version, int64_t timeout_ms) const = 0;
  // The current state version, without copying the runs.
  virtual uint64_t Version() const = 0;
  // Machine-wide facts for a poll reply (usage, package cache, cgroups).
  virtual void DescribeMachine(v1::PollResponse* response) const = 0;
  // Wall time (ms) this table was created (PollResponse.agent_started_ms).
  virtual int64_t started_ms() const = 0;
  // The master acknowledged a contact that happened `contact_age_ms` ago:
  // the machine's lease for at-most-once runs now lasts until `lease_ms`
  // after that contact (see PollRequest.lease_ms). A table without such
  // runs may ignore it.
  virtual void RenewLease(int64_t contact_age_ms, int64_t lease_ms) {}
};

}  // namespace herd::agent
