#include "main/scheduler_role.h"

#include <cstdio>
#include <functional>

#include "absl/strings/str_cat.h"
#include "cli/client.h"
#include "rpc/rpc.h"
#include "sched/server/scheduler_server.h"

namespace herd {

void AddSchedulerFlags(CLI::App* cmd, SchedulerFlags* f) {
  cmd->add_option("--policy", f->policy, "Packing policy: worst, best, hybrid, pack or k8s")->capture_default_str();
  cmd->add_option("--order", f->order, "Order of users' tasks within a priority: round-robin or drf")
      ->capture_default_str();
  cmd->add_option("--task-order", f->task_order,
                  "Order of one user's tasks within a priority: fifo (as submitted) or largest (hardest first)")
      ->capture_default_str();
  cmd->add_flag("--no-equiv", f->no_equiv, "Schedule task by task (no equivalence classes)");
  cmd->add_flag("--no-cache", f->no_cache, "Recompute every score in every pass (no score cache)");
  cmd->add_flag("--no-random", f->no_random, "Examine every machine (no relaxed randomization)");
}

absl::Status ApplySchedulerFlags(const SchedulerFlags& f, sched::Options* o) {
  auto policy = sched::ParsePackingPolicy(f.policy);
  if (!policy.ok()) return absl::InvalidArgumentError(absl::StrCat("--policy: ", policy.status().message()));
  auto order = sched::ParseQueueOrder(f.order);
  if (!order.ok()) return absl::InvalidArgumentError(absl::StrCat("--order: ", order.status().message()));
  auto task_order = sched::ParseTaskOrder(f.task_order);
  if (!task_order.ok()) return absl::InvalidArgumentError(absl::StrCat("--task-order: ", task_order.status().message()));
  o->policy = *policy;
  o->task_order = *task_order;
  o->order = *order;
  o->equivalence_classes = !f.no_equiv;
  o->score_cache = !f.no_cache;
  o->relaxed_randomization = !f.no_random;
  return absl::OkStatus();
}

void AddScheduler(CLI::App& app, int& rc) {
  auto* cmd = app.add_subcommand(
      "scheduler", "Run a scheduler in its own process: it follows the master's state and proposes placements");
  auto o = std::make_shared<sched::SchedulerServerOptions>();
  auto flags = std::make_shared<SchedulerFlags>();
  o->scheduler.name = "scheduler";
  cmd->add_option("--master", o->master, "Master address HOST:PORT")->capture_default_str();
  cmd->add_option("--name", o->scheduler.name, "Name in logs, in the mutations it proposes and in 'herd why'")
      ->capture_default_str();
  AddSchedulerFlags(cmd, flags.get());
  cmd->add_option("--log-file", o->log_file, "Also log to this file");
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
    if (auto st = ApplySchedulerFlags(*flags, &o->scheduler); !st.ok()) {
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
