#include "main/framework_flags.h"

#include <tuple>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/match.h"
#include "base/ids.h"
#include "base/resources.h"
#include "base/units.h"

namespace herd {

void AddFrameworkFlags(CLI::App* cmd, FrameworkFlags* f) {
  cmd->add_option("--framework-offer-interval", f->offer_interval,
                  "Frameworks: an allocation round (offers) at least this often")
      ->capture_default_str();
  cmd->add_option("--framework-offer-timeout", f->offer_timeout,
                  "Frameworks: an offer not answered within this is rescinded")
      ->capture_default_str();
  cmd->add_option("--framework-failover-timeout", f->failover_timeout,
                  "Frameworks: how long a disconnected framework keeps its tasks unless it asked for another")
      ->capture_default_str();
  cmd->add_option("--framework-max-user-failover", f->max_user_failover,
                  "Frameworks: the longest failover timeout a framework may ask for unless an admin registers it")
      ->capture_default_str();
  cmd->add_option("--framework-max-per-user", f->max_per_user,
                  "Frameworks: how many frameworks one user may have registered (connected or within their failover "
                  "timeout)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1'000));
  cmd->add_option("--framework-role", f->roles,
                  "Frameworks: a role's DRF weight and guarantee and the users who may take it, "
                  "NAME=WEIGHT[,cpu=4,memory=8Gi,...][,users=alice+carol] (repeatable; only the users listed, and "
                  "admins, may take it)");
}

absl::Status ApplyFrameworkFlags(const FrameworkFlags& f, master::frameworks::ManagerOptions* out) {
  for (auto [flag, text, dest, min_ms] :
       {std::tuple{"--framework-offer-interval", &f.offer_interval, &out->offer_interval_ms, int64_t{10}},
        std::tuple{"--framework-offer-timeout", &f.offer_timeout, &out->offer_timeout_ms, int64_t{100}},
        std::tuple{"--framework-failover-timeout", &f.failover_timeout, &out->default_failover_ms, int64_t{0}},
        std::tuple{"--framework-max-user-failover", &f.max_user_failover, &out->max_user_failover_ms, int64_t{0}}}) {
    absl::StatusOr<int64_t> ms = ParseDurationMs(*text);
    if (!ms.ok()) return absl::InvalidArgumentError(absl::StrCat(flag, ": ", ms.status().message()));
    if (*ms < min_ms) return absl::InvalidArgumentError(absl::StrCat(flag, ": '", *text, "' is below ", min_ms, "ms"));
    *dest = *ms;
  }
  if (out->default_failover_ms > out->max_failover_ms) {
    return absl::InvalidArgumentError("--framework-failover-timeout: longer than 7 days");
  }
  if (out->max_user_failover_ms > out->max_failover_ms) {
    return absl::InvalidArgumentError("--framework-max-user-failover: longer than 7 days");
  }
  if (out->default_failover_ms > out->max_user_failover_ms) {
    return absl::InvalidArgumentError(
        "--framework-failover-timeout: longer than --framework-max-user-failover (users could not get the default)");
  }
  out->max_frameworks_per_user = static_cast<size_t>(f.max_per_user);
  for (const std::string& r : f.roles) {
    std::vector<std::string> parts = absl::StrSplit(r, absl::MaxSplits(',', 1));
    std::pair<std::string, std::string> nw = absl::StrSplit(parts[0], absl::MaxSplits('=', 1));
    if (parts[0].find('=') == std::string::npos || nw.first.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--framework-role '", r, "' is not NAME=WEIGHT[,cpu=...,memory=...]"));
    }
    if (nw.first.size() > 64) return absl::InvalidArgumentError("--framework-role: a role name is at most 64 characters");
    master::frameworks::RoleOptions role;
    if (!absl::SimpleAtod(nw.second, &role.weight) || !(role.weight > 0) || role.weight > 1e6) {
      return absl::InvalidArgumentError(
          absl::StrCat("--framework-role '", r, "': weight '", nw.second, "' is not a number in (0, 1e6]"));
    }
    if (parts.size() > 1) {
      // users=U1+U2 among the resources: who may take the role.
      std::vector<std::string> rest;
      for (absl::string_view item : absl::StrSplit(parts[1], ',')) {
        if (!absl::StartsWith(item, "users=")) {
          rest.emplace_back(item);
          continue;
        }
        for (absl::string_view u : absl::StrSplit(item.substr(6), '+', absl::SkipEmpty())) {
          if (absl::Status st = ValidateUserName(std::string(u)); !st.ok()) {
            return absl::InvalidArgumentError(absl::StrCat("--framework-role '", r, "': ", st.message()));
          }
          role.users.insert(std::string(u));
        }
      }
      parts[1] = absl::StrJoin(rest, ",");
    }
    if (parts.size() > 1 && !parts[1].empty()) {
      absl::StatusOr<ResourceVector> g = ParseResourceList(parts[1]);
      if (!g.ok()) return absl::InvalidArgumentError(absl::StrCat("--framework-role '", r, "': ", g.status().message()));
      role.guarantee = *g;
    }
    if (out->roles.contains(nw.first)) {
      return absl::InvalidArgumentError(absl::StrCat("--framework-role: role ", nw.first, " is given twice"));
    }
    out->roles[nw.first] = role;
  }
  return absl::OkStatus();
}

}  // namespace herd
