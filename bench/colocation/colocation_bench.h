// `herd bench colocation` (issue #16): does batch work hurt a latency-
// sensitive service on the same machine, and how much of the idle CPU does
// batch get? On a real local cell (`herd up`, one agent, real cgroups):
//
//   1. alone:         an LS HTTP server (`herd bench ls-server`, a
//                     production job) driven at a fixed rate by wrk over
//                     loopback (at nice -10 as root: the client stands for
//                     one elsewhere); its p99, and the machine's idle CPU;
//                     measured again after phase 3's batch is killed, and
//                     the two averaged;
//   2. uncontrolled:  the same with batch hogs (stress-ng, a batch job) on
//                     a cell whose agent runs with --colocation=false (no LS
//                     priority over batch, no batch box, no interference
//                     control, no pinning);
//   3. colocated:     the same on a cell with colocation control on.
//
// Prints a table and RESULT ls_p99_alone_ms, ls_p99_colocated_ms,
// ls_p99_uncontrolled_ms, batch_cpu_share (batch CPU seconds / the idle
// CPU seconds LS left in phase 1, control on), batch_cpu_share_uncontrolled,
// and the p50s.
#pragma once

#include <cstdint>
#include <string>

namespace herd::bench {

struct ColocationBenchOptions {
  int duration_s = 20;       // each measured wrk run
  int warmup_s = 5;          // before each
  double rate = 500;         // requests a second, all connections together
  int connections = 4;
  int64_t work_us = 500;     // CPU each request costs the server
  // The server's CPU request: a whole core, so where control is on it gets
  // a core of its own (CPU pinning), as seed 004 and Heracles run LS work.
  // Batch is placed against its reservation, which starts at this limit:
  // the batch tasks' requests fit in what is left. (--ls-cpu 500m
  // --batch-tasks 3: an LS server sharing cores with batch; docs/benchmarks.md.)
  std::string ls_cpu = "1";
  int batch_tasks = 2;
  std::string batch_cpu = "500m";  // each batch task's CPU request (its quota)
  int batch_workers = 1;           // stress-ng --cpu workers per batch task
  std::string herd;             // the herd binary (default: this one)
  std::string wrk = "wrk";
  std::string stress = "stress-ng";
  std::string data_dir;  // default: a fresh directory under /tmp, removed after
  bool keep = false;
};

int RunColocationBench(const ColocationBenchOptions& options);

// `herd bench ls-server`: the latency-sensitive service of the bench. An
// HTTP server on 127.0.0.1:PORT whose every request burns `work_us` of its
// thread's CPU time, then answers 200 "ok". Runs until SIGTERM.
int RunLsServer(int port, int64_t work_us, int threads);

}  // namespace herd::bench
