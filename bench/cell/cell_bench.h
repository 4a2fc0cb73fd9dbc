// `herd bench cell --agents N --tasks M` (issue #11): task arrival through
// a real master and the real agent protocol code at Borg scale on one
// machine. A real `herd master` process (its real SQLite store, TLS, the
// internal scheduler) and N hollow agents in this process (the real
// PollServer, Registrar and Doorbell over a fake runtime, each machine with
// its own certificate, as kubemark runs hollow nodes); M tasks submitted as
// jobs of --tasks-per-job over gRPC (as fast as they go, or at --rate tasks
// a second), timed from each job's Submit until the master's Watch stream
// reports each task running.
//
// Prints a table and RESULT lines: tasks_per_min, submit_to_running_p50_ms,
// submit_to_running_p99_ms, poll_latency_p99_ms, master_cpu_cores,
// master_peak_rss_mib, machines_marked_down, tasks_started_more_than_once,
// ... With --baseline full-polls the same cell runs a second time with every
// poll carrying a machine's whole desired state (the protocol before delta
// polls), and its figures are printed beside, prefixed full_polls_.
#pragma once

#include <cstdint>
#include <string>

namespace herd::bench {

struct CellBenchOptions {
  int agents = 100;
  int64_t tasks = 10'000;
  int tasks_per_job = 100;
  std::string poll_interval = "2s";
  std::string full_poll_interval = "60s";
  // Machine capacity and task size (every task fits many times over).
  std::string capacity = "cpu=32,memory=128Gi";
  int64_t task_cpu_millis = 10;
  int64_t task_memory_mib = 16;
  int64_t start_ms = 0;  // how long a hollow start takes
  int max_parallel_starts = 8;
  int agents_per_port = 100;
  // Hollow agents run in processes of at most this many (each agent holds
  // two descriptors; a process may not have enough for 10,000).
  int agents_per_process = 4000;
  int contact_threads = 32;
  int submitters = 4;
  double rate = 0;  // tasks a second submitted (steadily); 0: all at once
  int timeout_s = 1800;
  std::string herd;      // the herd binary for the master (default: this one)
  std::string baseline;  // "", or "full-polls"
  bool keep = false;     // keep the data directory
};

int RunCellBench(const CellBenchOptions& options);

// `herd bench hollow`: one process of hollow agents, for `herd bench cell`
// (which starts them). Runs until SIGTERM, writing
// "registered starts live rings" to stats_file every half second.
struct HollowProcessOptions {
  std::string master;
  std::string ca_dir;  // the cell CA (ca.crt, ca.key): issues the machines' credentials
  int first = 0;
  int count = 100;
  int width = 0;
  int agents_per_port = 100;
  int contact_threads = 32;
  std::string capacity = "cpu=32,memory=128Gi";
  int64_t start_ms = 0;
  int max_parallel_starts = 8;
  std::string stats_file;
};
int RunHollowAgents(const HollowProcessOptions& options);

}  // namespace herd::bench
