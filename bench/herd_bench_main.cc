// herd-bench: the benchmarks behind `herd bench ...` (src/main/bench_role.cc
// runs this binary, built beside herd). A tool of its own so that the shipped
// `herd` links no benchmark code and nothing in src/ includes bench/.
#include <CLI/CLI.hpp>

#include <memory>

#include "bench/cell/cell_bench.h"
#include "bench/colocation/colocation_bench.h"
#include "bench/sched/flags.h"

namespace herd {
namespace {

void AddBench(CLI::App& app, int& rc) {
  CLI::App* bench = &app;
  bench->require_subcommand(1);
  auto* s = bench->add_subcommand(
      "scheduler", "The scheduler at Borg scale: from scratch (with --ablations), online passes, packing policies");
  auto o = std::make_shared<bench::SchedBenchOptions>();
  auto flags = std::make_shared<sched::SchedulerFlags>();
  bench::AddSchedBenchFlags(*s, *o, *flags);
  s->callback([&rc, o, flags] {
    if (absl::Status st = flags->Apply(&o->scheduler); !st.ok()) {
      std::fprintf(stderr, "herd bench scheduler: %s\n", std::string(st.message()).c_str());
      rc = 2;
      return;
    }
    if (o->mode != "scratch" && o->mode != "online" && o->mode != "packing" && o->mode != "all") {
      std::fprintf(stderr, "herd bench scheduler: --mode is scratch, online, packing or all\n");
      rc = 2;
      return;
    }
    if (o->machines < 1 || o->tasks < 1 || o->fill <= 0 || o->fill > 1.5) {
      std::fprintf(stderr, "herd bench scheduler: --machines and --tasks must be positive, --fill in (0, 1.5]\n");
      rc = 2;
      return;
    }
    rc = bench::RunSchedulerBench(*o);
  });

  auto* c = bench->add_subcommand(
      "cell", "A real master and N hollow agents (the real agent protocol, no processes): tasks/min, "
              "submit->running, poll latency, master CPU and memory, machines marked down");
  auto co = std::make_shared<bench::CellBenchOptions>();
  c->add_option("--agents", co->agents, "Hollow agents (machines)")->capture_default_str();
  c->add_option("--tasks", co->tasks, "Tasks to submit")->capture_default_str();
  c->add_option("--tasks-per-job", co->tasks_per_job, "Tasks per job")->capture_default_str();
  c->add_option("--poll-interval", co->poll_interval, "The master's --poll-interval")->capture_default_str();
  c->add_option("--full-poll-interval", co->full_poll_interval, "The master's --full-poll-interval")
      ->capture_default_str();
  c->add_option("--capacity", co->capacity, "Each machine's capacity")->capture_default_str();
  c->add_option("--task-cpu", co->task_cpu_millis, "Each task's CPU, millicores")->capture_default_str();
  c->add_option("--task-memory", co->task_memory_mib, "Each task's memory, MiB")->capture_default_str();
  c->add_option("--start-ms", co->start_ms, "How long a hollow start takes")->capture_default_str();
  c->add_option("--parallel-starts", co->max_parallel_starts, "Starts at once per hollow agent")
      ->capture_default_str();
  c->add_option("--agents-per-port", co->agents_per_port, "Hollow agents served per TLS port (SNI)")
      ->capture_default_str();
  c->add_option("--contact-threads", co->contact_threads, "Threads ringing doorbells and registering, in all")
      ->capture_default_str();
  c->add_option("--agents-per-process", co->agents_per_process, "Hollow agents per process")->capture_default_str();
  c->add_option("--submitters", co->submitters, "Threads submitting jobs")->capture_default_str();
  c->add_option("--rate", co->rate, "Tasks a second to submit, steadily (0: all at once)")->capture_default_str();
  c->add_option("--timeout", co->timeout_s, "Seconds the burst may take")->capture_default_str();
  c->add_option("--herd", co->herd, "The herd binary to run the master with (default: this one)");
  c->add_option("--baseline", co->baseline,
                "full-polls: run the cell again with every poll carrying the whole desired state");
  c->add_flag("--keep", co->keep, "Keep the data directory (logs, store)");
  c->callback([&rc, co] {
    if (co->agents < 1 || co->tasks < 1 || co->tasks_per_job < 1 || co->submitters < 1 || co->timeout_s < 1) {
      std::fprintf(stderr, "herd bench cell: --agents, --tasks, --tasks-per-job, --submitters and --timeout must be "
                           "positive\n");
      rc = 2;
      return;
    }
    if (!co->baseline.empty() && co->baseline != "full-polls") {
      std::fprintf(stderr, "herd bench cell: --baseline is full-polls (or not given)\n");
      rc = 2;
      return;
    }
    rc = bench::RunCellBench(*co);
  });

  auto* col = bench->add_subcommand(
      "colocation", "A latency-sensitive HTTP server alone, beside batch hogs without colocation control, and with "
                    "it, on a real local cell: its p99 latency and the CPU batch got (needs wrk and stress-ng)");
  auto coo = std::make_shared<bench::ColocationBenchOptions>();
  col->add_option("--duration", coo->duration_s, "Seconds of each measured run")->capture_default_str();
  col->add_option("--warmup", coo->warmup_s, "Seconds of load before each measured run")->capture_default_str();
  col->add_option("--rate", coo->rate, "Requests a second to the server")->capture_default_str();
  col->add_option("--connections", coo->connections, "wrk connections")->capture_default_str();
  col->add_option("--work-us", coo->work_us, "CPU microseconds each request costs the server")->capture_default_str();
  col->add_option("--ls-cpu", coo->ls_cpu, "The server's CPU request")->capture_default_str();
  col->add_option("--batch-tasks", coo->batch_tasks, "Batch tasks")->capture_default_str();
  col->add_option("--batch-cpu", coo->batch_cpu, "Each batch task's CPU request")->capture_default_str();
  col->add_option("--batch-workers", coo->batch_workers, "stress-ng --cpu workers per batch task")
      ->capture_default_str();
  col->add_option("--herd", coo->herd, "The herd binary for the cells (default: this one)");
  col->add_option("--wrk", coo->wrk, "wrk")->capture_default_str();
  col->add_option("--stress-ng", coo->stress, "stress-ng")->capture_default_str();
  col->add_option("--data", coo->data_dir, "Where the cells live (default: a directory under /tmp, removed after)");
  col->add_flag("--keep", coo->keep, "Keep the cells' directory (logs)");
  col->callback([&rc, coo] {
    if (coo->duration_s < 1 || coo->warmup_s < 0 || coo->rate <= 0 || coo->connections < 1 || coo->work_us < 0 ||
        coo->batch_tasks < 1 || coo->batch_workers < 1 || coo->duration_s > 3600) {
      std::fprintf(stderr, "herd bench colocation: --duration 1..3600, --rate, --connections, --batch-tasks and "
                           "--batch-workers positive, --warmup and --work-us not negative\n");
      rc = 2;
      return;
    }
    rc = bench::RunColocationBench(*coo);
  });
  auto* ls = bench->add_subcommand("ls-server", "The latency-sensitive HTTP server of 'herd bench colocation'");
  auto port = std::make_shared<int>(0);
  auto work = std::make_shared<int64_t>(500);
  auto threads = std::make_shared<int>(4);
  ls->add_option("--port", *port, "Port on 127.0.0.1")->required();
  ls->add_option("--work-us", *work, "CPU microseconds each request costs")->capture_default_str();
  ls->add_option("--threads", *threads, "Worker threads")->capture_default_str();
  ls->callback([&rc, port, work, threads] {
    if (*port < 1 || *port > 65535 || *work < 0 || *work > 10'000'000 || *threads < 1 || *threads > 256) {
      std::fprintf(stderr, "herd bench ls-server: --port 1..65535, --work-us 0..10000000, --threads 1..256\n");
      rc = 2;
      return;
    }
    rc = bench::RunLsServer(*port, *work, *threads);
  });

  // The hollow agents' processes of `herd bench cell`.
  auto* h = bench->add_subcommand("hollow", "Hollow agents for 'herd bench cell' (which starts them): runs until SIGTERM");
  auto ho = std::make_shared<bench::HollowProcessOptions>();
  h->add_option("--master", ho->master, "The master's HOST:PORT")->required();
  h->add_option("--ca", ho->ca_dir, "The cell CA's directory (issues each machine's credential)")->required();
  h->add_option("--first", ho->first, "Number of the first machine")->capture_default_str();
  h->add_option("--count", ho->count, "Machines")->capture_default_str();
  h->add_option("--width", ho->width, "Digits in machine names (0: as needed)")->capture_default_str();
  h->add_option("--agents-per-port", ho->agents_per_port, "Machines per TLS port")->capture_default_str();
  h->add_option("--contact-threads", ho->contact_threads, "Threads ringing doorbells and registering")
      ->capture_default_str();
  h->add_option("--capacity", ho->capacity, "Each machine's capacity")->capture_default_str();
  h->add_option("--start-ms", ho->start_ms, "How long a start takes")->capture_default_str();
  h->add_option("--parallel-starts", ho->max_parallel_starts, "Starts at once per machine")->capture_default_str();
  h->add_option("--stats", ho->stats_file, "Where to write 'registered starts live rings' every half second");
  h->callback([&rc, ho] {
    if (ho->count < 1 || ho->first < 0) {
      std::fprintf(stderr, "herd bench hollow: --count must be positive, --first not negative\n");
      rc = 2;
      return;
    }
    rc = bench::RunHollowAgents(*ho);
  });
}

}  // namespace
}  // namespace herd

int main(int argc, char** argv) {
  // Named "herd bench" in usage and errors: that is how users call it.
  CLI::App app("Benchmarks: print figures and RESULT name=value lines", "herd bench");
  int rc = 0;
  herd::AddBench(app, rc);
  CLI11_PARSE(app, argc, argv);
  return rc;
}
