// herd kill JOB: every task of the job becomes DEAD and is stopped.
#include "cli/commands/commands.h"
#include "cli/render/render.h"

namespace herd::cli {

void AddKill(CLI::App& app, CommandContext& ctx) {
  auto* cmd = app.add_subcommand("kill", "Kill a job: stop every task (SIGTERM, then SIGKILL after its grace period)");
  auto job = std::make_shared<std::string>();
  auto reason = std::make_shared<std::string>();
  cmd->add_option("job", *job, "JOB or USER/JOB")->required();
  cmd->add_option("--reason", *reason, "Why (recorded on every task)");
  cmd->add_flag("--json", ctx.flags.json, "Print the response as JSON");
  cmd->callback([&ctx, job, reason] {
    Client client(ctx.flags);
    v1::KillRequest req;
    req.set_job(*job);
    req.set_reason(*reason);
    v1::KillResponse resp;
    auto rctx = client.Context();
    grpc::Status st = client.stub().Kill(rctx.get(), req, &resp);
    if (!st.ok()) {
      ctx.exit_code = Fail(client.Error(st));
      return;
    }
    if (ctx.flags.json) {
      std::printf("%s\n", ToJson(resp).c_str());
    } else {
      std::printf("killed %s: %d task%s dead\n", resp.job().id().c_str(), resp.job().dead(),
                  resp.job().dead() == 1 ? "" : "s");
    }
  });
}

}  // namespace herd::cli
