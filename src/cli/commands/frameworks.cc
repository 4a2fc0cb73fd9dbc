// herd frameworks [--json]; herd frameworks teardown ID
#include <grpcpp/channel.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/resources.h"
#include "cli/commands/commands.h"
#include "cli/render/render.h"
#include "herd/v1/frameworks.grpc.pb.h"

namespace herd::cli {

void AddFrameworks(CLI::App& app, CommandContext& ctx) {
  auto* cmd = app.add_subcommand(
      "frameworks", "Show the registered frameworks (Framework API): what their tasks use and their dominant share");
  cmd->add_flag("--json", ctx.flags.json, "Print the ListFrameworksResponse as JSON");
  auto* teardown = cmd->add_subcommand("teardown", "Kill a framework's tasks and remove it");
  auto id = std::make_shared<std::string>();
  teardown->add_option("id", *id, "The framework's id")->required();
  teardown->callback([&ctx, id] {
    Client client(ctx.flags);
    auto stub = v1::Frameworks::NewStub(client.channel());
    v1::TeardownRequest req;
    req.set_framework_id(*id);
    v1::TeardownResponse resp;
    auto rctx = client.Context();
    if (grpc::Status st = stub->Teardown(rctx.get(), req, &resp); !st.ok()) {
      ctx.exit_code = Fail(client.Error(st));
      return;
    }
    std::printf("framework %s torn down: its tasks are killed\n", id->c_str());
  });
  cmd->callback([&ctx, cmd] {
    if (cmd->got_subcommand("teardown")) return;
    Client client(ctx.flags);
    auto stub = v1::Frameworks::NewStub(client.channel());
    v1::ListFrameworksResponse resp;
    auto rctx = client.Context();
    if (grpc::Status st = stub->ListFrameworks(rctx.get(), v1::ListFrameworksRequest(), &resp); !st.ok()) {
      ctx.exit_code = Fail(client.Error(st));
      return;
    }
    if (ctx.flags.json) {
      std::printf("%s\n", ToJson(resp).c_str());
      return;
    }
    Table t({"ID", "NAME", "USER", "ROLE", "WEIGHT", "STATE", "TASKS", "OFFERS", "CPU", "MEMORY", "DOMINANT SHARE"});
    for (const v1::FrameworkSummary& f : resp.frameworks()) {
      const ResourceVector held = ResourceVector::FromProto(f.used());
      t.Add({f.info().id(), f.info().name(), f.info().user(), f.info().role().empty() ? "*" : f.info().role(),
             absl::StrFormat("%g", f.role_weight()), f.connected() ? "connected" : "disconnected",
             absl::StrCat(f.tasks()), absl::StrCat(f.outstanding_offers()),
             FormatDimension("cpu", held.cpu_millis), FormatDimension("memory", held.memory_bytes),
             absl::StrFormat("%.3f %s", f.dominant_share(), f.dominant_resource())});
    }
    std::printf("%s", t.size() ? t.ToString().c_str() : "no frameworks registered\n");
  });
}

}  // namespace herd::cli
