// `herd sim ...`: Fauxmaster from the command line (docs/design.md §12, issue #4).
#include "main/sim_role.h"

#include <cstdio>
#include <fstream>
#include <memory>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/priority.h"
#include "base/status.h"
#include "cell/checkpoint_codec.h"
#include "sched/config/flags.h"
#include "sim/core/driver.h"
#include "sim/core/questions.h"
#include "cli/render/render.h"
#include "sim/experiments/experiments.h"
#include "sim/experiments/replay.h"
#include "sim/experiments/sources.h"
#include "sim/report/table.h"
#include "spec/spec.h"

namespace herd {
namespace {

struct SourceFlags {
  std::string synthetic, google2011, checkpoint;
  std::vector<std::string> openb;
  double at = -1;
  double pods = 1;
  int64_t revision = 0;
};

void AddSourceFlags(CLI::App* cmd, SourceFlags* s) {
  cmd->add_option("--synthetic", s->synthetic,
                  "A synthetic cell: machines=12500,tasks=1000000,fill=0.9,seed=1 (calibrated to the Borg paper)");
  cmd->add_option("--google2011", s->google2011, "A Google 2011 trace directory (machine_events/, task_events/)");
  cmd->add_option("--at", s->at, "With --google2011: the time in seconds (default: middle of the task events)");
  cmd->add_option("--openb", s->openb, "The Alibaba openb trace: NODES.csv PODS.csv")->expected(2);
  cmd->add_option("--pods", s->pods,
                  "With --openb: only this share of the pods, the first to arrive (the lists ask for ~98% of the "
                  "cell's GPUs, more than fits)");
  cmd->add_option("--checkpoint", s->checkpoint, "A checkpoint from `herd checkpoint export`");
  cmd->add_option("--revision", s->revision, "With --checkpoint: the state as of this revision");
}

absl::StatusOr<sim::SimWorkload> LoadSource(const SourceFlags& s) {
  int given = !s.synthetic.empty() + !s.google2011.empty() + !s.openb.empty() + !s.checkpoint.empty();
  if (given != 1) {
    return absl::InvalidArgumentError("give exactly one of --synthetic, --google2011, --openb, --checkpoint");
  }
  if (!s.synthetic.empty()) {
    auto w = sim::SyntheticWorkload(s.synthetic);
    if (w.ok()) sim::ModelUsage(&*w);  // usage for the reclamation experiment
    return w;
  }
  if (!s.google2011.empty()) return sim::Google2011Workload(s.google2011, s.at);
  if (!s.openb.empty()) return sim::OpenbWorkload(s.openb[0], s.openb[1], s.pods);
  return sim::CheckpointWorkload(s.checkpoint, s.revision);
}

struct ExperimentFlags {
  int seeds = 11;
  int parallel = 2;
  double picky = 0.002;
  std::string out;
  bool json = false;
  std::string only = "all";
  std::string overcommit;
  // The scheduler's policy, profile, weights and ablations (issue #13):
  // the same flags as herd master's (sched/config/knobs.h).
  sched::SchedulerFlags scheduler;
};

void AddExperimentFlags(CLI::App* cmd, ExperimentFlags* e) {
  cmd->add_option("--seeds", e->seeds, "Random removal orders tried")->capture_default_str();
  cmd->add_option("--parallel", e->parallel, "Seeds run at once (processes)")->capture_default_str();
  cmd->add_option("--picky", e->picky, "Share of tasks allowed to stay pending")->capture_default_str();
  cmd->add_option("--out", e->out, "Write the table (txt, csv, json) and charts (svg) here");
  cmd->add_flag("--json", e->json, "Print the table as JSON instead of text");
  cmd->add_option("--only", e->only, "Only these jobs: prod (production and monitoring bands), non-prod or all")
      ->capture_default_str();
  cmd->add_option("--overcommit", e->overcommit,
                  "Machine capacity multiplied, per resource: cpu=1.13[,memory=1.0] (Borg over-committed CPU)");
  e->scheduler.AddTo(cmd);
}

absl::StatusOr<sim::CompactionOptions> Options(const ExperimentFlags& e) {
  sim::CompactionOptions o;
  if (absl::Status st = e.scheduler.Apply(&o.scheduler); !st.ok()) return st;
  if (e.seeds < 1 || e.seeds > 1000) return absl::InvalidArgumentError("--seeds must be between 1 and 1000");
  if (e.picky < 0 || e.picky > 0.5) return absl::InvalidArgumentError("--picky must be between 0 and 0.5");
  o.seeds = e.seeds;
  o.parallel = std::max(1, e.parallel);
  o.picky = e.picky;
  if (e.only != "all" && e.only != "prod" && e.only != "non-prod") {
    return absl::InvalidArgumentError("--only is prod, non-prod or all");
  }
  return o;
}

int Fail(const absl::Status& st) {
  std::fprintf(stderr, "herd sim: %s\n", std::string(st.message()).c_str());
  return st.code() == absl::StatusCode::kInvalidArgument ? 2 : 1;
}

int Print(const sim::Figure& f, const ExperimentFlags& e) {
  if (e.json) {
    std::printf("%s\n", f.table.ToJson().c_str());
  } else {
    std::printf("%s\n%s\n%s", f.title.c_str(), std::string(f.title.size(), '=').c_str(), f.table.ToText().c_str());
    if (!f.notes.empty()) std::printf("(%s)\n", f.notes.c_str());
  }
  for (const auto& [k, v] : f.results) std::printf("RESULT %s=%g\n", k.c_str(), v);
  if (!e.out.empty()) {
    if (absl::Status st = sim::WriteFigure(f, e.out); !st.ok()) return Fail(st);
    std::fprintf(stderr, "wrote %s/%s.{txt,csv,json}", e.out.c_str(), f.id.c_str());
    for (const auto& [name, svg] : f.charts) std::fprintf(stderr, " %s.svg", name.c_str());
    std::fprintf(stderr, "\n");
  }
  return 0;
}

// "--overcommit cpu=1.13,memory=1.0": each machine's capacity multiplied.
absl::Status Overcommit(const std::string& text, sim::SimWorkload* w) {
  if (text.empty()) return absl::OkStatus();
  double cpu = 1, mem = 1;
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    std::pair<absl::string_view, absl::string_view> kv = absl::StrSplit(part, absl::MaxSplits('=', 1));
    double f = 0;
    if (!absl::SimpleAtod(kv.second, &f) || !(f > 0) || f > 10) {
      return absl::InvalidArgumentError(
          absl::StrCat("--overcommit: '", part, "': the factor must be a number in (0, 10]"));
    }
    if (kv.first == "cpu") {
      cpu = f;
    } else if (kv.first == "memory") {
      mem = f;
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("--overcommit: unknown resource '", kv.first, "' (cpu, memory)"));
    }
  }
  for (v1::Machine& m : w->machines) {
    auto* c = m.mutable_capacity();
    c->set_cpu_millis(static_cast<int64_t>(static_cast<double>(c->cpu_millis()) * cpu));
    c->set_memory_bytes(static_cast<int64_t>(static_cast<double>(c->memory_bytes()) * mem));
  }
  absl::StrAppend(&w->name, "; capacity x", cpu, " cpu, x", mem, " memory");
  return absl::OkStatus();
}

