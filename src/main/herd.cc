// herd: the one binary. Roles (up, down, master, agent, scheduler) and the
// user verbs (submit, diff, scale, kill, jobs, tasks, status, why, machines,
// logs, quota, checkpoint, cell).
// This is the only file that links every part together.
#include <sys/resource.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <tuple>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "agent/server/agent_server.h"
#include "base/ids.h"
#include "base/log.h"
#include "base/units.h"
#include "cli/commands/commands.h"
#include "main/bench_role.h"
#include "main/config_file.h"
#include "main/framework_flags.h"
#include "main/reclaim_flags.h"
#include "main/scheduler_role.h"
#include "main/sim_role.h"
#include "main/up.h"
#include "master/server/master_server.h"
#include "rpc/rpc.h"
#include "sched/config/flags.h"
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

// The flags of `herd master` that are not fields of ServerOptions as they
// are: durations as written, the scheduler's, reclamation's and the
// Framework API's.
struct MasterFlags {
  std::string poll = "2s";
  std::string poll_timeout = "10s";
  std::string full_poll = "60s";
  std::string task_lease;  // default: poll x down-after
  std::string scheduler_mode = "internal";
  std::string history_sample = "60s";
  std::string history_keep = "7d";
  sched::SchedulerFlags scheduler;
  ReclaimFlags reclaim;
  FrameworkFlags frameworks;
};

