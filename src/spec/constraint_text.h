// The one-line form of a constraint, as written in job specs and on the
// command line:
//   "arch == amd64"   "rack != r1"   "kernel >= 5.10"   "cores > 4"
//   "zone in [a, b]"  "zone not in [a, b]"  "ssd exists"  "gpu not exists"
#pragma once

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "herd/v1/objects.pb.h"

namespace herd::spec {

// Parses the one-line form. The result is hard (soft = false, weight 0).
// Errors say what is wrong ("unknown operator '=' in 'arch = amd64' (use ==)").
absl::StatusOr<v1::Constraint> ParseConstraint(absl::string_view text);

// "==", "!=", "in", "not in", "exists", "not exists", "<", "<=", ">", ">="
// (and the enum names, case-insensitively) -> Op.
std::optional<v1::Constraint::Op> ParseConstraintOp(absl::string_view op);
absl::string_view ConstraintOpText(v1::Constraint::Op op);

// The one-line form of `c` ("zone in [a, b]"), without softness or weight.
std::string FormatConstraint(const v1::Constraint& c);

}  // namespace herd::spec
