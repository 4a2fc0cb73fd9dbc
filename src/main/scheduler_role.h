// `herd scheduler`: a scheduler in its own process. Its scheduler flags are
// herd master's (sched/config/flags.h), which runs the same loop in-process.
#pragma once

#include <memory>
#include <string>

#include <CLI/CLI.hpp>

namespace herd {

// The `herd scheduler` role.
void AddScheduler(CLI::App& app, int& rc);

}  // namespace herd
