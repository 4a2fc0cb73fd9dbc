// herd resolve NAME [--watch] [--json]: where a task's or a job's tasks are
// (docs/naming.md) -- address, named ports, health, state -- and, with
// --watch, every change of that as it is committed.
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "cli/commands/commands.h"
#include "cli/render/render.h"

namespace herd::cli {
namespace {

std::string Ports(const v1::NameRecord& r) {
  std::map<std::string, int32_t> sorted(r.ports().begin(), r.ports().end());
  return absl::StrJoin(sorted, ",",
                       [](std::string* out, const auto& p) { absl::StrAppend(out, p.first, "=", p.second); });
}

std::vector<std::string> Row(const v1::NameRecord& r) {
  return {r.name(),
          r.dns(),
          StateName(r.state()),
          r.address().empty() ? "-" : r.address(),
          r.ports().empty() ? "-" : Ports(r),
          r.health().empty() ? "-" : r.health(),
          r.ready() ? "yes" : "no"};
}

const std::vector<std::string> kHeader = {"NAME", "DNS", "STATE", "ADDRESS", "PORTS", "HEALTH", "READY"};

}  // namespace

void AddResolve(CLI::App& app, CommandContext& ctx) {
  auto* cmd = app.add_subcommand("resolve", "Where a task or a job's tasks are: address, named ports, health");
  auto name = std::make_shared<std::string>();
  auto watch = std::make_shared<bool>(false);
  cmd->add_option("name", *name, "/CELL/USER/JOB[/INDEX], [INDEX.]JOB.USER.CELL.DOMAIN, USER/JOB[/INDEX] or JOB")
      ->required();
  cmd->add_flag("-w,--watch", *watch, "Keep printing each change (address, ports, health, state)");
  cmd->add_flag("--json", ctx.flags.json,
                "Print the ResolveResponse (with --watch: each WatchNamesResponse, one a line)");
  cmd->callback([&ctx, name, watch] {
    Client client(ctx.flags);
    if (!*watch) {
      v1::ResolveRequest req;
      req.set_name(*name);
      v1::ResolveResponse resp;
      if (!CallMaster(ctx, client, &v1::Herd::Stub::Resolve, req, &resp)) return;
      Table t(kHeader);
      for (const v1::NameRecord& r : resp.records()) t.Add(Row(r));
      std::fputs(t.ToString().c_str(), stdout);
      if (resp.truncated()) std::printf("(the first %d tasks)\n", resp.records_size());
      return;
    }
    v1::WatchNamesRequest req;
    req.set_name(*name);
    auto rctx = client.Context(0);  // no deadline: until interrupted
    auto reader = client.stub().WatchNames(rctx.get(), req);
    v1::WatchNamesResponse resp;
    while (reader->Read(&resp)) {
      if (ctx.flags.json) {
        std::printf("%s\n", ToJsonLine(resp).c_str());
      } else if (resp.initial()) {
        Table t(kHeader);
        for (const v1::NameRecord& r : resp.changed()) t.Add(Row(r));
        std::fputs(t.ToString().c_str(), stdout);
      } else {
        for (const v1::NameRecord& r : resp.changed()) {
          std::printf("revision %lld: %s\n", static_cast<long long>(resp.revision()),
                      absl::StrJoin(Row(r), " ").c_str());
        }
        for (const std::string& n : resp.removed()) {
          std::printf("revision %lld: %s removed\n", static_cast<long long>(resp.revision()), n.c_str());
        }
      }
      std::fflush(stdout);
    }
    grpc::Status st = reader->Finish();
    if (!st.ok()) ctx.exit_code = Fail(client.Error(st));
  });
}

}  // namespace herd::cli
