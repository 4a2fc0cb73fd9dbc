// `herd agent`: one per machine. Registers with the master (and again if the
// master stops polling it), serves the Agent service: Poll (declarative
// desired state in, full observed state out) and ReadLogs.
#pragma once

#include <map>
#include <string>

#include "base/resources.h"

namespace herd::agent {

struct AgentOptions {
  std::string master = "127.0.0.1:7070";
  std::string listen = "127.0.0.1:7071";  // port 0 = pick one
  std::string name;                        // default: this host's name
  std::string root_dir;                    // runs and logs; default /var/lib/herd/agent/<name>
  std::string shim_path;                   // default: herd-shim next to herd
  bool capacity_given = false;
  ResourceVector capacity;                 // default: detected
  std::map<std::string, std::string> attributes;
  bool stop_tasks_on_exit = false;         // herd up: a stopped dev cell leaves nothing behind
  std::string log_file;
};

// The machine's resources: cores, memory, the root's free disk, a port range.
ResourceVector DetectCapacity(const std::string& root_dir);
// hostname, arch, os, kernel.
std::map<std::string, std::string> DetectAttributes();

// Runs until SIGINT/SIGTERM; returns the exit code.
int RunAgent(AgentOptions options);

}  // namespace herd::agent