using Experiment = std::function<absl::StatusOr<sim::Figure>(const sim::SimWorkload&, const sim::CompactionOptions&)>;

void AddExperiment(CLI::App* sim, const std::string& name, const std::string& help, int& rc, Experiment run,
                   std::function<void(CLI::App*)> extra = nullptr) {
  auto* cmd = sim->add_subcommand(name, help);
  auto src = std::make_shared<SourceFlags>();
  auto ex = std::make_shared<ExperimentFlags>();
  AddSourceFlags(cmd, src.get());
  AddExperimentFlags(cmd, ex.get());
  if (extra) extra(cmd);
  cmd->callback([&rc, src, ex, run] {
    auto o = Options(*ex);
    if (!o.ok()) {
      rc = Fail(o.status());
      return;
    }
    auto w = LoadSource(*src);
    if (!w.ok()) {
      rc = Fail(w.status());
      return;
    }
    if (absl::Status st = Overcommit(ex->overcommit, &*w); !st.ok()) {
      rc = Fail(st);
      return;
    }
    if (ex->only != "all") {
      const bool prod = ex->only == "prod";
      std::erase_if(w->jobs, [prod](const v1::JobSpec& j) { return IsProd(j.priority()) != prod; });
      absl::StrAppend(&w->name, "; only ", ex->only, ": ", w->jobs.size(), " jobs, ", w->tasks(), " tasks");
    }
    std::fprintf(stderr, "workload: %s\n", w->name.c_str());
    auto f = run(*w, *o);
    rc = f.ok() ? Print(*f, *ex) : Fail(f.status());
  });
}

