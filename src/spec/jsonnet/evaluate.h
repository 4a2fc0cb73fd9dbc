// Jsonnet evaluation (libjsonnet): a spec file written in Jsonnet is first
// evaluated to JSON, which is then read like any JSON spec.
//
// A spec is code, and evaluating it must not cost the CLI (or whoever runs
// it) more than a spec is worth: evaluation runs in a child process with a
// memory limit and a CPU-time limit, under a wall-clock deadline, and may
// import only files in the spec's own directory (or below it), or in
// directories given as allowed. An import elsewhere is refused by name,
// without reading it, so no error message can carry another file's text.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace herd::spec::jsonnet {

struct Limits {
  int64_t memory_bytes = int64_t{1} << 30;  // address space of the evaluation
  int cpu_seconds = 10;
  int64_t wall_ms = 30'000;
  int64_t output_bytes = 64ll << 20;
  std::vector<std::string> import_dirs;  // beyond the spec's own directory
};

// Evaluates the Jsonnet file at `path` to JSON text. On failure the error is
// Jsonnet's own message (with its file:line:col), or which limit was hit, as
// InvalidArgumentError.
absl::StatusOr<std::string> EvaluateFile(const std::string& path, const Limits& limits = {});

// Evaluates `code`, as if read from `source_name` (for messages and
// imports, which are resolved from the current directory).
absl::StatusOr<std::string> EvaluateSnippet(absl::string_view code, absl::string_view source_name,
                                            const Limits& limits = {});

}  // namespace herd::spec::jsonnet
