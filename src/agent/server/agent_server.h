// `herd agent`: one per machine. Registers with the master (and again if the
// master stops polling it), serves the Agent service: Poll (declarative
// desired state in, full observed state out) and ReadLogs.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/resources.h"
#include "pki/pki.h"

namespace herd::agent {

struct AgentOptions {
  std::string master = "127.0.0.1:7070";
  std::string listen = "127.0.0.1:7071";  // port 0 = pick one
  std::string name;                        // default: the name in the credential
  // The machine's credential (role machine, its name); default
  // ROOT/credentials.pem. Loaded into `identity` by RunAgent.
  std::string credentials;
  pki::Credential identity;
  // herd agent --join TOKEN --ca-hash sha256:HEX: with no credential yet,
  // get one from the master with a join token (join_client.h) and keep it
  // at `credentials`; once it exists the token is not used again.
  std::string join_token;
  std::string ca_hash;
  std::string root_dir;                    // runs and logs; default /var/lib/herd/agent/<name>
  std::string shim_path;                   // default: herd-shim next to herd
  bool capacity_given = false;
  ResourceVector capacity;                 // default: detected
  std::map<std::string, std::string> attributes;
  bool stop_tasks_on_exit = false;         // herd up: a stopped dev cell leaves nothing behind
  std::string log_file;
  // "HOST:PORT": serve /metrics over HTTPS there (https/https_server.h), to a
  // scraper with a user's or the master's credential or the bearer token in
  // metrics_token_file. "": no metrics endpoint.
  std::string metrics;
  std::string metrics_token_file;
  Clock* clock = nullptr;                  // default: the machine's

  // Containers: every task in its own cgroup under
  // <cgroup_root>/<cgroup_parent>/<name>/{ls,batch}/RUN_ID (per hierarchy on
  // v1). "none" in cgroup_root turns containers off (tasks still run, with
  // no limits or usage).
  std::string cgroup_root = "/sys/fs/cgroup";
  std::string cgroup_parent = "herd";
  // CPU pinning (agent/cgroup/cpu_manager.h): LS tasks asking for whole
  // cores get exclusive cpusets, where a cpuset controller is mounted. Off
  // for agents that share a host (`herd up --agents N`): each would think
  // every CPU its own.
  bool cpu_pinning = true;
  // The batch big box (issue #16): batch/'s CPU quota and memory limit
  // follow the capacity minus what latency-sensitive tasks are predicted
  // to use (CgroupOptions::batch_box_*). Off: its limits stay as set.
  bool batch_box = true;
  // Colocation control (CgroupOptions::colocation): LS over batch in CPU
  // weight, the batch box, interference control. Off: none of them, and no
  // CPU pinning (the uncontrolled baseline of `herd bench colocation`).
  bool colocation = true;
  // Memory the agent keeps free for itself and the system: below it, it
  // evicts non-prod tasks, lowest priority first.
  int64_t memory_reserve_bytes = 256ll << 20;
  // Disk the agent keeps free where its root lives: below it, the
  // lowest-priority task using the most disk is evicted (0: no reserve).
  int64_t disk_reserve_bytes = 512ll << 20;

  // Task output: rotated when a file passes log_max_bytes, log_keep rotated
  // files per stream, kept log_retention_ms after the task ended.
  int64_t log_max_bytes = 10ll << 20;
  int32_t log_keep = 3;
  int64_t log_retention_ms = 24ll * 3600 * 1000;
  // Crash loop: this many quick failures in a row.
  int32_t crash_loop_failures = 5;

  // Tasks that name no machine account run as a uid of their owner's from
  // [task_uid_min, task_uid_min + task_uid_count) (agent/packages/
  // task_users.h); count 0: as the agent itself (never with root agents in
  // a shared cell).
  uint32_t task_uid_min = 200000;
  uint32_t task_uid_count = 100000;
  // The host's map of job owners to those uids, shared by every agent of the
  // host so that one user has one uid there and two users never share one;
  // "" = /var/lib/herd/task-uids (ROOT/task-uids for an agent not root).
  std::string task_uid_file;

  // Named ports are allocated from [port_min, port_max].
  int32_t port_min = 20000;
  int32_t port_max = 20999;

  // Packages: a content-addressed cache (default <root_dir>/packages) kept
  // under package_cache_bytes by evicting the least recently used.
  std::string package_dir;
  int64_t package_cache_bytes = 10ll << 30;
  // Archives larger than this are refused (0: package_cache_bytes). Over
  // https the agent trusts the system's CAs and the cell CA of `identity`.
  int64_t package_max_bytes = 0;
  // Directories local packages (file:// and absolute paths) may come from;
  // none by default.
  std::vector<std::string> package_file_dirs;
};

// The machine's resources: cores, memory, the root's free disk, a port range.
ResourceVector DetectCapacity(const std::string& root_dir);
// hostname, arch, os, kernel.
std::map<std::string, std::string> DetectAttributes();

// Runs until SIGINT/SIGTERM; returns the exit code.
int RunAgent(AgentOptions options);

}  // namespace herd::agent
