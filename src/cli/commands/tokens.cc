// `herd token create|list|revoke`: join tokens, with which new machines get
// their credential from the master (herd agent --join; docs/operating.md,
// "Adding machines").
#include <ctime>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/units.h"
#include "cli/commands/commands.h"

namespace herd::cli {
namespace {

std::string When(int64_t unix_ms) {
  std::time_t t = unix_ms / 1000;
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string State(const v1::JoinToken& t) {
  if (t.revoked()) return "revoked";
  if (static_cast<int64_t>(std::time(nullptr)) * 1000 >= t.expires_ms()) return "expired";
  if (t.max_uses() > 0 && t.machines_size() >= t.max_uses()) return "used up";
  return "live";
}

void AddCreate(CLI::App& token, CommandContext& ctx) {
  auto* cmd = token.add_subcommand("create", "Make a join token for new machines (needs admin)");
  auto ttl = std::make_shared<std::string>("1h");
  auto uses = std::make_shared<int>(0);
  auto description = std::make_shared<std::string>();
  cmd->add_option("--ttl", *ttl, "How long it works (1m to 30d)")->capture_default_str();
  cmd->add_option("--uses", *uses, "How many machines may join with it (0: any until it expires)")
      ->capture_default_str()
      ->check(CLI::Range(0, 10'000));
  cmd->add_option("--description", *description, "What it is for (shown by herd token list)");
  cmd->add_flag("--json", ctx.flags.json, "Print the response as JSON");
  cmd->callback([&ctx, ttl, uses, description] {
    absl::StatusOr<int64_t> ms = ParseDurationMs(*ttl);
    if (!ms.ok()) {
      ctx.exit_code = Fail(absl::InvalidArgumentError(absl::StrCat("--ttl: ", ms.status().message())));
      return;
    }
    Client client(ctx.flags);
    v1::CreateJoinTokenRequest req;
    req.set_ttl_seconds(*ms / 1000);
    req.set_max_uses(*uses);
    req.set_description(*description);
    v1::CreateJoinTokenResponse resp;
    if (!CallMaster(ctx, client, &v1::Herd::Stub::CreateJoinToken, req, &resp)) return;
    std::printf(
        "token:   %s\nexpires: %s\nuses:    %s\nca hash: %s\n\non the new machine:\n  herd agent --join %s "
        "--master %s --ca-hash %s\n",
        resp.token().c_str(), When(resp.info().expires_ms()).c_str(),
        resp.info().max_uses() == 0 ? "any" : std::to_string(resp.info().max_uses()).c_str(), resp.ca_hash().c_str(),
        resp.token().c_str(), client.master().c_str(), resp.ca_hash().c_str());
  });
}

void AddList(CLI::App& token, CommandContext& ctx) {
  auto* cmd = token.add_subcommand("list", "Join tokens: who made them, until when, which machines joined");
  cmd->add_flag("--json", ctx.flags.json, "Print the response as JSON");
  cmd->callback([&ctx] {
    Client client(ctx.flags);
    v1::ListJoinTokensResponse resp;
    if (!CallMaster(ctx, client, &v1::Herd::Stub::ListJoinTokens, v1::ListJoinTokensRequest(), &resp)) return;
    std::printf("%-8s %-8s %-21s %-6s %-10s %s\n", "ID", "STATE", "EXPIRES", "USES", "BY", "MACHINES");
    for (const v1::JoinToken& t : resp.tokens()) {
      const std::string used =
          absl::StrCat(t.machines_size(), "/", t.max_uses() == 0 ? "any" : std::to_string(t.max_uses()));
      std::printf("%-8s %-8s %-21s %-6s %-10s %s\n", t.id().c_str(), State(t).c_str(), When(t.expires_ms()).c_str(),
                  used.c_str(), t.created_by().c_str(), absl::StrJoin(t.machines(), ",").c_str());
    }
    if (!resp.ca_hash().empty()) std::printf("ca hash: %s\n", resp.ca_hash().c_str());
  });
}

void AddRevoke(CLI::App& token, CommandContext& ctx) {
  auto* cmd = token.add_subcommand("revoke", "Stop a join token from working (machines that joined keep theirs)");
  auto id = std::make_shared<std::string>();
  cmd->add_option("id", *id, "The token's id (or the whole token)")->required();
  cmd->add_flag("--json", ctx.flags.json, "Print the response as JSON");
  cmd->callback([&ctx, id] {
    Client client(ctx.flags);
    v1::RevokeJoinTokenRequest req;
    req.set_id(*id);
    v1::RevokeJoinTokenResponse resp;
    if (!CallMaster(ctx, client, &v1::Herd::Stub::RevokeJoinToken, req, &resp)) return;
    std::printf("revoked join token %s\n", resp.token().id().c_str());
  });
}

}  // namespace

void AddTokenCommands(CLI::App& app, CommandContext& ctx) {
  auto* token = app.add_subcommand("token", "Join tokens for new machines: create, list, revoke");
  token->require_subcommand(1);
  AddCreate(*token, ctx);
  AddList(*token, ctx);
  AddRevoke(*token, ctx);
}

}  // namespace herd::cli