std::vector<int> ParseInts(const std::string& text) {
  std::vector<int> out;
  for (absl::string_view p : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    int v = 0;
    if (absl::SimpleAtoi(p, &v)) out.push_back(v);
  }
  return out;
}

absl::StatusOr<v1::JobSpec> OneJob(const std::string& path) {
  auto jobs = spec::ParseFile(path, spec::ParseOptions{"sim"});
  if (!jobs.ok()) return jobs.status();
  if (jobs->size() != 1) return absl::InvalidArgumentError(absl::StrCat(path, " must hold exactly one job"));
  return (*jobs)[0];
}

absl::StatusOr<cell::CellState> StateOf(const SourceFlags& src, const sched::Options& so) {
  if (!src.checkpoint.empty() && src.synthetic.empty() && src.google2011.empty() && src.openb.empty()) {
    return sim::CheckpointState(src.checkpoint, src.revision);
  }
  auto w = LoadSource(src);
  if (!w.ok()) return w.status();
  std::fprintf(stderr, "workload: %s (placing it first)\n", w->name.c_str());
  return sim::ScheduledState(*w, so);
}

void AddFit(CLI::App* sim, int& rc) {
  auto* cmd = sim->add_subcommand("fit", "How many more of this job would fit?");
  auto src = std::make_shared<SourceFlags>();
  auto job = std::make_shared<std::string>();
  auto max = std::make_shared<int>(100'000);
  auto json = std::make_shared<bool>(false);
  AddSourceFlags(cmd, src.get());
  cmd->add_option("--job", *job, "A job spec file (its template, priority and constraints)")->required();
  cmd->add_option("--max", *max, "Try at most this many")->capture_default_str();
  cmd->add_flag("--json", *json, "Print JSON");
  cmd->callback([&rc, src, job, max, json] {
    auto spec = OneJob(*job);
    if (!spec.ok()) {
      rc = Fail(spec.status());
      return;
    }
    auto state = StateOf(*src, sched::Options());
    if (!state.ok()) {
      rc = Fail(state.status());
      return;
    }
    auto a = sim::HowManyFit(*state, *spec, sched::Options(), *max);
    if (!a.ok()) {
      rc = Fail(a.status());
      return;
    }
    if (*json) {
      std::printf("{\"job\": %s, \"fit\": %lld, \"fit_preempting\": %lld, \"victims\": %lld, \"why\": %s}\n",
                  sim::report::JsonQuote(spec->name()).c_str(), static_cast<long long>(a->fit),
                  static_cast<long long>(a->fit_preempting), static_cast<long long>(a->victims),
                  sim::report::JsonQuote(a->why).c_str());
    } else {
      std::printf("%lld more tasks of %s fit without evicting anything", static_cast<long long>(a->fit),
                  spec->name().c_str());
      if (a->fit < a->asked && !a->why.empty()) std::printf("; the next one: %s", a->why.c_str());
      std::printf("\n%lld fit if it may preempt lower priorities (evicting %lld tasks)\n",
                  static_cast<long long>(a->fit_preempting), static_cast<long long>(a->victims));
    }
    std::printf("RESULT fit=%lld\nRESULT fit_preempting=%lld\nRESULT victims=%lld\n", static_cast<long long>(a->fit),
                static_cast<long long>(a->fit_preempting), static_cast<long long>(a->victims));
  });
}

void AddEvict(CLI::App* sim, int& rc) {
  auto* cmd = sim->add_subcommand("evict", "Would this change evict any task at priority >= P?");
  auto src = std::make_shared<SourceFlags>();
  auto drain = std::make_shared<std::string>();
  auto add = std::make_shared<std::vector<std::string>>();
  auto update = std::make_shared<std::vector<std::string>>();
  auto change = std::make_shared<sim::Change>();
  auto prio = std::make_shared<int32_t>(120);
  auto json = std::make_shared<bool>(false);
  AddSourceFlags(cmd, src.get());
  cmd->add_option("--drain", *drain, "Machines to take out, comma-separated");
  cmd->add_option("--remove", change->remove_random, "Take out this many random machines");
  cmd->add_option("--seed", change->seed, "Seed for --remove")->capture_default_str();
  cmd->add_option("--add", *add, "Job spec files to submit");
  cmd->add_option("--update", *update,
                  "New specs of live jobs (user: as in the cell), applied as the master applies an update, all at "
                  "once (what a rolling update ends in)");
  cmd->add_option("--priority", *prio, "Report victims at or above this priority")->capture_default_str();
  cmd->add_flag("--json", *json, "Print JSON");
  cmd->callback([&rc, src, drain, add, update, change, prio, json] {
    for (absl::string_view m : absl::StrSplit(*drain, ',', absl::SkipEmpty())) change->drain.emplace_back(m);
    for (const std::string& f : *add) {
      auto j = OneJob(f);
      if (!j.ok()) {
        rc = Fail(j.status());
        return;
      }
      change->add.push_back(*j);
    }
    for (const std::string& f : *update) {
      auto j = OneJob(f);
      if (!j.ok()) {
        rc = Fail(j.status());
        return;
      }
      change->update.push_back(*j);
    }
    if (change->drain.empty() && change->remove_random <= 0 && change->add.empty() && change->update.empty()) {
      rc = Fail(absl::InvalidArgumentError("say what changes: --drain, --remove, --add or --update"));
      return;
    }
    auto state = StateOf(*src, sched::Options());
    if (!state.ok()) {
      rc = Fail(state.status());
      return;
    }
    auto a = sim::WouldEvict(*state, *change, *prio, sched::Options());
    if (!a.ok()) {
      rc = Fail(a.status());
      return;
    }
    sim::report::Table t({"task", "priority", "was on", "outcome"});
    for (const auto& v : a->victims) t.AddRow({v.task, v.priority, v.machine, v.outcome});
    int64_t pending = 0;
    for (const auto& v : a->victims) pending += v.pending;
    if (*json) {
      std::printf("%s\n", t.ToJson().c_str());
    } else {
      std::printf("taking out %zu machine(s)%s%s; %lld task(s) at priority >= %d ran before\n", a->removed.size(),
                  change->add.empty() ? "" : absl::StrCat(", adding ", change->add.size(), " job(s)").c_str(),
                  change->update.empty() ? "" : absl::StrCat(", updating ", change->update.size(), " job(s)").c_str(),
                  static_cast<long long>(a->running_before), *prio);
      if (a->victims.empty()) {
        std::printf("no: no task at priority >= %d would be disturbed\n", *prio);
      } else {
        std::printf("yes: %zu disturbed, %lld of them left pending\n%s", a->victims.size(),
                    static_cast<long long>(pending), t.ToText().c_str());
      }
      if (!change->add.empty()) {
        std::printf("the added jobs: %lld task(s) placed, %lld pending\n", static_cast<long long>(a->added_placed),
                    static_cast<long long>(a->added_pending));
      }
      if (!change->update.empty()) {
        std::printf("the updated jobs: %d task(s) restart in place, %d move, %d added, %d removed; then %lld "
                    "running, %lld pending\n",
                    a->updated_restart, a->updated_reschedule, a->updated_added, a->updated_removed,
                    static_cast<long long>(a->updated_running), static_cast<long long>(a->updated_pending));
      }
    }
    std::printf("RESULT disturbed=%zu\nRESULT left_pending=%lld\n", a->victims.size(), static_cast<long long>(pending));
  });
}

void AddCheckpointReplay(CLI::App* sim, int& rc) {
  auto* cmd = sim->add_subcommand(
      "checkpoint", "Load a checkpoint into Fauxmaster: the state at a revision, the next mutations, schedule all pending");
  auto file = std::make_shared<std::string>();
  auto rev = std::make_shared<int64_t>(0);
  auto step = std::make_shared<int>(0);
  auto schedule = std::make_shared<bool>(false);
  cmd->add_option("file", *file, "The checkpoint")->required();
  cmd->add_option("--revision", *rev, "Start at this revision (default: the last)");
  cmd->add_option("--step", *step, "Then apply and print the next N mutations");
  cmd->add_flag("--schedule", *schedule, "Then run the real master and scheduler until all pending is placed");
  cmd->callback([&rc, file, rev, step, schedule] {
    std::ifstream in(*file, std::ios::binary);
    if (!in) {
      rc = Fail(absl::NotFoundError(absl::StrCat("cannot open ", *file)));
      return;
    }
    auto cp = cell::ReadCheckpoint(in, *file);
    if (!cp.ok()) {
      rc = Fail(cp.status());
      return;
    }
    // The log up to the chosen revision seeds the master; the rest is stepped.
    cell::Checkpoint head = *cp;
    std::vector<v1::Mutation> rest;
    if (*rev > 0) {
      head.log.clear();
      for (const auto& m : cp->log) (m.revision() <= *rev ? head.log : rest).push_back(m);
    }
    sim::DriverOptions o;
    auto d = sim::Driver::Create(o, &head);
    if (!d.ok()) {
      rc = Fail(d.status());
      return;
    }
    auto summary = [&](const char* when) {
      v1::CellInfo i = *(*d)->master().machines().GetCell(master::Principal::Internal("simulator"));
      std::printf("%s: revision %lld, %d machines (%d up), %d live jobs, tasks %d running / %d pending / %d dead\n",
                  when, static_cast<long long>(i.revision()), i.machines(), i.machines_up(), i.jobs(),
                  i.tasks_running(), i.tasks_pending(), i.tasks_dead());
    };
    summary("loaded");
    for (int i = 0; i < *step && i < static_cast<int>(rest.size()); ++i) {
      const v1::Mutation& m = rest[static_cast<size_t>(i)];
      absl::Status st = (*d)->master().committer().CommitEach(m.actor(), {m})[0];
      std::string kind = v1::Mutation::GetDescriptor()->FindFieldByNumber(m.kind_case())->name();
      std::printf("  revision %lld: %s by %s%s\n", static_cast<long long>(m.revision()), kind.c_str(),
                  m.actor().c_str(), st.ok() ? "" : absl::StrCat(" -- rejected: ", st.message()).c_str());
    }
    if (*step > 0) summary("stepped");
    if (*schedule) {
      if (absl::Status st = (*d)->Settle(); !st.ok()) {
        rc = Fail(st);
        return;
      }
      summary("scheduled");
    }
  });
}

void AddReplay(CLI::App* sim, int& rc) {
  auto* cmd = sim->add_subcommand("replay", "Replay a window of the Google 2011 trace through the real master");
  auto dir = std::make_shared<std::string>();
  auto o = std::make_shared<sim::ReplayOptions>();
  auto tick = std::make_shared<double>(30);
  auto ex = std::make_shared<ExperimentFlags>();
  cmd->add_option("--google2011", *dir, "The trace directory (machine_events/, task_events/)")->required();
  cmd->add_option("--from", o->from_s, "Start, seconds into the trace (default: the task events' first)");
  cmd->add_option("--to", o->to_s, "End, seconds into the trace (default: their last)");
  cmd->add_option("--tick", *tick, "Seconds between simulated polls")->capture_default_str();
  cmd->add_option("--out", ex->out, "Write the timeline (txt, csv, json) and chart (svg) here");
  cmd->add_flag("--json", ex->json, "Print the timeline as JSON");
  ex->scheduler.AddTo(cmd);
  cmd->callback([&rc, dir, o, tick, ex] {
    if (absl::Status st = ex->scheduler.Apply(&o->scheduler); !st.ok()) {
      rc = Fail(st);
      return;
    }
    if (*tick < 1) {
      rc = Fail(absl::InvalidArgumentError("--tick is at least 1 second"));
      return;
    }
    o->tick_ms = static_cast<int64_t>(*tick * 1000);
    auto f = sim::ReplayGoogle2011(*dir, *o);
    rc = f.ok() ? Print(*f, *ex) : Fail(f.status());
  });
}

void AddDump(CLI::App* sim, int& rc) {
  auto* cmd = sim->add_subcommand("state", "Print the state Fauxmaster loads from a checkpoint (a CellSnapshot as JSON)");
  auto file = std::make_shared<std::string>();
  auto rev = std::make_shared<int64_t>(0);
  cmd->add_option("file", *file, "The checkpoint")->required();
  cmd->add_option("--revision", *rev, "As of this revision (default: the last)");
  cmd->callback([&rc, file, rev] {
    std::ifstream in(*file, std::ios::binary);
    auto cp = in ? cell::ReadCheckpoint(in, *file) : absl::StatusOr<cell::Checkpoint>(absl::NotFoundError(absl::StrCat("cannot open ", *file)));
    if (!cp.ok()) {
      rc = Fail(cp.status());
      return;
    }
    if (*rev > 0) {
      std::vector<v1::Mutation> keep;
      for (auto& m : cp->log) {
        if (m.revision() <= *rev) keep.push_back(std::move(m));
      }
      cp->log = std::move(keep);
    }
    auto d = sim::Driver::Create(sim::DriverOptions(), &*cp);
    if (!d.ok()) {
      rc = Fail(d.status());
      return;
    }
    v1::CellSnapshot snap = (*d)->master().committer().Read([](const cell::CellState& s) { return s.ToSnapshot(); });
    std::printf("%s\n", cli::ToJson(snap).c_str());
  });
}

}  // namespace

