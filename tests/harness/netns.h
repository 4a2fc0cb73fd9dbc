// Test-only: a private network of Linux network namespaces for the fault
// suite (tests/fault), so that partitions are real. Every process of a cell
// (etcd member, master, agent) gets a host: a namespace of its own, joined to
// one bridge in the root namespace by a veth pair, with an address on the
// bridge's /24 (the root namespace, where the test and the CLI run, holds
// .1). Cutting a host's link (its veth's root end down) partitions it from
// everything; Block(a, b) drops only the traffic between two hosts
// (blackhole routes in both namespaces), so a master can lose etcd and still
// reach its agents.
//
//   absl::StatusOr<std::unique_ptr<Network>> net = Network::Create();
//   const Network::Host* m0 = *(*net)->AddHost("master0");   // 10.77.N.10
//   cell.Place("master0", {(*net)->Wrapper(*m0), m0->ip});     // runs under nsenter
//   (*net)->Cut("master0");  ...  (*net)->Heal("master0");
//
// Processes enter a namespace with `nsenter --net=/run/netns/NAME --` (not
// `ip netns exec`, which mounts a fresh /sys and hides /sys/fs/cgroup, which
// agents need). Names carry the test process's pid ("hf<pid>..."), so
// parallel test processes do not collide; each picks a /24 of 10.77.0.0/16
// that no other holds. Everything is deleted when the Network is destroyed,
// and Create() first deletes what test processes that died (crashed, killed)
// left behind: their namespaces (killing any process still in them), links
// and bridges.
//
// Needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN) and the `ip` and `nsenter`
// programs; Create() says clearly what is missing.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace herd::harness {

class Network {
 public:
  struct Host {
    std::string name;   // as given to AddHost
    std::string netns;  // /run/netns/<netns>
    std::string ip;     // its address on the bridge
    std::string veth;   // the root namespace's end of its link
  };

  // Deletes the leftovers of dead test processes, then makes the bridge.
  static absl::StatusOr<std::unique_ptr<Network>> Create();
  // Deletes every namespace (killing what still runs in it), link and the
  // bridge.
  ~Network();
  Network(const Network&) = delete;
  Network& operator=(const Network&) = delete;

  // A new host `name` (letters and digits, unique in this network).
  absl::StatusOr<const Host*> AddHost(const std::string& name);
  const Host& host(const std::string& name) const { return hosts_.at(name); }
  // The argv prefix that runs a program in `h`'s namespace.
  static std::vector<std::string> Wrapper(const Host& h);
  // The root namespace's address on the bridge (the test's, the CLI's).
  const std::string& gateway() const { return gateway_; }
  const std::string& prefix() const { return prefix_; }

  // `name`'s link down: it reaches nobody and nobody reaches it.
  absl::Status Cut(const std::string& name);
  // Its link up again.
  absl::Status Heal(const std::string& name);
  // Traffic between hosts `a` and `b` dropped, both ways (each one's packets
  // to the other go to a blackhole route); the rest flows.
  absl::Status Block(const std::string& a, const std::string& b);
  absl::Status Unblock(const std::string& a, const std::string& b);
  // Every cut healed and every block lifted.
  absl::Status HealAll();

 private:
  Network(std::string prefix, std::string bridge, std::string gateway, int subnet)
      : prefix_(std::move(prefix)), bridge_(std::move(bridge)), gateway_(std::move(gateway)), subnet_(subnet) {}

  const std::string prefix_;  // "hf<pid>"
  const std::string bridge_;
  const std::string gateway_;
  const int subnet_;  // the N of 10.77.N.0/24
  std::map<std::string, Host> hosts_;
  std::vector<std::string> order_;  // names, in the order they were added
  std::map<std::string, bool> cut_;
  std::vector<std::pair<std::string, std::string>> blocks_;
};

}  // namespace herd::harness
