// Resolving a job's task template for one task index: per-task overrides
// applied, then ${...} variables substituted. Pure; shared by the cell state
// machine (per-task resources), the master (what agents run) and spec
// validation (which variables exist).
//
// Variables: ${task.index}, ${task.count}, ${job.name}, ${job.user},
// ${job.priority}, ${cell.name} (substituted here), and ${port.NAME}
// (left for the agent, which knows the allocated port). "$${" escapes "${".
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "base/resources.h"
#include "herd/v1/objects.pb.h"

namespace herd::cell {

// The task template for task `index` with overrides applied and variables
// substituted in command, args and env values.
v1::TaskTemplate ResolveTask(const v1::JobSpec& spec, int32_t index, absl::string_view cell_name = "");

// Only the resources of task `index` (hot path: no string work).
ResourceVector TaskResources(const v1::JobSpec& spec, int32_t index);

// Checks that every ${...} in `text` names a known variable (and known port
// names for ${port.NAME}). The error names the variable.
absl::Status CheckVariables(absl::string_view text, const v1::JobSpec& spec);

// Substitutes the variables in `text` for task `index`.
std::string Substitute(absl::string_view text, const v1::JobSpec& spec, int32_t index,
                       absl::string_view cell_name = "");

}  // namespace herd::cell
