// Semantic validation of a JobSpec, as a list of issues. spec.h's Validate()
// joins them into one status; the parser maps each issue's path back to the
// line of the spec file it came from.
//
// Paths name fields as a spec file writes them ("tasks", "resources.cpu",
// "overrides[1].env.PORT"), not as the proto does, except that extended
// resources are "resources.extended.NAME" and hard and soft constraints are
// one list, "constraints[i]", in proto order.
#pragma once

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "herd/v1/objects.pb.h"

namespace herd::spec {

struct Issue {
  std::string path;     // "" = the job as a whole
  std::string message;  // what is wrong, without the path
};

// Every problem with `spec`; empty if it is valid. Does not assume a parser
// produced it: enum values of 0 (unspecified) mean "the default".
std::vector<Issue> ValidateIssues(const v1::JobSpec& spec);

// True for names a process environment accepts: [A-Za-z_][A-Za-z0-9_]*.
bool IsValidEnvName(absl::string_view name);

}  // namespace herd::spec
