// Every scheduler setting a command line or a file can give, defined once
// (docs/scheduler.md, "Plugins and profiles"): `herd master`, `herd
// scheduler`, `herd sim compaction|replay` and `herd bench scheduler` all
// take exactly these flags (sched/config/flags.h binds them to CLI11), with
// one --weight-NAME per registered score.
//
// A profile (which filters run, the scores' weights, the packing policy) is
// chosen by name (--profile) among the built-in ones and those a profile
// file defines (--profile-file, YAML):
//
//   profiles:
//     - name: tight
//       policy: best                  # optional
//       filters: [machine-up, crash-avoid, constraints, domain-limits, interference, resources]
//       scores: {packing: 2, spread: 0, reserve: 4}   # others keep their default weight
//
// The other flags override the profile whatever their order.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "sched/framework/options.h"
#include "sched/framework/registry.h"

namespace herd::sched {

struct Knob {
  std::string flag;                  // "--policy"
  std::vector<std::string> aliases;  // names earlier releases took ("--spread")
  std::string help;
  std::string default_text;  // shown in --help; empty: none
  bool takes_value = true;   // false: a switch (--no-cache)
  // Sets `o` from the value (a switch gets ""). INVALID_ARGUMENT with the
  // reason; the caller names the flag. Null for --profile and
  // --profile-file, which ApplyKnobs applies first.
  std::function<absl::Status(absl::string_view value, Options* o)> apply;
};

// The knobs, --profile-file and --profile first.
std::vector<Knob> SchedulerKnobs(const Registry& r = Registry::BuiltIn());

// Applies the knobs given (`given[i]` is knobs[i]'s value, or nullopt):
// the profile first, then the others in order. INVALID_ARGUMENT naming the
// flag (and FILE:LINE for a profile file), and also if the result is not a
// profile BuildProfile accepts.
absl::Status ApplyKnobs(const std::vector<Knob>& knobs, const std::vector<std::optional<std::string>>& given,
                        Options* o);

// A profile as configured.
struct ProfileSpec {
  std::string name;
  std::string where;  // "FILE:LINE", or "built in"
  std::optional<PackingPolicy> policy;
  std::vector<std::string> filters;  // empty: every registered one
  ScoreWeights weights;
};

// The built-in profiles: "default" (every registered filter, every score at
// its default weight).
std::vector<ProfileSpec> BuiltinProfiles();
// Reads a profile file (at most 1 MiB and 64 profiles); every plugin name
// is checked against `r`. INVALID_ARGUMENT with FILE:LINE and the field.
absl::StatusOr<std::vector<ProfileSpec>> ReadProfileFile(const std::string& path,
                                                         const Registry& r = Registry::BuiltIn());
absl::StatusOr<std::vector<ProfileSpec>> ParseProfiles(const std::string& text, const std::string& file,
                                                       const Registry& r = Registry::BuiltIn());
// Sets `o`'s profile, policy, filters and weights from `spec`.
void ApplyProfile(const ProfileSpec& spec, Options* o);

}  // namespace herd::sched
