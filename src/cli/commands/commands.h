// The user verbs of `herd`, one file each. Add*(app, ctx) registers a verb on
// the CLI11 app; its callback stores the exit code in ctx.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdio>
#include <memory>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"

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

// Where a task runs (or last ran), asked of the master: for verbs that then
// talk to that machine's agent (logs, exec). On failure (bad JOB/INDEX,
// unknown job, never ran: "task J/I has not run yet, <never_ran> (it is
// PENDING)") prints the one-line error, sets the exit code, returns nullopt.
// The master authorizes the access first and hands back a grant for it,
// which the agent checks.
struct TaskLocation {
  v1::GetTaskResponse response;  // the task, its machine and run id
  v1::AccessGrant grant;         // `action` on that run, for this client's user
  std::unique_ptr<v1::Agent::Stub> agent;
};
std::optional<TaskLocation> LocateTask(CommandContext& ctx, Client& client, const std::string& task,
                                       v1::AccessAction action, absl::string_view never_ran);
// An agent call's failure as one line ("cannot reach the agent of machine M
// at ADDR to <doing>" when unreachable, else the agent's message).
absl::Status AgentError(const TaskLocation& where, const grpc::Status& st, absl::string_view doing);

void AddSubmit(CLI::App& app, CommandContext& ctx);
// herd diff FILE..., herd scale JOB N.
void AddDiff(CLI::App& app, CommandContext& ctx);
void AddScale(CLI::App& app, CommandContext& ctx);
// herd rollback, herd pause, herd resume, herd history (rollout.cc).
void AddRolloutCommands(CLI::App& app, CommandContext& ctx);
// "rolling to version 3 (2 of 4 tasks left); ...": a job's rollout in brief.
std::string RolloutText(const v1::Rollout& r);
// A job's diff for people: the version change, the fields that change, and
// which tasks restart, move, are added or removed, and why.
std::string DiffText(const v1::JobDiff& diff);
// herd ca init|issue, herd user add.
void AddCredentialCommands(CLI::App& app, CommandContext& ctx);
// herd token create|list|revoke (tokens.cc).
void AddTokenCommands(CLI::App& app, CommandContext& ctx);
void AddKill(CLI::App& app, CommandContext& ctx);
// herd runs JOB: a scheduled job's runs (runs.cc).
void AddRuns(CLI::App& app, CommandContext& ctx);
void AddJobs(CLI::App& app, CommandContext& ctx);
void AddTasks(CLI::App& app, CommandContext& ctx);
void AddStatus(CLI::App& app, CommandContext& ctx);
void AddWhy(CLI::App& app, CommandContext& ctx);
// herd resolve NAME [--watch]: tasks' names (Resolve, WatchNames).
void AddResolve(CLI::App& app, CommandContext& ctx);
void AddMachines(CLI::App& app, CommandContext& ctx);
void AddDrain(CLI::App& app, CommandContext& ctx);
void AddLogs(CLI::App& app, CommandContext& ctx);
void AddExec(CLI::App& app, CommandContext& ctx);
void AddQuota(CLI::App& app, CommandContext& ctx);
void AddCheckpoint(CLI::App& app, CommandContext& ctx);
void AddCell(CLI::App& app, CommandContext& ctx);
void AddQuery(CLI::App& app, CommandContext& ctx);
void AddAlerts(CLI::App& app, CommandContext& ctx);
void AddFrameworks(CLI::App& app, CommandContext& ctx);
// herd ui: a login link for the web UI.
void AddUi(CLI::App& app, CommandContext& ctx);

// Every verb above, plus the global --master and --user options.
void AddUserCommands(CLI::App& app, CommandContext& ctx);

}  // namespace herd::cli
