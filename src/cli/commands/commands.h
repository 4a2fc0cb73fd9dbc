// The user verbs of `herd`, one file each. Add*(app, ctx) registers a verb on
// the CLI11 app; its callback stores the exit code in ctx.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdio>

#include "cli/client.h"
#include "cli/render/render.h"

namespace herd::cli {

struct CommandContext {
  GlobalFlags flags;
  int exit_code = 0;
};

// Calls `method` on the master. On failure prints the one-line error and sets
// the exit code; with --json prints the response. Returns true when the
// caller should go on and print it for people.
template <typename Req, typename Resp>
bool CallMaster(CommandContext& ctx, Client& client,
                grpc::Status (v1::Herd::Stub::*method)(grpc::ClientContext*, const Req&, Resp*), const Req& req,
                Resp* resp) {
  auto rctx = client.Context();
  grpc::Status st = (client.stub().*method)(rctx.get(), req, resp);
  if (!st.ok()) {
    ctx.exit_code = Fail(client.Error(st));
    return false;
  }
  if (ctx.flags.json) {
    std::printf("%s\n", ToJson(*resp).c_str());
    return false;
  }
  return true;
}

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
