// `herd master --config FILE` and `herd agent --config FILE`: a YAML file
// with one key per flag, named as the flag without its dashes.
//
//   listen: 0.0.0.0:7070
//   poll-interval: 2s
//   attr: [rack=r1, zone=a]        # a flag given more than once: a list
//   stop-tasks-on-exit: true       # a flag without a value: true or false
//
// Flags on the command line win over the file. An unknown key, a list for
// a flag that takes one value, a map, or a file that is not YAML is an
// error naming FILE:LINE and the key.
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "absl/status/statusor.h"

namespace herd {

// The arguments the file adds for `cmd` (a subcommand of herd), given the
// arguments on the command line (`command_line`, in order): "--KEY VALUE"
// for each key whose flag the command line does not give.
absl::StatusOr<std::vector<std::string>> ConfigArgs(const CLI::App& cmd, const std::string& path,
                                                    const std::vector<std::string>& command_line);
// Same, from the file's text (`path` names it in errors).
absl::StatusOr<std::vector<std::string>> ConfigArgsFromText(const CLI::App& cmd, const std::string& text,
                                                            const std::string& path,
                                                            const std::vector<std::string>& command_line);

// Adds --config FILE to `cmd` (it is read before parsing: ExpandConfig).
void AddConfigFlag(CLI::App* cmd);

// If `args` (the command line without the program name) runs a subcommand
// of `app` that has --config, returns `args` with the file's arguments
// added; else `args` as they are.
absl::StatusOr<std::vector<std::string>> ExpandConfig(const CLI::App& app, std::vector<std::string> args);

}  // namespace herd
