// herd rollback JOB [--to VERSION], herd pause JOB, herd resume JOB,
// herd history JOB: a job's rolling update and its version history
// (docs/updates.md).
#include <cinttypes>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/units.h"
#include "cli/commands/commands.h"
#include "cli/render/render.h"

namespace herd::cli {

std::string RolloutText(const v1::Rollout& r) {
  std::string state;
  switch (r.state()) {
    case v1::Rollout::ROLLING:
      state = "rolling";
      break;
    case v1::Rollout::PAUSED:
      state = "paused";
      break;
    case v1::Rollout::FAILED:
      state = "failed";
      break;
    case v1::Rollout::DONE:
      state = "done";
      break;
    default:
      state = "?";
  }
  std::string out = absl::StrCat(state, r.rollback() ? ", rolling back" : "", " to version ", r.version(),
                                 " from ", r.from_version());
  if (r.outdated() > 0) absl::StrAppend(&out, " (", r.outdated(), " task", r.outdated() == 1 ? "" : "s", " left)");
  if (!r.message().empty()) absl::StrAppend(&out, ": ", r.message());
  return out;
}

namespace {

void AddRollback(CLI::App& app, CommandContext& ctx) {
  auto* cmd = app.add_subcommand(
      "rollback", "Put a job back at an earlier version's spec (a new version, rolled like an update)");
  auto job = std::make_shared<std::string>();
  auto to = std::make_shared<int64_t>(0);
  cmd->add_option("job", *job, "JOB or USER/JOB")->required();
  cmd->add_option("--to", *to, "The version to go back to (default: the one before the current)");
  cmd->add_flag("--json", ctx.flags.json, "Print the RollbackResponse as JSON");
  cmd->callback([&ctx, job, to] {
    Client client(ctx.flags);
    v1::RollbackRequest req;
    req.set_job(*job);
    req.set_to_version(*to);
    v1::RollbackResponse resp;
    if (!CallMaster(ctx, client, &v1::Herd::Stub::Rollback, req, &resp)) return;
    std::printf("%s", DiffText(resp.diff()).c_str());
    std::printf("rolled back %s (version %" PRId64 ", revision %" PRId64 "): %s\n", resp.job().id().c_str(),
                resp.job().version(), resp.revision(), RolloutText(resp.job().rollout()).c_str());
  });
}

void AddSetRollout(CLI::App& app, CommandContext& ctx, bool pause) {
  auto* cmd = app.add_subcommand(pause ? "pause" : "resume",
                                 pause ? "Pause a job's rolling update: no more tasks are updated"
                                       : "Resume a job's rolling update (and promote its canaries)");
  auto job = std::make_shared<std::string>();
  cmd->add_option("job", *job, "JOB or USER/JOB")->required();
  cmd->add_flag("--json", ctx.flags.json, "Print the SetRolloutResponse as JSON");
  cmd->callback([&ctx, job, pause] {
    Client client(ctx.flags);
    v1::SetRolloutRequest req;
    req.set_job(*job);
    req.set_action(pause ? v1::SetRolloutRequest::PAUSE : v1::SetRolloutRequest::RESUME);
    v1::SetRolloutResponse resp;
    if (!CallMaster(ctx, client, &v1::Herd::Stub::SetRollout, req, &resp)) return;
    std::printf("%s: %s\n", resp.job().id().c_str(), RolloutText(resp.job().rollout()).c_str());
  });
}

void AddHistory(CLI::App& app, CommandContext& ctx) {
  auto* cmd = app.add_subcommand("history", "A job's kept versions (the last 20): when, who, what changed");
  auto job = std::make_shared<std::string>();
  cmd->add_option("job", *job, "JOB or USER/JOB")->required();
  cmd->add_flag("--json", ctx.flags.json, "Print the HistoryResponse as JSON");
  cmd->callback([&ctx, job] {
    Client client(ctx.flags);
    v1::HistoryRequest req;
    req.set_job(*job);
    v1::HistoryResponse resp;
    if (!CallMaster(ctx, client, &v1::Herd::Stub::History, req, &resp)) return;
    const int64_t now = NowMs();
    Table t({"VERSION", "REVISION", "AGE", "BY", "TASKS", "COMMAND", "REASON"});
    for (const v1::JobVersion& v : resp.versions()) {
      std::string cmdline = absl::StrJoin(v.spec().task().command(), " ");
      if (cmdline.size() > 40) cmdline = cmdline.substr(0, 37) + "...";
      t.Add({absl::StrCat(v.version(), v.version() == resp.version() ? " *" : ""), absl::StrCat(v.revision()),
             Age(v.time_ms(), now), v.actor().empty() ? "-" : v.actor(), absl::StrCat(v.spec().task_count()),
             cmdline, v.reason().empty() ? "-" : v.reason()});
    }
    std::printf("%s", t.ToString().c_str());
    if (resp.has_rollout()) std::printf("rollout: %s\n", RolloutText(resp.rollout()).c_str());
  });
}

}  // namespace

void AddRolloutCommands(CLI::App& app, CommandContext& ctx) {
  AddRollback(app, ctx);
  AddSetRollout(app, ctx, /*pause=*/true);
  AddSetRollout(app, ctx, /*pause=*/false);
  AddHistory(app, ctx);
}

}  // namespace herd::cli
