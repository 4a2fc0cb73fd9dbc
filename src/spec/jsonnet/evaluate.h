// Jsonnet evaluation (libjsonnet): a spec file written in Jsonnet is first
// evaluated to JSON, which is then read like any JSON spec. Imports are
// resolved relative to the importing file.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace herd::spec::jsonnet {

// Evaluates the Jsonnet file at `path` to JSON text. On failure the error is
// Jsonnet's own message (with its file:line:col), as InvalidArgumentError.
absl::StatusOr<std::string> EvaluateFile(const std::string& path);

// Evaluates `code`, as if read from `source_name` (for messages and imports).
absl::StatusOr<std::string> EvaluateSnippet(absl::string_view code, absl::string_view source_name);

}  // namespace herd::spec::jsonnet
