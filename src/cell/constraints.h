// Matching constraints against machine attributes. Pure; shared by the
// scheduler's constraint filter and the master's commit-time check.
#pragma once

#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/map.h"
#include "herd/v1/objects.pb.h"

namespace herd::cell {

using Attributes = google::protobuf::Map<std::string, std::string>;

// Compares two attribute values: numerically when both are integers, else
// version-aware -- runs of digits compare as numbers, the rest as text -- so
// "5.10" > "5.9" and "1.2.3-rc1" < "1.2.3-rc2". (Decimals are versions here:
// use integers such as millis for fractional quantities.) Returns <0, 0, >0.
int CompareValues(absl::string_view a, absl::string_view b);

// True if `attrs` satisfies `c` (the `soft` flag is ignored here).
bool Matches(const v1::Constraint& c, const Attributes& attrs);

// "arch == amd64", "zone in [a, b]", "ssd exists" -- for messages.
std::string Describe(const v1::Constraint& c);
// The job's hard constraints as one key ("a == b;c in [d];"), "" if it has
// none: jobs with equal keys may run on the same machines.
std::string HardConstraintKey(const v1::JobSpec& spec);

}  // namespace herd::cell
