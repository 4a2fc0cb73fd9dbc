// herd: the one binary. Roles (up, down, master, agent, scheduler) and the
// user verbs (submit, diff, scale, kill, jobs, tasks, status, why, machines,
// logs, quota, checkpoint, cell).
// This is the only file that links every part together.
#include <sys/resource.h>
#include <CLI/CLI.hpp>

#include <cstdio>
#include <tuple>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/strings/str_split.h"
#include "agent/server/agent_server.h"
#include "base/ids.h"
#include "base/log.h"
#include "base/units.h"
#include "cli/commands/commands.h"
#include "main/scheduler_role.h"
#include "main/bench_role.h"
#include "main/sim_role.h"
#include "main/framework_flags.h"
#include "main/reclaim_flags.h"
#include "main/up.h"
#include "master/server/master_server.h"
#include "rpc/rpc.h"
#include "sched/framework/profile.h"

#ifndef HERD_VERSION
#define HERD_VERSION "dev"
#endif

namespace herd {
namespace {

int Usage(const std::string& msg) {
  std::fprintf(stderr, "herd: %s\n", msg.c_str());
  return 2;
}

void AddMaster(CLI::App& app, int& rc) {
  auto* cmd = app.add_subcommand("master", "Run a master (state in --data, API on --listen)");
  auto o = std::make_shared<master::ServerOptions>();
  auto poll = std::make_shared<std::string>("2s");
  auto sched_flags = std::make_shared<SchedulerFlags>();
  auto sched_mode = std::make_shared<std::string>("internal");
  cmd->add_option("--data", o->data_dir, "Data directory (the embedded store lives here)")->required();
  cmd->add_option("--store", o->store,
                  "Replicated state: etcd://HOST:PORT[,HOST:PORT...][/PREFIX]; run 3 or 5 masters on it, one leads "
                  "(default: SQLite in --data, one master)");
  cmd->add_option("--lease-ttl", o->lease_ttl_s, "With --store etcd://: the leader lease's TTL in seconds")
      ->capture_default_str();
  cmd->add_option("--etcd-credentials", o->etcd_credentials,
                  "With --store etcd://: TLS to etcd with this credential file (certificate, key, CA), issued by "
                  "etcd's own CA (not the cell's)");
  cmd->add_option("--listen", o->listen, "API address HOST:PORT")->capture_default_str();
  cmd->add_option("--credentials", o->credentials,
                  "The master's credential, role master (default DATA/credentials.pem)");
  cmd->add_option("--ca", o->ca_dir, "The cell CA's directory, to issue user credentials (herd user add)");
  cmd->add_option("--user-rate", o->user_rate, "Requests a second each user may send (bursts of twice that); 0: no limit")
      ->capture_default_str();
  o->core.max_tasks_per_user = 100'000;
  cmd->add_option("--max-tasks-per-user", o->core.max_tasks_per_user,
                  "Tasks (not dead) each user may have, at every priority, 0 included; admins are not held to it; "
                  "0: no limit")
      ->capture_default_str();
  cmd->add_option("--max-streams-per-user", o->max_streams_per_user,
                  "Open streams (watch, watch-names, checkpoint export, framework subscriptions) each user may hold; "
                  "0: no limit")
      ->capture_default_str()
      ->check(CLI::Range(0, 1 << 20));
  cmd->add_option("--max-streams", o->max_streams,
                  "Open streams the master serves in all, at most half its server threads so other calls always find "
                  "one")
      ->capture_default_str()
      ->check(CLI::Range(1, rpc::kMaxServerThreads / 2));
  auto* metrics = cmd->add_option("--metrics", o->metrics,
                                  "Serve Prometheus metrics at https://HOST:PORT/metrics (TLS with the master's "
                                  "certificate; a user's credential or --metrics-token-file's token)");
  cmd->add_option("--http", o->metrics,
                  "The master's HTTPS endpoint HOST:PORT (/metrics; what 'herd cell --json' reports as http); the "
                  "same as --metrics")
      ->excludes(metrics);
  cmd->add_option("--metrics-token-file", o->metrics_token_file,
                  "With --metrics: also accept \"Authorization: Bearer TOKEN\" with the token in this file");
  cmd->add_option("--dns", o->dns,
                  "Answer DNS for tasks' names at HOST:PORT, UDP and TCP (no TLS: names only; see docs/naming.md)");
  cmd->add_option("--dns-domain", o->core.dns_domain, "The DNS domain of tasks' names (INDEX.JOB.USER.CELL.DOMAIN)")
      ->capture_default_str()
      ->check([](const std::string& d) -> std::string {
        bool ok = !d.empty() && d.size() <= 100 && d.front() != '.' && d.back() != '.' && d.find("..") == d.npos;
        for (char c : d) ok = ok && ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.');
        return ok ? "" : "a DNS name of a-z, 0-9, '-' and '.', at most 100 characters";
      });
  cmd->add_option("--cell", o->core.cell_name, "Cell name")->capture_default_str();
  cmd->add_option("--history", o->history,
                  "The history database for 'herd query' (default DATA/history.db; 'none': keep no history)");
  cmd->add_option("--alerts", o->alerts,
                  "Alarm rules and sinks, a YAML file (docs/alerts.md; default: the built-in rules, no sinks)");
  auto history_sample = std::make_shared<std::string>("60s");
  auto history_keep = std::make_shared<std::string>("7d");
  cmd->add_option("--history-sample", *history_sample,
                  "One usage row per task per this period (rolled up into 15m rows after 6h)")
      ->capture_default_str();
  cmd->add_option("--history-retention", *history_keep, "History older than this is deleted")
      ->capture_default_str();
  cmd->add_option("--poll-interval", *poll, "How often each agent is polled")->capture_default_str();
  cmd->add_option("--down-after", o->core.link.down_after_misses, "Missed polls before a machine is down")
      ->capture_default_str();
  auto poll_timeout = std::make_shared<std::string>("10s");
  cmd->add_option("--poll-timeout", *poll_timeout,
                  "How long a poll may take before it counts as missed (apart from the interval: a busy agent is "
                  "not a dead one)")
      ->capture_default_str();
  auto full_poll = std::make_shared<std::string>("60s");
  cmd->add_option("--full-poll-interval", *full_poll,
                  "How often an agent gets its whole desired state; other polls carry only what changed "
                  "(0: every poll carries everything, as before delta polls)")
      ->capture_default_str();
  auto task_lease = std::make_shared<std::string>();
  cmd->add_option("--task-lease", *task_lease,
                  "How long at-most-once tasks run on after their machine's last contact with the master "
                  "(default: --poll-interval x --down-after)");
  cmd->add_option("--scheduler", *sched_mode,
                  "internal: run the scheduler in the master; external: leave placement to 'herd scheduler' "
                  "processes (Propose)")
      ->capture_default_str();
  AddSchedulerFlags(cmd, sched_flags.get());
  cmd->add_option("--snapshot-every", o->core.committer.snapshot_every, "Mutations between snapshots")
      ->capture_default_str();
  auto reclaim = std::make_shared<ReclaimFlags>();
  AddReclaimFlags(cmd, reclaim.get());
  auto fw_flags = std::make_shared<FrameworkFlags>();
  AddFrameworkFlags(cmd, fw_flags.get());
  cmd->add_option("--log-file", o->log_file, "Also log to this file");
  cmd->callback([&rc, o, poll, poll_timeout, full_poll, task_lease, sched_flags, sched_mode, history_sample,
                 history_keep, reclaim, fw_flags] {
    if (auto st = ApplyReclaimFlags(*reclaim, &o->core.reclaim); !st.ok()) {
      rc = Usage(std::string(st.message()));
      return;
    }
    if (auto st = ApplyFrameworkFlags(*fw_flags, &o->core.frameworks); !st.ok()) {
      rc = Usage(std::string(st.message()));
      return;
    }
    for (auto [flag, text, out] : {std::tuple{"--history-sample", history_sample.get(),
                                              &o->history_options.sample_interval_ms},
                                   std::tuple{"--history-retention", history_keep.get(),
                                              &o->history_options.retention_ms}}) {
      auto ms = ParseDurationMs(*text);
      if (!ms.ok()) {
        rc = Usage(absl::StrCat(flag, ": ", ms.status().message()));
        return;
      }
      *out = *ms;
    }
    auto interval = ParseDurationMs(*poll);
    if (!interval.ok() || *interval < 10) {
      rc = Usage(absl::StrCat("--poll-interval: ", interval.ok() ? "must be at least 10ms" : interval.status().message()));
      return;
    }
    if (auto st = ApplySchedulerFlags(*sched_flags, &o->core.scheduler); !st.ok()) {
      rc = Usage(std::string(st.message()));
      return;
    }
    if (*sched_mode != "internal" && *sched_mode != "external") {
      rc = Usage(absl::StrCat("--scheduler: '", *sched_mode, "' is neither internal nor external"));
      return;
    }
    o->core.run_scheduler = *sched_mode == "internal";
    if (o->core.link.down_after_misses < 1) {
      rc = Usage("--down-after must be at least 1");
      return;
    }
    o->core.link.poll_interval_ms = *interval;
    auto timeout = ParseDurationMs(*poll_timeout);
    if (!timeout.ok() || *timeout < 100) {
      rc = Usage(absl::StrCat("--poll-timeout: ", timeout.ok() ? "must be at least 100ms" : timeout.status().message()));
      return;
    }
    o->core.link.poll_timeout_ms = *timeout;
    auto full = ParseDurationMs(*full_poll);
    if (!full.ok() || *full < 0) {
      rc = Usage(absl::StrCat("--full-poll-interval: ", full.ok() ? "must not be negative" : full.status().message()));
      return;
    }
    o->core.link.full_poll_interval_ms = *full;
    if (!task_lease->empty()) {
      auto lease = ParseDurationMs(*task_lease);
      if (!lease.ok() || *lease < 100) {
        rc = Usage(absl::StrCat("--task-lease: ", lease.ok() ? "must be at least 100ms" : lease.status().message()));
        return;
      }
      o->core.link.task_lease_ms = *lease;
    }
    o->core.version = HERD_VERSION;
    rc = master::RunMaster(*o);
  });
}

void AddAgent(CLI::App& app, int& rc) {
  auto* cmd = app.add_subcommand("agent", "Run an agent for this machine");
  auto o = std::make_shared<agent::AgentOptions>();
  auto capacity = std::make_shared<std::string>();
  auto attrs = std::make_shared<std::vector<std::string>>();
  cmd->add_option("--master", o->master, "Master address HOST:PORT")->capture_default_str();
  cmd->add_option("--listen", o->listen, "Agent address HOST:PORT (port 0 picks one)")->capture_default_str();
  cmd->add_option("--name", o->name, "Machine name (default: the name in the credential)");
  cmd->add_option("--credentials", o->credentials,
                  "This machine's credential, role machine (default ROOT/credentials.pem)");
  cmd->add_option("--capacity", *capacity, "Resources to offer, e.g. cpu=2,memory=4Gi (default: detected)");
  cmd->add_option("--attr", *attrs, "Machine attribute KEY=VALUE (repeatable)");
  cmd->add_option("--root", o->root_dir, "Directory for task runs and logs");
  cmd->add_flag("--stop-tasks-on-exit", o->stop_tasks_on_exit, "Stop every task when the agent stops");
  cmd->add_option("--log-file", o->log_file, "Also log to this file");
  auto* metrics = cmd->add_option("--metrics", o->metrics,
                                  "Serve Prometheus metrics at https://HOST:PORT/metrics (TLS with the machine's "
                                  "certificate; a user's or the master's credential, or --metrics-token-file's token)");
  cmd->add_option("--http", o->metrics,
                  "The agent's HTTPS endpoint HOST:PORT (/metrics; listed as the machine's http by 'herd machines "
                  "--json'); the same as --metrics")
      ->excludes(metrics);
  cmd->add_option("--metrics-token-file", o->metrics_token_file,
                  "With --metrics: also accept \"Authorization: Bearer TOKEN\" with the token in this file");
  auto ports = std::make_shared<std::string>();
  cmd->add_option("--ports", *ports, "Range to allocate tasks' named ports from, LO-HI (default 20000-20999)");
  cmd->add_option("--cgroup-root", o->cgroup_root,
                  "Where cgroups are mounted; \"none\" runs tasks without containers")
      ->capture_default_str();
  cmd->add_option("--cgroup-parent", o->cgroup_parent, "Cgroup under which this agent's tasks go")
      ->capture_default_str();
  cmd->add_option("--batch-box", o->batch_box,
                  "Size the batch tasks' parent cgroup continuously to this machine's capacity minus what its "
                  "latency-sensitive tasks are predicted to use, minus 10% (docs/agent.md, \"The batch box\")")
      ->capture_default_str();
  cmd->add_option("--colocation", o->colocation,
                  "Colocation control: latency-sensitive tasks outweigh batch for CPU, the batch box, interference "
                  "control (throttle, evict batch). false: none of them and no CPU pinning (docs/agent.md)")
      ->capture_default_str();
  cmd->add_option("--cpu-pinning", o->cpu_pinning,
                  "Give latency-sensitive tasks that ask for whole cores CPUs of their own (needs a cpuset "
                  "controller; false for agents sharing one host)")
      ->capture_default_str();
  auto reserve = std::make_shared<std::string>();
  cmd->add_option("--memory-reserve", *reserve,
                  "Memory kept free for the system; below it non-prod tasks are evicted (default 256Mi)");
  auto disk_reserve = std::make_shared<std::string>();
  cmd->add_option("--disk-reserve", *disk_reserve,
                  "Disk kept free where the agent's root lives; below it the lowest-priority task using the most "
                  "disk is evicted (default 512Mi; 0: none)");
  auto log_max = std::make_shared<std::string>();
  cmd->add_option("--task-log-max-size", *log_max, "Rotate a task's stdout/stderr at this size (default 10Mi)");
  cmd->add_option("--task-log-keep", o->log_keep, "Rotated files kept per stream")->capture_default_str();
  auto retention = std::make_shared<std::string>();
  cmd->add_option("--task-log-retention", *retention, "Keep a task's logs this long after it ended (default 24h)");
  cmd->add_option("--package-dir", o->package_dir, "Package cache directory (default ROOT/packages)");
  cmd->add_option("--package-file-dirs", o->package_file_dirs,
                  "Directories local package files (file:// URLs, absolute paths) may come from (default: none)")
      ->delimiter(',');
  auto uids = std::make_shared<std::string>();
  cmd->add_option("--task-uids", *uids,
                  "Uids tasks run as, one per job owner, LO-HI (default 200000-299999); \"agent\": as the agent "
                  "itself");
  cmd->add_option("--task-uid-file", o->task_uid_file,
                  "The host's map of job owners to task uids, shared by every agent on the host (default "
                  "/var/lib/herd/task-uids)");
  auto cache = std::make_shared<std::string>();
  cmd->add_option("--package-cache-size", *cache, "Disk budget of the package cache (default 10Gi)");
  auto package_max = std::make_shared<std::string>();
  cmd->add_option("--package-max-size", *package_max,
                  "Refuse package archives larger than this (default: the package cache size)");
  cmd->callback([&rc, o, capacity, attrs, ports, reserve, disk_reserve, log_max, retention, cache, package_max, uids] {
    if (*uids == "agent") {
      o->task_uid_count = 0;
    } else if (!uids->empty()) {
      std::pair<std::string, std::string> lh = absl::StrSplit(*uids, absl::MaxSplits('-', 1));
      uint32_t lo = 0, hi = 0;
      if (!absl::SimpleAtoi(lh.first, &lo) || !absl::SimpleAtoi(lh.second, &hi) || lo < 1000 || hi < lo ||
          hi >= (1u << 31)) {
        rc = Usage(absl::StrCat("--task-uids '", *uids, "' is not a range LO-HI within 1000-2147483647, or 'agent'"));
        return;
      }
      o->task_uid_min = lo;
      o->task_uid_count = hi - lo + 1;
    }
    if (!ports->empty()) {
      std::pair<std::string, std::string> lh = absl::StrSplit(*ports, absl::MaxSplits('-', 1));
      if (!absl::SimpleAtoi(lh.first, &o->port_min) || !absl::SimpleAtoi(lh.second, &o->port_max) ||
          o->port_min < 1 || o->port_max > 65535 || o->port_min > o->port_max) {
        rc = Usage(absl::StrCat("--ports '", *ports, "' is not a range LO-HI within 1-65535"));
        return;
      }
    }
    for (auto [flag, text, out] : {std::tuple{"--memory-reserve", reserve.get(), &o->memory_reserve_bytes},
                                   std::tuple{"--disk-reserve", disk_reserve.get(), &o->disk_reserve_bytes},
                                   std::tuple{"--task-log-max-size", log_max.get(), &o->log_max_bytes},
                                   std::tuple{"--package-cache-size", cache.get(), &o->package_cache_bytes},
                                   std::tuple{"--package-max-size", package_max.get(), &o->package_max_bytes}}) {
      if (text->empty()) continue;
      auto bytes = ParseBytes(*text);
      if (!bytes.ok()) {
        rc = Usage(absl::StrCat(flag, ": ", bytes.status().message()));
        return;
      }
      *out = *bytes;
    }
    if (!retention->empty()) {
      auto ms = ParseDurationMs(*retention);
      if (!ms.ok()) {
        rc = Usage(absl::StrCat("--task-log-retention: ", ms.status().message()));
        return;
      }
      o->log_retention_ms = *ms;
    }
    if (auto st = rpc::ValidateAddress(o->master); !st.ok()) {
      rc = Usage(absl::StrCat("--master: ", st.message()));
      return;
    }
    if (auto st = rpc::ValidateAddress(o->listen); !st.ok()) {
      rc = Usage(absl::StrCat("--listen: ", st.message()));
      return;
    }
    if (!o->name.empty()) {
      if (auto st = ValidateMachineName(o->name); !st.ok()) {
        rc = Usage(absl::StrCat("--name: ", st.message()));
        return;
      }
    }
    if (!capacity->empty()) {
      auto c = ParseResourceList(*capacity);
      if (!c.ok()) {
        rc = Usage(absl::StrCat("--capacity: ", c.status().message()));
        return;
      }
      o->capacity = *c;
      o->capacity_given = true;
    }
    for (const std::string& a : *attrs) {
      std::pair<std::string, std::string> kv = absl::StrSplit(a, absl::MaxSplits('=', 1));
      if (a.find('=') == std::string::npos) {
        rc = Usage(absl::StrCat("--attr '", a, "' is not KEY=VALUE"));
        return;
      }
      if (auto st = ValidateAttributeKey(kv.first); !st.ok()) {
        rc = Usage(absl::StrCat("--attr: ", st.message()));
        return;
      }
      o->attributes[kv.first] = kv.second;
    }
    rc = agent::RunAgent(*o);
  });
}

void AddUp(CLI::App& app, int& rc) {
  auto* cmd = app.add_subcommand("up", "Start a whole local cell: a master and agents on this machine");
  auto o = std::make_shared<UpOptions>();
  cmd->add_option("--agents", o->agents, "Split this machine into N agents")->capture_default_str();
  cmd->add_option("--data", o->data_dir, "Data directory (default: $HERD_HOME or ~/.herd/up)");
  cmd->add_option("--listen", o->listen, "Master address HOST:PORT")->capture_default_str();
  cmd->add_option("--cell", o->cell, "Cell name")->capture_default_str();
  cmd->add_option("--poll-interval", o->poll_interval, "How often the master polls each agent")
      ->capture_default_str();
  cmd->add_option("--dns", o->dns,
                  "The master's DNS responder for tasks' names (port 0: any free one; \"\": none; not with --ha)")
      ->capture_default_str();
  cmd->add_option("--reclaim", o->reclaim,
                  "The master's resource reclamation: off, baseline, medium or aggressive (default: the master's)");
  cmd->add_option("--history-sample", o->history_sample,
                  "The master's usage sample period for the history and the UI's charts (default 60s)");
  cmd->add_option("--agent-capacity", o->agent_capacity,
                  "What each agent offers, e.g. cpu=9,memory=18Gi (default: this machine split among the agents)");
  cmd->add_option("--agent-arg", o->agent_args,
                  "A flag for every agent, e.g. --agent-arg=--colocation=false (repeatable; 'herd agent --help')");
  cmd->add_option("--master-arg", o->master_args,
                  "A flag for every master, e.g. --master-arg=--reclaim-startup=60s (repeatable; 'herd master --help')");
  cmd->add_flag("-d,--detach", o->detach, "Run in the background (stop with 'herd down')");
  cmd->add_flag("--ha", o->ha,
                "Replicated control plane: a 3-member etcd cluster and 3 masters on it (ports picked, printed; a "
                "master that dies is started again), so failover can be watched here");
  cmd->callback([&rc, o] { rc = RunUp(*o); });
  auto* down = app.add_subcommand("down", "Stop a cell started with 'herd up --detach'");
  auto dir = std::make_shared<std::string>();
  down->add_option("--data", *dir, "Its data directory (default: $HERD_HOME or ~/.herd/up)");
  down->callback([&rc, dir] { rc = RunDown(*dir); });
}

}  // namespace
}  // namespace herd

