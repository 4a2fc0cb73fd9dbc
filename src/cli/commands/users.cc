// Credentials: `herd ca init|issue` (where the CA's key is: set up a cell,
// issue the master's, machines' and schedulers' credentials) and `herd user
// add` (asks the master, which holds the CA when started with --ca; the new
// key is made here and never leaves this machine).
#include <sys/stat.h>

#include <ctime>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "base/ids.h"
#include "base/units.h"
#include "cli/commands/commands.h"

namespace herd::cli {

namespace {

constexpr int64_t kDay = 24 * 3600;

int64_t NowS() { return static_cast<int64_t>(std::time(nullptr)); }

std::string Date(int64_t unix_s) {
  std::time_t t = unix_s;
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%d", &tm);
  return buf;
}

absl::StatusOr<int64_t> ValidSeconds(const std::string& text, int64_t fallback_s) {
  if (text.empty()) return fallback_s;
  absl::StatusOr<int64_t> ms = ParseDurationMs(text);
  if (!ms.ok()) return absl::InvalidArgumentError(absl::StrCat("--valid: ", ms.status().message()));
  if (*ms < 60'000) return absl::InvalidArgumentError("--valid: must be at least a minute");
  return *ms / 1000;
}

// Writes a credential and says so.
int Save(const std::string& out, const pki::Credential& c) {
  if (absl::Status st = pki::SaveCredential(out, c); !st.ok()) return Fail(st);
  std::printf("wrote %s (%s, valid until %s)\n", out.c_str(), pki::Describe(c.info.subject).c_str(),
              Date(c.info.not_after_s).c_str());
  return 0;
}

void AddCaInit(CLI::App& ca, CommandContext& ctx) {
  auto* cmd = ca.add_subcommand("init", "Create a cell's certificate authority (DIR/ca.crt, DIR/ca.key)");
  auto dir = std::make_shared<std::string>();
  auto cell = std::make_shared<std::string>("herd");
  auto valid = std::make_shared<std::string>();
  cmd->add_option("--ca", *dir, "Directory for the CA (created, mode 0700)")->required();
  cmd->add_option("--cell", *cell, "Cell name, in the CA's name")->capture_default_str();
  cmd->add_option("--valid", *valid, "How long the CA is valid (default 3650d)");
  cmd->callback([&ctx, dir, cell, valid] {
    if (std::filesystem::exists(std::filesystem::path(*dir) / "ca.key")) {
      ctx.exit_code = Fail(absl::AlreadyExistsError(absl::StrCat(*dir, " already holds a CA (ca.key); a second one "
                                                                 "would split the cell")));
      return;
    }
    absl::StatusOr<int64_t> valid_s = ValidSeconds(*valid, 3650 * kDay);
    if (!valid_s.ok()) {
      ctx.exit_code = Fail(valid_s.status());
      return;
    }
    absl::StatusOr<pki::Authority> a = pki::CreateAuthority(*cell, NowS(), *valid_s);
    if (!a.ok()) {
      ctx.exit_code = Fail(a.status());
      return;
    }
    if (absl::Status st = pki::SaveAuthority(*dir, *a); !st.ok()) {
      ctx.exit_code = Fail(st);
      return;
    }
    std::printf("created the CA of cell %s in %s (keep ca.key secret)\n", cell->c_str(), dir->c_str());
  });
}

void AddCaIssue(CLI::App& ca, CommandContext& ctx) {
  auto* cmd = ca.add_subcommand("issue", "Issue a credential with the CA in DIR (a master's, machine's, "
                                         "scheduler's or user's)");
  auto dir = std::make_shared<std::string>();
  auto out = std::make_shared<std::string>();
  auto machine = std::make_shared<std::string>();
  auto scheduler = std::make_shared<std::string>();
  auto user = std::make_shared<std::string>();
  auto master = std::make_shared<bool>(false);
  auto admin = std::make_shared<bool>(false);
  auto valid = std::make_shared<std::string>();
  cmd->add_option("--ca", *dir, "The CA's directory (herd ca init)")->required();
  cmd->add_option("--out", *out, "Credential file to write (mode 0600)")->required();
  cmd->add_flag("--master", *master, "For the master");
  cmd->add_option("--machine", *machine, "For the agent of machine NAME");
  cmd->add_option("--scheduler", *scheduler, "For the scheduler NAME");
  cmd->add_option("--user", *user, "For user NAME");
  cmd->add_flag("--admin", *admin, "The user is an administrator");
  cmd->add_option("--valid", *valid, "How long it is valid (default 365d)");
  cmd->callback([&ctx, dir, out, machine, scheduler, user, master, admin, valid] {
    pki::Subject who;
    int roles = (*master ? 1 : 0) + !machine->empty() + !scheduler->empty() + !user->empty();
    if (roles != 1) {
      ctx.exit_code = Fail(absl::InvalidArgumentError("name exactly one of --master, --machine NAME, --scheduler "
                                                      "NAME, --user NAME"));
      return;
    }
    absl::Status name_ok;
    if (*master) {
      who = {pki::Role::kMaster, "master"};
    } else if (!machine->empty()) {
      who = {pki::Role::kMachine, *machine};
      name_ok = ValidateMachineName(*machine);
    } else if (!scheduler->empty()) {
      who = {pki::Role::kScheduler, *scheduler};
      name_ok = ValidateUserName(*scheduler);
    } else {
      who = {pki::Role::kUser, *user};
      name_ok = ValidateUserName(*user);
    }
    if (*admin && who.role != pki::Role::kUser) name_ok = absl::InvalidArgumentError("--admin is for users only");
    who.admin = *admin;
    absl::StatusOr<int64_t> valid_s = ValidSeconds(*valid, 365 * kDay);
    if (!name_ok.ok() || !valid_s.ok()) {
      ctx.exit_code = Fail(!name_ok.ok() ? name_ok : valid_s.status());
      return;
    }
    absl::StatusOr<pki::Authority> a = pki::LoadAuthority(*dir);
    if (!a.ok()) {
      ctx.exit_code = Fail(a.status());
      return;
    }
    absl::StatusOr<pki::Credential> c = pki::IssueCredential(*a, who, NowS(), *valid_s);
    if (!c.ok()) {
      ctx.exit_code = Fail(c.status());
      return;
    }
    ctx.exit_code = Save(*out, *c);
  });
}

void AddUserAdd(CLI::App& user, CommandContext& ctx) {
  auto* cmd = user.add_subcommand("add", "Issue a credential for user NAME (asks the master; needs admin)");
  auto name = std::make_shared<std::string>();
  auto out = std::make_shared<std::string>();
  auto admin = std::make_shared<bool>(false);
  auto valid = std::make_shared<std::string>();
  cmd->add_option("name", *name, "The user's name")->required();
  cmd->add_option("--out", *out, "Credential file to write (mode 0600)")->required();
  cmd->add_flag("--admin", *admin, "The user is an administrator (holds every capability)");
  cmd->add_option("--valid", *valid, "How long it is valid (default 365d)");
  cmd->callback([&ctx, name, out, admin, valid] {
    if (absl::Status st = ValidateUserName(*name); !st.ok()) {
      ctx.exit_code = Fail(st);
      return;
    }
    absl::StatusOr<int64_t> valid_s = ValidSeconds(*valid, 365 * kDay);
    if (!valid_s.ok()) {
      ctx.exit_code = Fail(valid_s.status());
      return;
    }
    absl::StatusOr<pki::KeyPair> key = pki::GenerateKey();
    if (!key.ok()) {
      ctx.exit_code = Fail(key.status());
      return;
    }
    Client client(ctx.flags);
    v1::IssueCredentialRequest req;
    req.set_name(*name);
    req.set_admin(*admin);
    req.set_public_key_pem(key->public_pem);
    req.set_valid_seconds(*valid_s);
    v1::IssueCredentialResponse resp;
    auto rctx = client.Context();
    grpc::Status st = client.stub().IssueCredential(rctx.get(), req, &resp);
    if (!st.ok()) {
      ctx.exit_code = Fail(client.Error(st));
      return;
    }
    pki::Credential c;
    c.cert_pem = resp.cert_pem();
    c.key_pem = key->private_pem;
    c.ca_pem = resp.ca_pem();
    absl::StatusOr<pki::CertInfo> info = pki::Inspect(c.cert_pem);
    if (!info.ok()) {
      ctx.exit_code = Fail(absl::InternalError(absl::StrCat("the master returned a bad certificate: ",
                                                            info.status().message())));
      return;
    }
    c.info = *info;
    ctx.exit_code = Save(*out, c);
  });
}

// grant / ungrant / revoke: one UpdateUser each.
void AddUserUpdate(CLI::App& user, CommandContext& ctx, const std::string& verb) {
  const bool revoke = verb == "revoke";
  const char* help = revoke ? "Revoke every credential of user NAME issued until now (needs admin)"
                     : verb == "grant"
                         ? "Grant user NAME capabilities: admin, quota-admin, run-as, exec-any, read-all, run-as-root"
                         : "Take capabilities away from user NAME";
  auto* cmd = user.add_subcommand(verb, help);
  auto name = std::make_shared<std::string>();
  auto caps = std::make_shared<std::vector<std::string>>();
  cmd->add_option("name", *name, "The user's name")->required();
  if (!revoke) cmd->add_option("capabilities", *caps, "Capabilities (space or comma separated)")->required()->delimiter(',');
  cmd->add_flag("--json", ctx.flags.json, "Print the response as JSON");
  cmd->callback([&ctx, name, caps, verb, revoke] {
    Client client(ctx.flags);
    v1::UpdateUserRequest req;
    req.set_name(*name);
    for (const std::string& c : *caps) (verb == "grant" ? req.add_grant() : req.add_ungrant())->assign(c);
    req.set_revoke_credentials(revoke);
    v1::UpdateUserResponse resp;
    if (!CallMaster(ctx, client, &v1::Herd::Stub::UpdateUser, req, &resp)) return;
    std::string caps_text;
    for (const std::string& c : resp.user().capabilities()) caps_text += (caps_text.empty() ? "" : ", ") + c;
    if (revoke) {
      std::printf("revoked every credential of user %s issued until now (revision %lld)\n", name->c_str(),
                  static_cast<long long>(resp.revision()));
    } else {
      std::printf("user %s: capabilities %s (revision %lld)\n", name->c_str(),
                  caps_text.empty() ? "none" : caps_text.c_str(), static_cast<long long>(resp.revision()));
    }
  });
}

}  // namespace

void AddCredentialCommands(CLI::App& app, CommandContext& ctx) {
  auto* ca = app.add_subcommand("ca", "The cell's certificate authority: init, issue");
  ca->require_subcommand(1);
  AddCaInit(*ca, ctx);
  AddCaIssue(*ca, ctx);
  auto* user = app.add_subcommand("user", "Users of the cell: add, grant, ungrant, revoke");
  user->require_subcommand(1);
  AddUserAdd(*user, ctx);
  for (const char* verb : {"grant", "ungrant", "revoke"}) AddUserUpdate(*user, ctx, verb);
}

}  // namespace herd::cli
