// Semantic validation of a JobSpec, from any source: a spec file (spec.h's
// parsers) or the API (the master validates every submitted spec). Its own
// target, herd_spec_validate, with no parser behind it: the master core and
// the simulator link it without yaml-cpp or libjsonnet.
//
// ValidateIssues lists the issues; Validate joins them into one status; the
// parser maps each issue's path back to the line of the spec file it came
// from.
//
// Paths name fields as a spec file writes them ("tasks", "resources.cpu",
// "overrides[1].env.PORT"), not as the proto does, except that extended
// resources are "resources.extended.NAME" and hard and soft constraints are
// one list, "constraints[i]", in proto order.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
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

// Semantic validation of a spec from any source (also the API): names,
// ranges and limits, constraints, overrides, ${...} variables. The error lists
// every problem, one per line, as "field.path: what is wrong".
absl::Status Validate(const v1::JobSpec& spec);

// Writes each `after` entry that names a job by NAME alone as USER/NAME,
// with the spec's user (a job waits for its own user's jobs by default).
void NormalizeAfter(v1::JobSpec* spec);

// True for names a process environment accepts: [A-Za-z_][A-Za-z0-9_]*.
bool IsValidEnvName(absl::string_view name);

}  // namespace herd::spec