void AddMasterFlags(CLI::App* cmd, master::ServerOptions* o, MasterFlags* f) {
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
  cmd->add_option("--user-rate", o->user_rate,
                  "Requests a second each user may send (bursts of twice that); 0: no limit")
      ->capture_default_str();
  cmd->add_option("--max-tasks-per-user", o->core.max_tasks_per_user,
                  "Tasks (not dead) each user may have, at every priority, 0 included; admins are not held to it; "
                  "0: no limit")
      ->capture_default_str();
  cmd->add_option("--max-streams-per-user", o->max_streams_per_user,
                  "Open streams (watch, watch-names, checkpoint export, framework subscriptions) each user may hold; "
                  "0: no limit")
      ->capture_default_str()
      ->check(CLI::Range(0, 1 << 20));
  cmd->add_option("--max-requests-per-user", o->max_requests_per_user,
                  "Unary requests each user may have in flight at once (each holds a server thread while served); "
                  "0: no limit")
      ->capture_default_str()
      ->check(CLI::Range(0, rpc::kMaxServerThreads));
  cmd->add_option("--max-streams", o->max_streams,
                  "Open streams the master serves in all (a stream holds no thread: this bounds their memory)")
      ->capture_default_str()
      ->check(CLI::Range(1, 100'000));
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
  cmd->add_option("--history-sample", f->history_sample,
                  "One usage row per task per this period (rolled up into 15m rows after 6h)")
      ->capture_default_str();
  cmd->add_option("--history-retention", f->history_keep, "History older than this is deleted")->capture_default_str();
  cmd->add_option("--poll-interval", f->poll, "How often each agent is polled")->capture_default_str();
  cmd->add_option("--down-after", o->core.link.down_after_misses, "Missed polls before a machine is down")
      ->capture_default_str();
  cmd->add_option("--poll-timeout", f->poll_timeout,
                  "How long a poll may take before it counts as missed (apart from the interval: a busy agent is "
                  "not a dead one)")
      ->capture_default_str();
  cmd->add_option("--full-poll-interval", f->full_poll,
                  "How often an agent gets its whole desired state; other polls carry only what changed "
                  "(0: every poll carries everything, as before delta polls)")
      ->capture_default_str();
  cmd->add_option("--task-lease", f->task_lease,
                  "How long at-most-once tasks run on after their machine's last contact with the master "
                  "(default: --poll-interval x --down-after)");
  cmd->add_option("--scheduler", f->scheduler_mode,
                  "internal: run the scheduler in the master; external: leave placement to 'herd scheduler' "
                  "processes (Propose)")
      ->capture_default_str();
  f->scheduler.AddTo(cmd);
  cmd->add_option("--snapshot-every", o->core.committer.snapshot_every, "Mutations between snapshots")
      ->capture_default_str();
  AddReclaimFlags(cmd, &f->reclaim);
  AddFrameworkFlags(cmd, &f->frameworks);
  cmd->add_option("--log-file", o->log_file, "Also log to this file");
}

// INVALID_ARGUMENT naming the flag.
absl::Status ApplyMasterFlags(const MasterFlags& f, master::ServerOptions* o) {
  if (auto st = ApplyReclaimFlags(f.reclaim, &o->core.reclaim); !st.ok()) {
    return absl::InvalidArgumentError(std::string(st.message()));
  }
  if (auto st = ApplyFrameworkFlags(f.frameworks, &o->core.frameworks); !st.ok()) {
    return absl::InvalidArgumentError(std::string(st.message()));
  }
  for (auto [flag, text, out] :
       {std::tuple{"--history-sample", &f.history_sample, &o->history_options.sample_interval_ms},
        std::tuple{"--history-retention", &f.history_keep, &o->history_options.retention_ms}}) {
    auto ms = ParseDurationMs(*text);
    if (!ms.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(flag, ": ", ms.status().message()));
    }
    *out = *ms;
  }
  auto interval = ParseDurationMs(f.poll);
  if (!interval.ok() || *interval < 10) {
    return absl::InvalidArgumentError(
        absl::StrCat("--poll-interval: ", interval.ok() ? "must be at least 10ms" : interval.status().message()));
  }
  if (auto st = f.scheduler.Apply(&o->core.scheduler); !st.ok()) {
    return absl::InvalidArgumentError(std::string(st.message()));
  }
  if (f.scheduler_mode != "internal" && f.scheduler_mode != "external") {
    return absl::InvalidArgumentError(
        absl::StrCat("--scheduler: '", f.scheduler_mode, "' is neither internal nor external"));
  }
  o->core.run_scheduler = f.scheduler_mode == "internal";
  if (o->core.link.down_after_misses < 1) {
    return absl::InvalidArgumentError("--down-after must be at least 1");
  }
  o->core.link.poll_interval_ms = *interval;
  auto timeout = ParseDurationMs(f.poll_timeout);
  if (!timeout.ok() || *timeout < 100) {
    return absl::InvalidArgumentError(
        absl::StrCat("--poll-timeout: ", timeout.ok() ? "must be at least 100ms" : timeout.status().message()));
  }
  o->core.link.poll_timeout_ms = *timeout;
  auto full = ParseDurationMs(f.full_poll);
  if (!full.ok() || *full < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--full-poll-interval: ", full.ok() ? "must not be negative" : full.status().message()));
  }
  o->core.link.full_poll_interval_ms = *full;
  if (!f.task_lease.empty()) {
    auto lease = ParseDurationMs(f.task_lease);
    if (!lease.ok() || *lease < 100) {
      return absl::InvalidArgumentError(
          absl::StrCat("--task-lease: ", lease.ok() ? "must be at least 100ms" : lease.status().message()));
    }
    o->core.link.task_lease_ms = *lease;
  }
  return absl::OkStatus();
}

void AddMaster(CLI::App& app, int& rc) {
  auto* cmd = app.add_subcommand("master", "Run a master (state in --data, API on --listen)");
  auto o = std::make_shared<master::ServerOptions>();
  auto f = std::make_shared<MasterFlags>();
  o->core.max_tasks_per_user = 100'000;
  AddMasterFlags(cmd, o.get(), f.get());
  AddConfigFlag(cmd);
  cmd->callback([&rc, o, f] {
    if (absl::Status st = ApplyMasterFlags(*f, o.get()); !st.ok()) {
      rc = Usage(std::string(st.message()));
      return;
    }
    o->core.version = HERD_VERSION;
    rc = master::RunMaster(*o);
  });
}

// The flags of `herd agent` as written, before they are checked into
// AgentOptions.
struct AgentFlags {
  std::string capacity;
  std::vector<std::string> attrs;
  std::string ports, memory_reserve, disk_reserve, log_max, log_retention, uids, package_cache, package_max;
};

void AddAgentFlags(CLI::App* cmd, agent::AgentOptions* o, AgentFlags* f) {
  cmd->add_option("--master", o->master, "Master address HOST:PORT")->capture_default_str();
  cmd->add_option("--listen", o->listen, "Agent address HOST:PORT (port 0 picks one)")->capture_default_str();
  cmd->add_option("--name", o->name, "Machine name (default: the name in the credential)");
  cmd->add_option("--credentials", o->credentials,
                  "This machine's credential, role machine (default ROOT/credentials.pem)");
  cmd->add_option("--join", o->join_token,
                  "With no credential yet: join the cell with this token (herd token create), or @FILE to read it "
                  "from FILE (the command line is visible to other users of the host)");
  cmd->add_option("--ca-hash", o->ca_hash,
                  "With --join: the cell CA's public key hash, sha256:HEX (herd token create prints it); the master "
                  "is trusted only if its CA has it");
  cmd->add_option("--capacity", f->capacity, "Resources to offer, e.g. cpu=2,memory=4Gi (default: detected)");
  cmd->add_option("--attr", f->attrs, "Machine attribute KEY=VALUE (repeatable)");
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
  cmd->add_option("--ports", f->ports, "Range to allocate tasks' named ports from, LO-HI (default 20000-20999)");
  cmd->add_option("--cgroup-root", o->cgroup_root, "Where cgroups are mounted; \"none\" runs tasks without containers")
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
  cmd->add_option("--memory-reserve", f->memory_reserve,
                  "Memory kept free for the system; below it non-prod tasks are evicted (default 256Mi)");
  cmd->add_option("--disk-reserve", f->disk_reserve,
                  "Disk kept free where the agent's root lives; below it the lowest-priority task using the most "
                  "disk is evicted (default 512Mi; 0: none)");
  cmd->add_option("--task-log-max-size", f->log_max, "Rotate a task's stdout/stderr at this size (default 10Mi)");
  cmd->add_option("--task-log-keep", o->log_keep, "Rotated files kept per stream")->capture_default_str();
  cmd->add_option("--task-log-retention", f->log_retention,
                  "Keep a task's logs this long after it ended (default 24h)");
  cmd->add_option("--package-dir", o->package_dir, "Package cache directory (default ROOT/packages)");
  cmd->add_option("--package-file-dirs", o->package_file_dirs,
                  "Directories local package files (file:// URLs, absolute paths) may come from (default: none)")
      ->delimiter(',');
  cmd->add_option("--task-uids", f->uids,
                  "Uids tasks run as, one per job owner, LO-HI (default 200000-299999); \"agent\": as the agent "
                  "itself");
  cmd->add_option("--task-uid-file", o->task_uid_file,
                  "The host's map of job owners to task uids, shared by every agent on the host (default "
                  "/var/lib/herd/task-uids)");
  cmd->add_option("--package-cache-size", f->package_cache, "Disk budget of the package cache (default 10Gi)");
  cmd->add_option("--package-max-size", f->package_max,
                  "Refuse package archives larger than this (default: the package cache size)");
}

// INVALID_ARGUMENT naming the flag.
absl::Status ApplyAgentFlags(const AgentFlags& f, agent::AgentOptions* o) {
  if (f.uids == "agent") {
    o->task_uid_count = 0;
  } else if (!f.uids.empty()) {
    std::pair<std::string, std::string> lh = absl::StrSplit(f.uids, absl::MaxSplits('-', 1));
    uint32_t lo = 0, hi = 0;
    if (!absl::SimpleAtoi(lh.first, &lo) || !absl::SimpleAtoi(lh.second, &hi) || lo < 1000 || hi < lo ||
        hi >= (1u << 31)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--task-uids '", f.uids, "' is not a range LO-HI within 1000-2147483647, or 'agent'"));
    }
    o->task_uid_min = lo;
    o->task_uid_count = hi - lo + 1;
  }
  if (!f.ports.empty()) {
    std::pair<std::string, std::string> lh = absl::StrSplit(f.ports, absl::MaxSplits('-', 1));
    if (!absl::SimpleAtoi(lh.first, &o->port_min) || !absl::SimpleAtoi(lh.second, &o->port_max) || o->port_min < 1 ||
        o->port_max > 65535 || o->port_min > o->port_max) {
      return absl::InvalidArgumentError(absl::StrCat("--ports '", f.ports, "' is not a range LO-HI within 1-65535"));
    }
  }
  for (auto [flag, text, out] : {std::tuple{"--memory-reserve", &f.memory_reserve, &o->memory_reserve_bytes},
                                 std::tuple{"--disk-reserve", &f.disk_reserve, &o->disk_reserve_bytes},
                                 std::tuple{"--task-log-max-size", &f.log_max, &o->log_max_bytes},
                                 std::tuple{"--package-cache-size", &f.package_cache, &o->package_cache_bytes},
                                 std::tuple{"--package-max-size", &f.package_max, &o->package_max_bytes}}) {
    if (text->empty()) continue;
    auto bytes = ParseBytes(*text);
    if (!bytes.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(flag, ": ", bytes.status().message()));
    }
    *out = *bytes;
  }
  if (!f.log_retention.empty()) {
    auto ms = ParseDurationMs(f.log_retention);
    if (!ms.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--task-log-retention: ", ms.status().message()));
    }
    o->log_retention_ms = *ms;
  }
  if (auto st = rpc::ValidateAddress(o->master); !st.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--master: ", st.message()));
  }
  if (auto st = rpc::ValidateAddress(o->listen); !st.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--listen: ", st.message()));
  }
  if (!o->name.empty()) {
    if (auto st = ValidateMachineName(o->name); !st.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--name: ", st.message()));
    }
  }
  if (!f.capacity.empty()) {
    auto c = ParseResourceList(f.capacity);
    if (!c.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--capacity: ", c.status().message()));
    }
    o->capacity = *c;
    o->capacity_given = true;
  }
  for (const std::string& a : f.attrs) {
    std::pair<std::string, std::string> kv = absl::StrSplit(a, absl::MaxSplits('=', 1));
    if (a.find('=') == std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat("--attr '", a, "' is not KEY=VALUE"));
    }
    if (auto st = ValidateAttributeKey(kv.first); !st.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--attr: ", st.message()));
    }
    o->attributes[kv.first] = kv.second;
  }
  return absl::OkStatus();
}

void AddAgent(CLI::App& app, int& rc) {
  auto* cmd = app.add_subcommand("agent", "Run an agent for this machine");
  auto o = std::make_shared<agent::AgentOptions>();
  auto f = std::make_shared<AgentFlags>();
  AddAgentFlags(cmd, o.get(), f.get());
  AddConfigFlag(cmd);
  cmd->callback([&rc, o, f] {
    if (absl::Status st = ApplyAgentFlags(*f, o.get()); !st.ok()) {
      rc = Usage(std::string(st.message()));
      return;
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
  cmd->add_option("--poll-interval", o->poll_interval, "How often the master polls each agent")->capture_default_str();
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
  cmd->add_option(
      "--master-arg", o->master_args,
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
  // --config FILE (herd master, herd agent): the file's flags join the
  // command line's, which win.
  absl::StatusOr<std::vector<std::string>> args = herd::ExpandConfig(app, std::vector<std::string>(argv + 1, argv + argc));
  if (!args.ok()) {
    std::fprintf(stderr, "herd: %s\n", std::string(args.status().message()).c_str());
    return 2;
  }
  std::reverse(args->begin(), args->end());  // CLI11 takes them last first
  try {
    app.parse(*args);
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
