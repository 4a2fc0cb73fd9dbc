// Reads one job (a YAML/JSON map, see docs/specs.md) into a JobSpec with the
// format's defaults filled in. Shape problems (types, units, unknown fields)
// are reported as it goes; semantic ones are left to ValidateIssues, whose
// paths the JobSourceMap can locate because every field read is recorded.
#pragma once

#include <yaml-cpp/yaml.h>

#include "herd/v1/objects.pb.h"
#include "spec/source_map.h"

namespace herd::spec::yaml {

// Reads `node` (the whole job). A field with a problem keeps its default, so
// the returned spec is only meaningful if nothing was reported.
v1::JobSpec ReadJob(const YAML::Node& node, JobSourceMap* map);

}  // namespace herd::spec::yaml
