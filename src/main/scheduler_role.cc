#include "main/scheduler_role.h"

#include <cstdio>
#include <functional>

#include "absl/strings/str_cat.h"
#include "cli/client.h"
#include "main/config_file.h"
#include "rpc/rpc.h"
#include "sched/config/flags.h"
#include "sched/server/scheduler_server.h"

namespace herd {

void AddScheduler(CLI::App& app, int& rc) {
  auto* cmd = app.add_subcommand(
      "scheduler", "Run a scheduler in its own process: it follows the master's state and proposes placements");
  auto o = std::make_shared<sched::SchedulerServerOptions>();
  auto flags = std::make_shared<sched::SchedulerFlags>();
  o->scheduler.name = "scheduler";
  cmd->add_option("--master", o->master, "Master address HOST:PORT")->capture_default_str();
  cmd->add_option("--name", o->scheduler.name, "Name in logs, in the mutations it proposes and in 'herd why'")
      ->capture_default_str();
  flags->AddTo(cmd);
  cmd->add_option("--log-file", o->log_file, "Also log to this file");
  AddConfigFlag(cmd);
  auto credentials = std::make_shared<std::string>();
  cmd->add_option("--credentials", *credentials,
                  "Credential to present to the master, role scheduler (default: $HERD_CREDENTIALS, else the one "
                  "'herd up' wrote)");
  cmd->callback([&rc, o, flags, credentials] {
    if (auto st = rpc::ValidateAddress(o->master); !st.ok()) {
      std::fprintf(stderr, "herd: --master: %s\n", std::string(st.message()).c_str());
      rc = 2;
      return;
    }
    if (o->scheduler.name.empty()) {
      std::fprintf(stderr, "herd: --name must not be empty\n");
      rc = 2;
      return;
    }
    if (auto st = flags->Apply(&o->scheduler); !st.ok()) {
      std::fprintf(stderr, "herd: %s\n", std::string(st.message()).c_str());
      rc = 2;
      return;
    }
    const std::string path = credentials->empty() ? cli::DefaultCredentialsPath() : *credentials;
    absl::StatusOr<pki::Credential> cred = pki::LoadCredential(path);
    if (!cred.ok()) {
      std::fprintf(stderr, "herd: --credentials: %s\n", std::string(cred.status().message()).c_str());
      rc = 2;
      return;
    }
    o->credential = std::move(*cred);
    // Schedulers racing on one cell should not make identical choices.
    o->scheduler.seed = std::hash<std::string>()(o->scheduler.name) | 1;
    rc = sched::RunSchedulerServer(*o);
  });
}

}  // namespace herd
