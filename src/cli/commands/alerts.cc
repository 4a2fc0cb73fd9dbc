// herd alerts: the cell's alarms (docs/alerts.md).
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "cli/commands/commands.h"
#include "cli/render/render.h"

namespace herd::cli {

void AddAlerts(CLI::App& app, CommandContext& ctx) {
  auto* cmd = app.add_subcommand("alerts", "The cell's alarms: firing ones, and with --all those of the last day");
  auto all = std::make_shared<bool>(false);
  cmd->add_flag("--all", *all, "Also the alarms resolved within the last day");
  cmd->add_flag("--json", ctx.flags.json, "Print the ListAlertsResponse as JSON");
  cmd->callback([&ctx, all] {
    Client client(ctx.flags);
    v1::ListAlertsRequest req;
    req.set_all(*all);
    v1::ListAlertsResponse resp;
    if (!CallMaster(ctx, client, &v1::Herd::Stub::ListAlerts, req, &resp)) return;
    if (resp.alerts_size() == 0) {
      std::printf(*all ? "no alarms within the last day\n" : "no alarms firing\n");
      return;
    }
    const int64_t now = absl::ToUnixMillis(absl::Now());
    Table table({"RULE", "SUBJECT", "STATE", "SINCE", "COUNT", "MESSAGE"});
    for (const v1::Alert& a : resp.alerts()) {
      table.Add({a.rule(), a.subject(), a.firing() ? "firing" : absl::StrCat("resolved ", Age(a.resolved_ms(), now)),
                 Age(a.first_ms(), now), absl::StrCat(a.count()), a.message()});
    }
    std::printf("%s", table.ToString().c_str());
    if (resp.dropped_notifications() > 0) {
      std::printf("(%lld notifications could not be queued for the sinks)\n",
                  static_cast<long long>(resp.dropped_notifications()));
    }
  });
}

}  // namespace herd::cli
