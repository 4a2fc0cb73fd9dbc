// The agent's half of the master-agent protocol, apart from the gRPC server
// and from how runs are run (a RunTable): answering polls (full and delta),
// registering with the master, and ringing the master's doorbell. `herd
// agent` drives these with its own threads; hollow agents (agent/hollow/)
// drive thousands of them from a few, over the same code.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "agent/supervisor/run_table.h"
#include "base/clock.h"
#include "base/resources.h"
#include "herd/v1/agent.pb.h"
#include "herd/v1/api.grpc.pb.h"

namespace herd::agent {

// What the agent tells the master about its machine.
struct MachineFacts {
  std::string name;
  ResourceVector capacity;
  std::map<std::string, std::string> attributes;
};

// Answers the master's polls for one machine: keeps the desired state the
// master last sent (by revision), applies full and delta polls to it, hands
// the complete set to the RunTable and replies with the observed state.
class PollServer {
 public:
  // `start_wait_ms`: how long a poll that handed over new runs waits for
  // them to start (see kStartWaitMs); 0 answers at once.
  PollServer(RunTable* runs, MachineFacts facts, Clock* clock, int64_t start_wait_ms = kStartWaitMs);

  // A poll from the caller of `ctx` (only the master may poll).
  grpc::Status Poll(grpc::ServerContext* ctx, const v1::PollRequest& req, v1::PollResponse* resp);
  // The same, for a caller already known to be the master.
  grpc::Status Answer(const v1::PollRequest& req, v1::PollResponse* resp);

  int64_t last_poll_ms() const { return last_poll_ms_.load(); }
  // From now on polls are refused (the agent is stopping its tasks).
  void Drain() { draining_ = true; }
  const MachineFacts& facts() const { return facts_; }

  // How long a poll waits for runs it just handed over to start, so the
  // reply already shows them running (a start takes milliseconds; the next
  // poll is seconds away). Bounded: a busy agent answers anyway.
  static constexpr int64_t kStartWaitMs = 250;

 private:
  // Applies `req` to the desired state; false if it is a delta whose base is
  // not the revision held (nothing is applied then).
  bool ApplyLocked(const v1::PollRequest& req, bool* changed) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  RunTable* const runs_;
  const MachineFacts facts_;
  Clock* const clock_;
  const int64_t start_wait_ms_;
  // The lease tokens of the last polls and when they came (monotonic), so
  // a later poll's lease_ack renews the lease from when the acknowledged
  // one arrived (PollRequest.lease_ms).
  static constexpr size_t kLeasePolls = 16;
  std::deque<std::pair<uint64_t, int64_t>> lease_polls_ ABSL_GUARDED_BY(mu_);
  std::atomic<int64_t> last_poll_ms_{0};
  std::atomic<bool> draining_{false};

  absl::Mutex mu_;  // one poll at a time
  absl::flat_hash_map<std::string, v1::TaskRun> desired_ ABSL_GUARDED_BY(mu_);
  int64_t desired_revision_ ABSL_GUARDED_BY(mu_) = 0;  // 0: none yet
  bool handed_over_ ABSL_GUARDED_BY(mu_) = false;     // SetDesired was called
};

// Registers the machine with the master, and again whenever the master stops
// polling it (it may have lost the machine, or been replaced). Tick() does
// one round of that; call it about once a second.
class Registrar {
 public:
  // `http`: the agent's HTTPS endpoint (/metrics), "" if none; the master
  // lists it with the machine.
  Registrar(v1::Herd::StubInterface* master, const PollServer& polls, std::string address, Clock* clock,
            std::string master_name, std::string http = "");
  void Tick();
  bool registered() const { return registered_at_ > 0; }

 private:
  grpc::Status Register();

  v1::Herd::StubInterface* const master_;
  const PollServer& polls_;
  const std::string address_;
  Clock* const clock_;
  const std::string master_name_;  // for the log
  const std::string http_;
  int64_t interval_ms_ = 2000;
  std::atomic<int64_t> registered_at_{0};  // read by other threads (registered())
  bool warned_ = false;
};

// Rings the master's doorbell (MachineChanged) when a run becomes active or
// ends, so the master polls now instead of at the next interval: a task that
// ran to completion frees its place at once, and a start is seen running
// without waiting a poll interval. Tick() looks at the runs once (cheap when
// nothing changed) and rings at most once; callers let a burst of changes
// gather for kMinRingMs before calling it.
class Doorbell {
 public:
  static constexpr int64_t kMinRingMs = 20;

  Doorbell(v1::Herd::StubInterface* master, const RunTable& runs, std::string machine);
  // Returns whether it rang.
  bool Tick();
  uint64_t version() const { return version_; }

 private:
  v1::Herd::StubInterface* const master_;
  const RunTable& runs_;
  const std::string machine_;
  uint64_t version_ = 0;
  absl::flat_hash_map<std::string, int> seen_;
  bool warned_ = false;
};

}  // namespace herd::agent
