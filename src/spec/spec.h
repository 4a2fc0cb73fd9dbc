// Job spec files -> validated herd.v1.JobSpec protos.
//
// A spec file is YAML, JSON or Jsonnet and holds one job or many (see
// docs/specs.md for the format). Parsing reports every problem at once, each
// on its own line and pointing at where it was written:
//
//   web.yaml:7:10: resources.memory: unknown unit 'Mb' in '64Mb' (use Ki, Mi, Gi, Ti or k, M, G, T)
//   web.yaml:3:1: unknown field 'comand' (did you mean 'command'?)
//   batch.jsonnet: jobs[1].resources.cpu: missing: every task needs a CPU limit, e.g. cpu: 500m
//
// (Jsonnet's output has no useful line numbers, so its problems carry field
// paths only; Jsonnet's own syntax and runtime errors keep its file:line.)
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "herd/v1/objects.pb.h"
#include "spec/validate.h"  // Validate(): every parsed spec has passed it

namespace herd::spec {

// kAuto picks by extension: .yaml/.yml, .json, .jsonnet/.libsonnet; anything
// else is read as YAML.
enum class Format { kAuto, kYaml, kJson, kJsonnet };

struct ParseOptions {
  // Fills JobSpec.user for jobs that do not name one (e.g. the logged-in
  // user). When empty, such jobs are an error.
  std::string default_user;
  // Asked about each job named in `after:` (as USER/NAME): "" if it may be
  // waited for, else what is wrong ("there is no job alice/build"),
  // reported at that entry's line. Unset: not asked (the master still
  // checks when the job is submitted).
  std::function<std::string(const std::string& job_id)> check_after;
};

// The format kAuto means for `path`.
Format FormatForPath(absl::string_view path);

// Parses the file at `path`. Every returned spec has passed Validate() and
// has `source` set to `path`. Errors: NotFoundError if the file cannot be
// read; otherwise InvalidArgumentError listing every problem, one per line.
absl::StatusOr<std::vector<v1::JobSpec>> ParseFile(const std::string& path, const ParseOptions& opts = {},
                                                   Format format = Format::kAuto);

// As ParseFile, for text already in memory; `source_name` is used in messages,
// for kAuto, as JobSpec.source, and (for Jsonnet) to resolve relative imports.
absl::StatusOr<std::vector<v1::JobSpec>> ParseText(absl::string_view text, absl::string_view source_name,
                                                   Format format, const ParseOptions& opts = {});

}  // namespace herd::spec
