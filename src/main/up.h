// `herd up`: a whole cell on this machine -- a master with its embedded store
// in a data directory and N agents, each with its own port, a slice of this
// machine's capacity and a rack attribute, so placement and failures can be
// watched on one host. `herd down` stops a detached one.
#pragma once

#include <string>
#include <vector>

namespace herd {

struct UpOptions {
  int agents = 1;
  std::string data_dir;  // default: $HERD_HOME or ~/.herd/up
  std::string listen = "127.0.0.1:7070";
  std::string cell = "local";
  bool detach = false;
  std::string poll_interval = "1s";
  std::string example;  // spec file to submit once the cell is up
  // Replicated control plane (issue #12): a 3-member etcd cluster and 3
  // masters on it (ports picked once and kept in DATA/ha.ports), agents
  // given the list; a master that dies is started again.
  bool ha = false;
  // The master's DNS responder (docs/naming.md); "" = none. Loopback: DNS
  // has no TLS.
  std::string dns = "127.0.0.1:0";
  // The master's --history-sample ("" = its default, 60s).
  std::string history_sample;
  // The master's --reclaim preset ("" = its default).
  std::string reclaim;
  // More flags for every agent (e.g. "--colocation=false") and master (e.g.
  // "--reclaim-startup=60s"), after Herd's own.
  std::vector<std::string> agent_args;
  std::vector<std::string> master_args;
  // What each agent offers, e.g. "cpu=9,memory=18Gi" ("" = this machine
  // split among the agents): a cell shaped for an experiment.
  std::string agent_capacity;
};

std::string DefaultUpDir();
int RunUp(const UpOptions& options);
int RunDown(const std::string& data_dir);

}  // namespace herd
