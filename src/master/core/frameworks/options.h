// How the leader runs the Framework API (issue #17; herd master's
// --framework-* flags, docs/frameworks.md). Header only: MasterOptions
// carries it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <string>

#include "base/resources.h"

namespace herd::master::frameworks {

// A role's share of the offers: its frameworks' dominant shares are divided
// by `weight`, and while the role holds less than `guarantee` in any
// dimension its frameworks are offered first.
// A role named here is reserved (#33): only frameworks of the users listed
// (and frameworks an admin registers) may take it; roles not named here
// (weight 1, no guarantee) are anyone's.
struct RoleOptions {
  double weight = 1;
  ResourceVector guarantee;
  std::set<std::string> users;
};

struct ManagerOptions {
  int64_t offer_interval_ms = 1'000;  // an allocation round at least this often
  // ... and sooner, but not more often than this, after resources came back
  // (a task ended, an accept left part of an offer): what frees up is
  // offered again at once, not at the next interval.
  int64_t min_round_gap_ms = 50;
  int64_t offer_timeout_ms = 30'000;  // an unanswered offer is rescinded after this
  int64_t default_failover_ms = 60'000;
  int64_t max_failover_ms = 7 * 86'400'000ll;
  // The longest failover timeout a framework may ask for unless an admin
  // registers it (#33: a user's disconnected frameworks hold their slots
  // this long).
  int64_t max_user_failover_ms = 3'600'000;
  int64_t heartbeat_ms = 15'000;
  int64_t resend_ms = 10'000;        // unacknowledged updates are sent again this often
  int64_t default_refuse_ms = 5'000; // a decline without refuse_ms
  int64_t max_refuse_ms = 86'400'000;
  // A new leader re-sends the terminal status of framework tasks that ended
  // this recently (the old leader's acknowledgements are not kept: at least
  // once, so a framework may see an update twice).
  int64_t resend_ended_within_ms = 15 * 60'000;
  size_t max_tasks_per_accept = 256;
  size_t max_offers_per_call = 1'024;
  size_t max_frameworks = 1'000;
  // Frameworks one user may have registered (connected or within their
  // failover timeout), so no user can take the cell's max_frameworks (#33).
  size_t max_frameworks_per_user = 20;
  size_t max_tasks_per_framework = 100'000;
  size_t max_queue = 100'000;  // events waiting on one stream before it is cut
  std::map<std::string, RoleOptions> roles;  // roles not named here: weight 1, no guarantee
};

}  // namespace herd::master::frameworks
