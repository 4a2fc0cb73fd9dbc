// herd master's Framework API flags (issue #17; docs/frameworks.md): the
// offer round, timeouts, and each role's weight and guarantee.
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "absl/status/status.h"
#include "master/core/frameworks/options.h"

namespace herd {

struct FrameworkFlags {
  std::string offer_interval = "1s";
  std::string offer_timeout = "30s";
  std::string failover_timeout = "60s";
  // The longest failover timeout a framework not registered by an admin may
  // ask for, and how many frameworks one user may have registered (#33).
  std::string max_user_failover = "1h";
  int max_per_user = 20;
  // NAME=WEIGHT[,RESOURCES][,users=U1+U2]: e.g. "analytics=2,users=alice" or
  // "prod=1,cpu=8,memory=32Gi,users=alice+carol". Only the users listed (and
  // admins) may take a role named here.
  std::vector<std::string> roles;
};

void AddFrameworkFlags(CLI::App* cmd, FrameworkFlags* f);
absl::Status ApplyFrameworkFlags(const FrameworkFlags& f, master::frameworks::ManagerOptions* out);

}  // namespace herd