void AddSim(CLI::App& app, int& rc) {
  auto* sim = app.add_subcommand("sim", "Fauxmaster: the real master and scheduler on simulated machines");
  sim->require_subcommand(1);
  AddExperiment(sim, "compaction", "How few machines could run this workload? (Borg Fig. 4)", rc, sim::RunCompaction);
  AddExperiment(sim, "policies", "Worst fit, best fit and hybrid compared by compaction (Borg 5.2)", rc,
                sim::RunPolicies);
  AddExperiment(sim, "segregate-prod", "Prod and non-prod in separate cells (Borg Fig. 5)", rc, sim::RunSegregateProd);
  auto users = std::make_shared<std::string>("1,2,4");
  AddExperiment(
      sim, "segregate-users", "The biggest users in cells of their own (Borg Fig. 6)", rc,
      [users](const sim::SimWorkload& w, const sim::CompactionOptions& o) {
        return sim::RunSegregateUsers(w, o, ParseInts(*users));
      },
      [users](CLI::App* c) { c->add_option("--users", *users, "How many big users split off, per point"); });
  auto cells = std::make_shared<std::string>("2,5,10");
  AddExperiment(
      sim, "subdivide", "The cell split into N smaller cells (Borg Fig. 7)", rc,
      [cells](const sim::SimWorkload& w, const sim::CompactionOptions& o) {
        return sim::RunSubdivide(w, o, ParseInts(*cells));
      },
      [cells](CLI::App* c) { c->add_option("--cells", *cells, "Numbers of smaller cells"); });
  {
    auto arrival = std::make_shared<sim::ArrivalOptions>();
    AddExperiment(
        sim, "arrival", "GPUs allocated as tasks arrive, until the first fails and on (FGD, ATC '23)", rc,
        [arrival](const sim::SimWorkload& w, const sim::CompactionOptions& o) { return sim::RunArrival(w, o, *arrival); },
        [arrival](CLI::App* cmd) {
          cmd->add_option("--batch", arrival->batch, "Tasks arriving per scheduling pass")->capture_default_str();
          cmd->add_option("--demand", arrival->demand, "Stop once the GPUs asked for reach this share of the cell's")
              ->capture_default_str();
        });
  }
  AddExperiment(sim, "bucketing", "Requests rounded up to powers of two (Borg Fig. 9)", rc, sim::RunBucketing);
  {
    auto usage = std::make_shared<std::string>();
    AddExperiment(
        sim, "reclamation", "Non-prod scheduled against reservations, on and off (Borg Fig. 10)", rc,
        [usage](const sim::SimWorkload& w, const sim::CompactionOptions& o) -> absl::StatusOr<sim::Figure> {
          if (usage->empty()) return sim::RunReclamation(w, o);
          HERD_ASSIGN_OR_RETURN(std::vector<sim::UsageProfile> p, sim::ReadUsageProfiles(*usage));
          return sim::RunReclamationWithUsage(w, o, p);
        },
        [usage](CLI::App* cmd) {
          cmd->add_option("--usage", *usage,
                          "Usage recorded on a real cell (CSV from bench/reservation_trace.sh): reservations by "
                          "each estimator of the master (baseline, medium, aggressive, histogram) instead of the "
                          "usage model");
        });
  }
  AddFit(sim, rc);
  AddEvict(sim, rc);
  AddCheckpointReplay(sim, rc);
  AddReplay(sim, rc);
  AddDump(sim, rc);
}

}  // namespace herd
