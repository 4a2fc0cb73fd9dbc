#include "main/bench_role.h"

#include <memory>

#include "bench/sched/flags.h"

namespace herd {

void AddBench(CLI::App& app, int& rc) {
  auto* bench = app.add_subcommand("bench", "Benchmarks: print figures and RESULT name=value lines");
  bench->require_subcommand(1);
  auto* s = bench->add_subcommand(
      "scheduler", "The scheduler at Borg scale: from scratch (with --ablations), online passes, packing policies");
  auto o = std::make_shared<bench::SchedBenchOptions>();
  bench::AddSchedBenchFlags(*s, *o);
  s->callback([&rc, o] {
    if (!sched::ParsePackingPolicy(o->policy).ok() || !sched::ParseQueueOrder(o->order).ok()) {
      std::fprintf(stderr, "herd bench scheduler: --policy is worst, best or hybrid; --order round-robin or drf\n");
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
}

}  // namespace herd
