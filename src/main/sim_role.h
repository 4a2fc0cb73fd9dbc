// `herd sim ...`: Fauxmaster's experiments and questions.
#pragma once

#include <CLI/CLI.hpp>

namespace herd {

void AddSim(CLI::App& app, int& rc);

}  // namespace herd