int main(int argc, char** argv) {
  // Debian's abseil is built without NDEBUG, so every absl::Mutex keeps
  // deadlock-detection bookkeeping in one global graph: 38% of a busy
  // master's CPU with 10,000 machines. It is a debugging aid; tests keep it.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  // Logs go to stderr, never stdout (which carries tables and JSON); the
  // server roles raise the level to info when they start.
  herd::InitLogging("herd", "", "warn");
  herd::rpc::RouteGrpcLogs();
  // Servers hold a descriptor per connection: the soft limit (often 1,024)
  // up to the hard one, so a flood of connections to one port runs into
  // the servers' own caps first, not into the process's limit (where gRPC's
  // listener stops accepting for good).
  if (rlimit nofile{}; getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur < nofile.rlim_max) {
    nofile.rlim_cur = nofile.rlim_max;
    (void)setrlimit(RLIMIT_NOFILE, &nofile);
  }
  CLI::App app("herd: a cluster manager in the tradition of Borg", "herd");
  app.require_subcommand(1);
  app.fallthrough();
  app.set_version_flag("--version", HERD_VERSION);
  int rc = 0;
  herd::cli::CommandContext ctx;
  herd::AddUp(app, rc);
  herd::AddMaster(app, rc);
  herd::AddAgent(app, rc);
  herd::AddScheduler(app, rc);
  herd::AddBench(app, rc);
  herd::AddSim(app, rc);
  herd::cli::AddUserCommands(app, ctx);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return 2;
  }
  return rc != 0 ? rc : ctx.exit_code;
}
