// herd quota [--owner U]; herd quota set USER BAND cpu=..,memory=..
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/priority.h"
#include "base/resources.h"
#include "cli/commands/commands.h"
#include "cli/render/render.h"

namespace herd::cli {
namespace {

std::string Dim(const v1::Resources& r, const std::string& dim) {
  return FormatDimension(dim, ResourceVector::FromProto(r).Get(dim));
}

}  // namespace

void AddQuota(CLI::App& app, CommandContext& ctx) {
  auto* cmd = app.add_subcommand("quota", "Show quota and usage per user and band; 'quota set' changes it");
  auto owner = std::make_shared<std::string>();
  cmd->add_option("--owner", *owner, "Only this user");
  cmd->add_flag("--json", ctx.flags.json, "Print the ListQuotasResponse as JSON");
  auto* set = cmd->add_subcommand("set", "Set USER's quota in BAND, e.g. herd quota set alice production cpu=10,memory=20Gi");
  auto user = std::make_shared<std::string>();
  auto band = std::make_shared<std::string>();
  auto limit = std::make_shared<std::string>();
  set->add_option("user", *user, "User")->required();
  set->add_option("band", *band, "free, batch, mid, production or monitoring")->required();
  set->add_option("limit", *limit, "cpu=..,memory=..,disk=..,ports=..,NAME=.. (dimensions not named are unlimited)")
      ->required();
  set->callback([&ctx, user, band, limit] {
    auto r = ParseResourceList(*limit);
    if (!r.ok()) {
      ctx.exit_code = Fail(absl::InvalidArgumentError(absl::StrCat("bad quota '", *limit, "': ", r.status().message())));
      return;
    }
    if (!ParseBand(*band)) {
      ctx.exit_code = Fail(absl::InvalidArgumentError(
          absl::StrCat("unknown band '", *band, "' (free, batch, mid, production, monitoring)")));
      return;
    }
    Client client(ctx.flags);
    v1::SetQuotaRequest req;
    req.mutable_quota()->set_user(*user);
    req.mutable_quota()->set_band(std::string(BandName(*ParseBand(*band))));
    r->ToProto(req.mutable_quota()->mutable_limit());
    for (absl::string_view item : absl::StrSplit(*limit, absl::ByAnyChar(", "), absl::SkipEmpty())) {
      std::string dim(item.substr(0, item.find('=')));
      if (dim == "mem") dim = "memory";
      req.mutable_quota()->add_limited(dim);
    }
    v1::SetQuotaResponse resp;
    auto rctx = client.Context();
    grpc::Status st = client.stub().SetQuota(rctx.get(), req, &resp);
    if (!st.ok()) {
      ctx.exit_code = Fail(client.Error(st));
      return;
    }
    std::printf("quota of %s in band %s: %s (revision %lld)\n", user->c_str(), req.quota().band().c_str(),
                r->ToString().c_str(), static_cast<long long>(resp.revision()));
  });
  cmd->callback([&ctx, owner, cmd] {
    if (cmd->got_subcommand("set")) return;
    Client client(ctx.flags);
    v1::ListQuotasRequest req;
    req.set_user(*owner);
    v1::ListQuotasResponse resp;
    if (!CallMaster(ctx, client, &v1::Herd::Stub::ListQuotas, req, &resp)) return;
    Table t({"USER", "BAND", "CPU used/limit", "MEMORY used/limit"});
    for (const auto& q : resp.quotas()) {
      auto lim = [&](const std::string& dim) {
        if (q.unlimited()) return std::string("unlimited");
        for (const auto& d : q.quota().limited()) {
          if (d == dim) return Dim(q.quota().limit(), dim);
        }
        return std::string("unlimited");
      };
      t.Add({q.quota().user(), q.quota().band(), absl::StrCat(Dim(q.used(), "cpu"), "/", lim("cpu")),
             absl::StrCat(Dim(q.used(), "memory"), "/", lim("memory"))});
    }
    std::printf("%s", t.size() ? t.ToString().c_str() : "no quotas set and nothing running\n");
  });
}

}  // namespace herd::cli
