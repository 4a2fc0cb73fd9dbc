// The user verbs of `herd`, one file each. Add*(app, ctx) registers a verb on
// the CLI11 app; its callback stores the exit code in ctx.
#pragma once

#include <CLI/CLI.hpp>

#include "cli/client.h"

namespace herd::cli {

struct CommandContext {
  GlobalFlags flags;
  int exit_code = 0;
};

void AddSubmit(CLI::App& app, CommandContext& ctx);
void AddKill(CLI::App& app, CommandContext& ctx);
void AddJobs(CLI::App& app, CommandContext& ctx);
void AddTasks(CLI::App& app, CommandContext& ctx);
void AddStatus(CLI::App& app, CommandContext& ctx);
void AddWhy(CLI::App& app, CommandContext& ctx);
void AddMachines(CLI::App& app, CommandContext& ctx);
void AddLogs(CLI::App& app, CommandContext& ctx);
void AddQuota(CLI::App& app, CommandContext& ctx);
void AddCheckpoint(CLI::App& app, CommandContext& ctx);
void AddCell(CLI::App& app, CommandContext& ctx);

// Every verb above, plus the global --master and --user options.
void AddUserCommands(CLI::App& app, CommandContext& ctx);

}  // namespace herd::cli
