// HollowAgents: many agents in one process, for `herd bench cell` (issue
// #11). Each is the real agent protocol code (PollServer, Registrar,
// Doorbell from agent_protocol.h) with its own machine credential, over a
// HollowRunTable instead of processes -- as kubemark runs the real kubelet
// over a fake container runtime. They are served from a few TLS ports
// (agents_per_port identities on each, picked by SNI), so 10,000 agents need
// neither 10,000 ports nor 10,000 servers; each still registers and rings
// the master over its own channel, as itself.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/status/statusor.h"
#include "agent/hollow/hollow_runtime.h"
#include "agent/server/agent_protocol.h"
#include "base/clock.h"
#include "base/resources.h"
#include "pki/pki.h"

namespace herd::agent {

struct HollowOptions {
  int agents = 100;
  // Machines are named name_prefix + (first + i), zero-padded to `width`
  // digits (several processes share one numbering).
  int first = 0;
  int width = 0;  // 0: as many digits as the largest index needs
  std::string name_prefix = "hollow-";
  int agents_per_port = 100;
  std::string listen_host = "127.0.0.1";
  std::string master;  // HOST:PORT
  ResourceVector capacity;
  std::map<std::string, std::string> attributes;
  HollowRuntime::Options runtime;
  // Threads that ring doorbells and keep registrations, each for a share of
  // the agents.
  int contact_threads = 8;
  // Each machine's channel to the master closes after this long idle, so
  // thousands of agents that ring now and then do not hold thousands of
  // the master's descriptors (0: never).
  int64_t master_idle_timeout_ms = 2000;
  Clock* clock = RealClock::Get();
};

class HollowAgents {
 public:
  // Issues every machine its credential from `ca`, starts serving and
  // starts registering with the master (registered() tells how far).
  static absl::StatusOr<std::unique_ptr<HollowAgents>> Start(const HollowOptions& options, const pki::Authority& ca);
  ~HollowAgents();
  HollowAgents(const HollowAgents&) = delete;
  HollowAgents& operator=(const HollowAgents&) = delete;

  int size() const { return static_cast<int>(agents_.size()); }
  int registered() const;
  int64_t starts() const;  // runs ever started, over all agents
  int64_t live() const;
  int64_t rings() const { return rings_.load(); }
  const std::vector<std::string>& ports() const { return ports_; }

 private:
  struct Agent;
  class Service;
  explicit HollowAgents(const HollowOptions& options);
  void Contact(int thread);

  const HollowOptions options_;
  HollowRuntime runtime_;
  std::vector<std::unique_ptr<Agent>> agents_;
  std::unique_ptr<Service> service_;
  std::unique_ptr<grpc::Server> server_;
  std::vector<std::string> ports_;
  std::atomic<bool> stop_{false};
  std::atomic<int64_t> rings_{0};
  std::vector<std::thread> threads_;
};

}  // namespace herd::agent
