// herd ui [--json]: a link that logs a browser into the master's web UI as
// you (CreateWebLogin). The link works once, for ten minutes; the session it
// opens lasts twelve hours or until the master restarts.
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "cli/commands/commands.h"

namespace herd::cli {

void AddUi(CLI::App& app, CommandContext& ctx) {
  auto* cmd = app.add_subcommand("ui", "Print a link that opens the cell's web UI in a browser, logged in as you");
  cmd->add_flag("--json", ctx.flags.json, "Print the CreateWebLoginResponse as JSON");
  cmd->callback([&ctx] {
    Client client(ctx.flags);
    v1::CreateWebLoginResponse resp;
    if (!CallMaster(ctx, client, &v1::Herd::Stub::CreateWebLogin, v1::CreateWebLoginRequest(), &resp)) return;
    const int64_t minutes = (resp.expires_ms() - absl::ToUnixMillis(absl::Now()) + 59'999) / 60'000;
    std::printf("%s\n", resp.url().c_str());
    std::fprintf(stderr,
                 "Open it within %lld minutes (it works once). The page's certificate is the cell's own (TLS name "
                 "%s): trust the cell CA in the browser, or accept it once.\n",
                 static_cast<long long>(minutes), resp.server_name().c_str());
  });
}

}  // namespace herd::cli
