// `herd bench ...`: benchmarks that print tables and RESULT name=value lines.
#pragma once

#include <CLI/CLI.hpp>

namespace herd {

void AddBench(CLI::App& app, int& rc);

}  // namespace herd
