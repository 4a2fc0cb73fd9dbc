#include "sim/experiments/experiments.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <fstream>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "cell/reclaim.h"
#include "base/ids.h"
#include "base/priority.h"
#include "base/status.h"
#include "base/units.h"
#include "sim/report/svg.h"

namespace herd::sim {
namespace {

using report::Cell;
using report::Num;

// A hash that is the same in every process and run (absl's is seeded per
// process), so partitions and usage models are reproducible.
uint64_t StableHash(absl::string_view a, absl::string_view b, uint64_t salt = 0) {
  uint64_t h = 1469598103934665603ULL ^ salt;
  for (absl::string_view part : {a, absl::string_view("/"), b}) {
    for (char c : part) {
      h ^= static_cast<unsigned char>(c);
      h *= 1099511628211ULL;
    }
  }
  return h;
}

struct Spread {
  double p90 = 0, min = 0, max = 0;
};

Spread Summarise(std::vector<double> v) {
  Spread s;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  s.min = v.front();
  s.max = v.back();
  s.p90 = v[static_cast<size_t>(std::ceil(0.9 * static_cast<double>(v.size()))) - 1];
  return s;
}

std::vector<double> Percents(const CompactionResult& r) {
  std::vector<double> out;
  for (int n : r.needed) out.push_back(r.Percent(n));
  return out;
}

// A workload with the same machines and only some jobs.
SimWorkload Part(const SimWorkload& w, const std::function<bool(const v1::JobSpec&)>& keep, std::string name) {
  SimWorkload p;
  p.name = std::move(name);
  p.machines = w.machines;
  for (const auto& j : w.jobs) {
    if (keep(j)) p.jobs.push_back(j);
  }
  for (const auto& r : w.reservations) p.reservations.push_back(r);
  return p;
}

absl::StatusOr<CompactionResult> CompactOrEmpty(const SimWorkload& w, const CompactionOptions& o) {
  if (w.jobs.empty()) {
    CompactionResult r;
    r.original = static_cast<int>(w.machines.size());
    r.needed.assign(static_cast<size_t>(o.seeds), 0);
    return r;
  }
  return Compact(w, o);
}

// Per seed: (sum of the parts' machines) / (the whole's) - 1, in percent.
std::vector<double> Overheads(const CompactionResult& whole, const std::vector<CompactionResult>& parts) {
  std::vector<double> out;
  for (size_t s = 0; s < whole.needed.size(); ++s) {
    double sum = 0;
    for (const auto& p : parts) sum += p.needed[s];
    out.push_back(whole.needed[s] > 0 ? 100.0 * (sum / whole.needed[s] - 1.0) : 0.0);
  }
  return out;
}

void AddSpread(Figure& f, const std::string& prefix, const Spread& s) {
  f.results.push_back({prefix + "_p90", s.p90});
  f.results.push_back({prefix + "_min", s.min});
  f.results.push_back({prefix + "_max", s.max});
}

std::string SeedsNote(const CompactionOptions& o) {
  return absl::StrCat(o.seeds, " seeds; 90th percentile with min and max; ", o.picky * 100,
                      "% of tasks may stay pending; policy ", sched::PackingPolicyName(o.scheduler.policy));
}

report::BarChart Bars(std::string title, std::vector<std::string> categories, const std::string& series,
                      const std::vector<Spread>& values, const std::string& y_label) {
  report::BarChart c;
  c.title = std::move(title);
  c.categories = std::move(categories);
  c.y.label = y_label;
  c.y.include_zero = true;
  c.value_labels = true;
  c.value_precision = 1;
  report::BarSeries s;
  s.name = series;
  for (const Spread& v : values) {
    s.values.push_back(v.p90);
    s.ranges.push_back({v.min, v.max});
  }
  c.series.push_back(std::move(s));
  return c;
}

}  // namespace

absl::Status WriteFigure(const Figure& f, const std::string& dir) {
  HERD_RETURN_IF_ERROR(report::WriteFiles(f.table, dir, f.id));
  for (const auto& [name, svg] : f.charts) HERD_RETURN_IF_ERROR(report::WriteSvg(dir + "/" + name + ".svg", svg));
  return absl::OkStatus();
}

absl::StatusOr<Figure> RunCompaction(const SimWorkload& w, const CompactionOptions& o) {
  HERD_ASSIGN_OR_RETURN(CompactionResult r, Compact(w, o));
  Figure f;
  f.id = "compaction";
  f.title = absl::StrCat("Cell compaction: ", w.name);
  f.table = report::Table({"seed", "machines", "% of original"});
  for (size_t i = 0; i < r.needed.size(); ++i) {
    f.table.AddRow({static_cast<int64_t>(o.first_seed + i), r.needed[i], Num(r.Percent(r.needed[i]), 1)});
  }
  f.table.AddRow({"90th percentile", r.P90(), Num(r.Percent(r.P90()), 1)});
  f.table.AddRow({"min", r.Min(), Num(r.Percent(r.Min()), 1)});
  f.table.AddRow({"max", r.Max(), Num(r.Percent(r.Max()), 1)});
  report::LineChart c;
  c.title = "Compacted cell size (Borg Fig. 4)";
  c.x.label = "machines needed (% of the original cell)";
  c.y.label = "fraction of seeds";
  c.y.format = report::TickFormat::kFraction;
  c.y.min = 0;
  c.y.max = 1;
  c.series.push_back(report::CdfSeries(absl::StrCat(w.machines.size(), " machines, ", r.tasks, " tasks"), Percents(r)));
  c.references.push_back({report::ReferenceLine::Along::kX, r.Percent(r.P90()), "90th percentile"});
  f.charts.push_back({"compaction-cdf", c.Render()});
  f.results = {{"machines_p90", r.P90()},
               {"machines_min", r.Min()},
               {"machines_max", r.Max()},
               {"machines_original", r.original},
               {"percent_p90", r.Percent(r.P90())},
               {"fits_original", r.fits_original ? 1 : 0},
               {"checks", static_cast<double>(r.checks)},
               // The capacity bound (requests over the leading machines' capacity), the
               // largest over seeds: no packing can need fewer machines.
               {"lower_bound_max", r.lower_bound.empty()
                                        ? 0.0
                                        : *std::max_element(r.lower_bound.begin(), r.lower_bound.end())},
               {"wall_s", r.wall_s}};
  // GPUs (devices) allocated / GPUs in the compacted cell, at the seed whose
  // answer is the 90th percentile.
  for (size_t i = 0; i < r.needed.size(); ++i) {
    if (r.needed[i] != r.P90() || i >= r.device_alloc_ratio.size() || r.device_alloc_ratio[i] < 0) continue;
    f.results.push_back({"gpu_alloc_ratio", r.device_alloc_ratio[i]});
    break;
  }
  f.notes = SeedsNote(o);
  if (!r.fits_original) f.notes += "; the workload does not fit even the whole cell";
  return f;
}

absl::StatusOr<Figure> RunPolicies(const SimWorkload& w, const CompactionOptions& o) {
  Figure f;
  f.id = "policies";
  f.title = absl::StrCat("Scoring policies compared by compaction: ", w.name);
  f.table = report::Table({"policy", "machines p90", "min", "max", "% of original p90", "wall s"});
  std::vector<Spread> bars;
  std::vector<std::string> names;
  std::map<sched::PackingPolicy, int> p90;
  for (sched::PackingPolicy p : {sched::PackingPolicy::kWorstFit, sched::PackingPolicy::kBestFit,
                                 sched::PackingPolicy::kHybrid, sched::PackingPolicy::kK8s}) {
    CompactionOptions po = o;
    po.scheduler.policy = p;
    HERD_ASSIGN_OR_RETURN(CompactionResult r, Compact(w, po));
    std::string name(sched::PackingPolicyName(p));
    f.table.AddRow({name, r.P90(), r.Min(), r.Max(), Num(r.Percent(r.P90()), 1), Num(r.wall_s, 1)});
    bars.push_back({r.Percent(r.P90()), r.Percent(r.Min()), r.Percent(r.Max())});
    names.push_back(name);
    p90[p] = r.P90();
    std::string key = name == "worst-fit" ? "worst" : (name == "best-fit" ? "best" : name);
    f.results.push_back({key + "_machines_p90", r.P90()});
    f.results.push_back({key + "_machines_min", r.Min()});
    f.results.push_back({key + "_machines_max", r.Max()});
  }
  double best = p90[sched::PackingPolicy::kBestFit], hybrid = p90[sched::PackingPolicy::kHybrid];
  f.results.push_back({"hybrid_fewer_than_best_pct", best > 0 ? 100.0 * (best - hybrid) / best : 0});
  f.charts.push_back({"policies", Bars("Machines needed by scoring policy", names, "machines needed (p90, min-max)",
                                       bars, "% of the original cell")
                                      .Render()});
  f.notes = SeedsNote(o);
  return f;
}

absl::StatusOr<Figure> RunSegregateProd(const SimWorkload& w, const CompactionOptions& o) {
  HERD_ASSIGN_OR_RETURN(CompactionResult whole, CompactOrEmpty(w, o));
  SimWorkload prod = Part(w, [](const v1::JobSpec& j) { return IsProd(j.priority()); }, "prod");
  SimWorkload non = Part(w, [](const v1::JobSpec& j) { return !IsProd(j.priority()); }, "non-prod");
  HERD_ASSIGN_OR_RETURN(CompactionResult rp, CompactOrEmpty(prod, o));
  HERD_ASSIGN_OR_RETURN(CompactionResult rn, CompactOrEmpty(non, o));
  Spread over = Summarise(Overheads(whole, {rp, rn}));
  Figure f;
  f.id = "segregate-prod";
  f.title = absl::StrCat("Prod and non-prod in separate cells (Borg Fig. 5): ", w.name);
  f.table = report::Table({"cell", "jobs", "machines p90", "min", "max"});
  f.table.AddRow({"combined", static_cast<int64_t>(w.jobs.size()), whole.P90(), whole.Min(), whole.Max()});
  f.table.AddRow({"prod only", static_cast<int64_t>(prod.jobs.size()), rp.P90(), rp.Min(), rp.Max()});
  f.table.AddRow({"non-prod only", static_cast<int64_t>(non.jobs.size()), rn.P90(), rn.Min(), rn.Max()});
  std::vector<double> sums;
  for (size_t s = 0; s < whole.needed.size(); ++s) sums.push_back(rp.needed[s] + rn.needed[s]);
  Spread sum = Summarise(sums);
  f.table.AddRow({"prod + non-prod", Cell(), Num(sum.p90, 0), Num(sum.min, 0), Num(sum.max, 0)});
  f.table.AddRow({"extra machines %", Cell(), Num(over.p90, 1), Num(over.min, 1), Num(over.max, 1)});
  Spread comb = Summarise(std::vector<double>(whole.needed.begin(), whole.needed.end()));
  f.charts.push_back({"segregate-prod", Bars("Segregating prod and non-prod", {"combined", "segregated"},
                                             "machines needed (p90, min-max)", {comb, sum}, "machines")
                                            .Render()});
  AddSpread(f, "extra_machines_pct", over);
  f.results.push_back({"combined_machines_p90", whole.P90()});
  f.results.push_back({"segregated_machines_p90", sum.p90});
  f.notes = SeedsNote(o);
  return f;
}

absl::StatusOr<Figure> RunSegregateUsers(const SimWorkload& w, const CompactionOptions& o, std::vector<int> users) {
  // Users by memory requested.
  std::map<std::string, double> mem;
  for (const auto& j : w.jobs) {
    mem[j.user()] += static_cast<double>(j.task().resources().memory_bytes()) * j.task_count();
  }
  std::vector<std::pair<double, std::string>> by;
  for (const auto& [u, m] : mem) by.push_back({-m, u});
  std::sort(by.begin(), by.end());
  HERD_ASSIGN_OR_RETURN(CompactionResult whole, CompactOrEmpty(w, o));
  Figure f;
  f.id = "segregate-users";
  f.title = absl::StrCat("Big users in cells of their own (Borg Fig. 6): ", w.name);
  f.table = report::Table({"users in own cells", "threshold (memory)", "extra machines % p90", "min", "max"});
  report::LineChart c;
  c.title = "Segregating the biggest users";
  c.x.label = "users given their own cell (the biggest by memory requested)";
  c.y.label = "extra machines (%)";
  c.y.include_zero = true;
  report::LineSeries line;
  line.name = "extra machines (p90, min-max)";
  line.markers = true;
  for (int n : users) {
    if (n <= 0 || n >= static_cast<int>(by.size())) continue;
    std::vector<CompactionResult> parts;
    for (int i = 0; i < n; ++i) {
      const std::string user = by[static_cast<size_t>(i)].second;
      HERD_ASSIGN_OR_RETURN(CompactionResult r,
                            CompactOrEmpty(Part(w, [&](const v1::JobSpec& j) { return j.user() == user; }, user), o));
      parts.push_back(r);
    }
    std::set<std::string> big;
    for (int i = 0; i < n; ++i) big.insert(by[static_cast<size_t>(i)].second);
    HERD_ASSIGN_OR_RETURN(CompactionResult rest,
                          CompactOrEmpty(Part(w, [&](const v1::JobSpec& j) { return !big.count(j.user()); }, "rest"), o));
    parts.push_back(rest);
    Spread over = Summarise(Overheads(whole, parts));
    double threshold = -by[static_cast<size_t>(n - 1)].first;
    f.table.AddRow({n, FormatBytes(static_cast<int64_t>(threshold)), Num(over.p90, 1), Num(over.min, 1),
                    Num(over.max, 1)});
    line.points.push_back({static_cast<double>(n), over.p90});
    line.y_ranges.push_back({over.min, over.max});
    AddSpread(f, absl::StrCat("users_", n, "_extra_machines_pct"), over);
  }
  c.series.push_back(std::move(line));
  f.charts.push_back({"segregate-users", c.Render()});
  f.notes = SeedsNote(o);
  return f;
}

absl::StatusOr<Figure> RunSubdivide(const SimWorkload& w, const CompactionOptions& o, std::vector<int> cells) {
  HERD_ASSIGN_OR_RETURN(CompactionResult whole, CompactOrEmpty(w, o));
  Figure f;
  f.id = "subdivide";
  f.title = absl::StrCat("The cell split into smaller cells (Borg Fig. 7): ", w.name);
  f.table = report::Table({"cells", "extra machines % p90", "min", "max"});
  report::LineChart c;
  c.title = "Subdividing the cell";
  c.x.label = "number of smaller cells (jobs assigned at random)";
  c.y.label = "extra machines (%)";
  c.y.include_zero = true;
  report::LineSeries line;
  line.name = "extra machines (p90, min-max)";
  line.markers = true;
  for (int n : cells) {
    if (n < 2) continue;
    std::vector<CompactionResult> parts;
    for (int k = 0; k < n; ++k) {
      auto keep = [&](const v1::JobSpec& j) {
        return StableHash(j.user(), j.name()) % static_cast<uint64_t>(n) == static_cast<uint64_t>(k);
      };
      HERD_ASSIGN_OR_RETURN(CompactionResult r, CompactOrEmpty(Part(w, keep, absl::StrCat("part ", k)), o));
      parts.push_back(r);
    }
    Spread over = Summarise(Overheads(whole, parts));
    f.table.AddRow({n, Num(over.p90, 1), Num(over.min, 1), Num(over.max, 1)});
    line.points.push_back({static_cast<double>(n), over.p90});
    line.y_ranges.push_back({over.min, over.max});
    AddSpread(f, absl::StrCat("cells_", n, "_extra_machines_pct"), over);
  }
  c.series.push_back(std::move(line));
  f.charts.push_back({"subdivide", c.Render()});
  f.notes = SeedsNote(o);
  return f;
}

v1::JobSpec Bucketed(v1::JobSpec job) {
  auto cpu = [](int64_t m) {
    int64_t b = 500;
    while (b < m) b *= 2;
    return b;
  };
  auto mem = [](int64_t m) {
    int64_t b = 1LL << 30;
    while (b < m) b *= 2;
    return b;
  };
  auto* r = job.mutable_task()->mutable_resources();
  r->set_cpu_millis(cpu(r->cpu_millis()));
  r->set_memory_bytes(mem(r->memory_bytes()));
  for (auto& o : *job.mutable_overrides()) {
    if (o.has_cpu_millis()) o.set_cpu_millis(cpu(o.cpu_millis()));
    if (o.has_memory_bytes()) o.set_memory_bytes(mem(o.memory_bytes()));
  }
  return job;
}

absl::StatusOr<Figure> RunBucketing(const SimWorkload& w, const CompactionOptions& o) {
  HERD_ASSIGN_OR_RETURN(CompactionResult whole, CompactOrEmpty(w, o));
  SimWorkload b = w;
  for (auto& j : b.jobs) j = Bucketed(j);
  HERD_ASSIGN_OR_RETURN(CompactionResult rb, CompactOrEmpty(b, o));
  Spread over = Summarise(Overheads(whole, {rb}));
  Figure f;
  f.id = "bucketing";
  f.title = absl::StrCat("Requests rounded up to powers of two (Borg Fig. 9): ", w.name);
  f.table = report::Table({"requests", "machines p90", "min", "max"});
  f.table.AddRow({"as asked", whole.P90(), whole.Min(), whole.Max()});
  f.table.AddRow({"bucketed", rb.P90(), rb.Min(), rb.Max()});
  f.table.AddRow({"extra machines %", Num(over.p90, 1), Num(over.min, 1), Num(over.max, 1)});
  Spread a = Summarise(std::vector<double>(whole.needed.begin(), whole.needed.end()));
  Spread bb = Summarise(std::vector<double>(rb.needed.begin(), rb.needed.end()));
  f.charts.push_back({"bucketing", Bars("Bucketing requests", {"as asked", "powers of two"},
                                        "machines needed (p90, min-max)", {a, bb}, "machines")
                                       .Render()});
  AddSpread(f, "extra_machines_pct", over);
  f.notes = SeedsNote(o) + "; CPU rounded up to 0.5, 1, 2, 4... cores, memory to 1, 2, 4... GiB";
  return f;
}

void ModelUsage(SimWorkload* w) {
  w->reservations.clear();
  for (const auto& j : w->jobs) {
    uint64_t h = StableHash(j.user(), j.name(), 7);
    double u_cpu = 0.2 + 0.5 * static_cast<double>(h % 1000) / 1000.0;
    double u_mem = 0.6 + 0.35 * static_cast<double>((h / 1000) % 1000) / 1000.0;
    const auto& lim = j.task().resources();
    v1::Resources r = lim;
    r.set_cpu_millis(std::min<int64_t>(lim.cpu_millis(), std::llround(lim.cpu_millis() * u_cpu * 1.15)));
    r.set_memory_bytes(std::min<int64_t>(lim.memory_bytes(), std::llround(lim.memory_bytes() * u_mem * 1.15)));
    w->reservations.push_back({JobId(j.user(), j.name()), r});
  }
}

absl::StatusOr<Figure> RunReclamation(const SimWorkload& w, const CompactionOptions& o) {
  if (w.reservations.empty()) {
    return absl::FailedPreconditionError(
        "reclamation needs usage data to estimate reservations; this workload has none (the Google 2011 sample has "
        "no task_usage, openb none either); use a synthetic workload");
  }
  CompactionOptions off = o, on = o;
  off.use_reservations = false;
  on.use_reservations = true;
  HERD_ASSIGN_OR_RETURN(CompactionResult r_off, Compact(w, off));
  HERD_ASSIGN_OR_RETURN(CompactionResult r_on, Compact(w, on));
  std::vector<double> saved;
  for (size_t s = 0; s < r_off.needed.size(); ++s) {
    saved.push_back(r_off.needed[s] > 0 ? 100.0 * (1.0 - static_cast<double>(r_on.needed[s]) / r_off.needed[s]) : 0);
  }
  Spread sv = Summarise(saved);
  Figure f;
  f.id = "reclamation";
  f.title = absl::StrCat("Resource reclamation (Borg Fig. 10): ", w.name);
  f.table = report::Table({"non-prod scheduled against", "machines p90", "min", "max"});
  f.table.AddRow({"limits (reclamation off)", r_off.P90(), r_off.Min(), r_off.Max()});
  f.table.AddRow({"reservations (on)", r_on.P90(), r_on.Min(), r_on.Max()});
  f.table.AddRow({"machines saved %", Num(sv.p90, 1), Num(sv.min, 1), Num(sv.max, 1)});
  Spread a = Summarise(std::vector<double>(r_off.needed.begin(), r_off.needed.end()));
  Spread b = Summarise(std::vector<double>(r_on.needed.begin(), r_on.needed.end()));
  f.charts.push_back({"reclamation", Bars("Reclaiming resources for non-prod work", {"reclamation off", "on"},
                                          "machines needed (p90, min-max)", {a, b}, "machines")
                                         .Render()});
  AddSpread(f, "machines_saved_pct", sv);
  f.notes = SeedsNote(o) + "; reservations from a usage model: CPU 20-70%, memory 60-95% of the limit, +15% margin";
  return f;
}

absl::StatusOr<std::vector<UsageProfile>> ReadUsageProfiles(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot read"));
  constexpr absl::string_view kHeader =
      "time_ms,job,task_index,cpu_millis,memory_bytes,cpu_limit_millis,memory_limit_bytes";
  constexpr int kMaxRows = 1'000'000;
  std::string line;
  if (!std::getline(in, line) || absl::StripAsciiWhitespace(line) != kHeader) {
    return absl::InvalidArgumentError(absl::StrCat(path, ":1: the header must be ", kHeader));
  }
  std::map<std::string, UsageProfile> by_task;
  std::map<std::string, std::vector<std::pair<int64_t, std::pair<double, double>>>> samples;
  int n = 1;
  while (std::getline(in, line)) {
    ++n;
    if (absl::StripAsciiWhitespace(line).empty()) continue;
    if (n > kMaxRows + 1) return absl::InvalidArgumentError(absl::StrCat(path, ": more than ", kMaxRows, " rows"));
    std::vector<std::string> f = absl::StrSplit(absl::StripAsciiWhitespace(line), ',');
    if (f.size() != 7) {
      return absl::InvalidArgumentError(absl::StrCat(path, ":", n, ": ", f.size(), " fields, want 7"));
    }
    int64_t t, index;
    double cpu, mem, cpu_lim, mem_lim;  // the history's averages are not whole numbers
    if (!absl::SimpleAtoi(f[0], &t) || !absl::SimpleAtoi(f[2], &index) || !absl::SimpleAtod(f[3], &cpu) ||
        !absl::SimpleAtod(f[4], &mem) || !absl::SimpleAtod(f[5], &cpu_lim) || !absl::SimpleAtod(f[6], &mem_lim) ||
        !std::isfinite(cpu) || !std::isfinite(mem) || !std::isfinite(cpu_lim) || !std::isfinite(mem_lim)) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ":", n, ": time_ms and task_index must be integers, the figures numbers"));
    }
    if (cpu < 0 || mem < 0 || cpu_lim <= 0 || mem_lim <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ":", n, ": usage must not be negative and limits must be positive"));
    }
    const std::string name = absl::StrCat(f[1], "/", index);
    samples[name].push_back({t, {std::min(1.0, cpu / cpu_lim), std::min(1.0, mem / mem_lim)}});
  }
  std::vector<UsageProfile> out;
  for (auto& [name, v] : samples) {
    std::sort(v.begin(), v.end());
    UsageProfile p;
    p.name = name;
    for (const auto& [t, u] : v) {
      p.t_ms.push_back(t);
      p.cpu.push_back(u.first);
      p.memory.push_back(u.second);
    }
    out.push_back(std::move(p));
  }
  if (out.empty()) return absl::InvalidArgumentError(absl::StrCat(path, ": no usage rows"));
  return out;
}

namespace {

struct Replayed {
  double cpu = 1, memory = 1;  // reservation / limit at the end
  int64_t samples = 0, over = 0;  // samples after startup; of those, usage above the reservation
};

// One profile through one estimator, on a limit of 1.
Replayed Replay(const UsageProfile& p, const cell::EstimatorOptions& e) {
  Replayed r;
  if (p.t_ms.empty()) return r;
  cell::Estimate cpu(1.0, 1.0, p.t_ms.front()), mem(1.0, 1.0, p.t_ms.front());
  for (size_t i = 0; i < p.t_ms.size(); ++i) {
    const int64_t t = p.t_ms[i];
    if (t - p.t_ms.front() >= e.startup_ms) {
      ++r.samples;
      if (p.cpu[i] > cpu.Value(t, e) + 1e-9 || p.memory[i] > mem.Value(t, e) + 1e-9) ++r.over;
    }
    cpu.Observe(p.cpu[i], t, e);
    mem.Observe(p.memory[i], t, e);
  }
  r.cpu = cpu.Value(p.t_ms.back(), e);
  r.memory = mem.Value(p.t_ms.back(), e);
  return r;
}

}  // namespace

absl::StatusOr<Figure> RunReclamationWithUsage(const SimWorkload& w, const CompactionOptions& o,
                                               const std::vector<UsageProfile>& profiles) {
  if (profiles.empty()) return absl::InvalidArgumentError("no usage profiles");
  std::vector<std::pair<std::string, cell::EstimatorOptions>> estimators;
  for (const char* preset : {"baseline", "medium", "aggressive"}) {
    HERD_ASSIGN_OR_RETURN(cell::EstimatorOptions e, cell::EstimatorPreset(preset));
    estimators.push_back({preset, e});
  }
  {
    // Seed 004's predictor with the medium preset's margin and half-life.
    cell::EstimatorOptions e = estimators[1].second;
    e.kind = cell::EstimatorOptions::Kind::kHistogram;
    estimators.push_back({"histogram", e});
  }
  CompactionOptions off = o, on = o;
  off.use_reservations = false;
  on.use_reservations = true;
  HERD_ASSIGN_OR_RETURN(CompactionResult r_off, Compact(w, off));
  Figure f;
  f.id = "reclamation";
  f.title = absl::StrCat("Resource reclamation (Borg Fig. 10) with recorded usage: ", w.name);
  f.table = report::Table({"estimator", "machines p90", "min", "max", "saved % p90", "cpu reserved/limit",
                           "memory reserved/limit", "samples over reservation %"});
  f.table.AddRow({"off (limits)", r_off.P90(), r_off.Min(), r_off.Max(), Num(0, 1), Num(1, 2), Num(1, 2), Num(0, 2)});
  std::vector<std::string> names = {"off"};
  std::vector<Spread> spreads = {Summarise(std::vector<double>(r_off.needed.begin(), r_off.needed.end()))};
  for (const auto& [name, e] : estimators) {
    std::vector<Replayed> per_profile;
    int64_t samples = 0, over = 0;
    for (const UsageProfile& p : profiles) {
      per_profile.push_back(Replay(p, e));
      samples += per_profile.back().samples;
      over += per_profile.back().over;
    }
    SimWorkload ww = w;
    ww.reservations.clear();
    double cpu_share = 0, mem_share = 0;
    for (const auto& j : ww.jobs) {
      const Replayed& r = per_profile[StableHash(j.user(), j.name(), 11) % per_profile.size()];
      const auto& lim = j.task().resources();
      v1::Resources res = lim;
      res.set_cpu_millis(std::llround(static_cast<double>(lim.cpu_millis()) * r.cpu));
      res.set_memory_bytes(std::llround(static_cast<double>(lim.memory_bytes()) * r.memory));
      ww.reservations.push_back({JobId(j.user(), j.name()), res});
      cpu_share += r.cpu;
      mem_share += r.memory;
    }
    const double jobs = std::max<double>(1, static_cast<double>(ww.jobs.size()));
    HERD_ASSIGN_OR_RETURN(CompactionResult r_on, Compact(ww, on));
    std::vector<double> saved;
    for (size_t s = 0; s < r_off.needed.size() && s < r_on.needed.size(); ++s) {
      saved.push_back(r_off.needed[s] > 0 ? 100.0 * (1.0 - static_cast<double>(r_on.needed[s]) / r_off.needed[s]) : 0);
    }
    Spread sv = Summarise(saved);
    const double over_pct = samples > 0 ? 100.0 * static_cast<double>(over) / static_cast<double>(samples) : 0;
    f.table.AddRow({name, r_on.P90(), r_on.Min(), r_on.Max(), Num(sv.p90, 1), Num(cpu_share / jobs, 2),
                    Num(mem_share / jobs, 2), Num(over_pct, 2)});
    names.push_back(name);
    spreads.push_back(Summarise(std::vector<double>(r_on.needed.begin(), r_on.needed.end())));
    AddSpread(f, absl::StrCat(name, "_machines_saved_pct"), sv);
    f.results.push_back({absl::StrCat(name, "_machines_p90"), r_on.P90()});
    f.results.push_back({absl::StrCat(name, "_over_reservation_pct"), over_pct});
  }
  f.results.push_back({"off_machines_p90", r_off.P90()});
  f.charts.push_back({"reclamation", Bars("Reclaiming resources for non-prod work, by estimator", names,
                                          "machines needed (p90, min-max)", spreads, "machines")
                                         .Render()});
  std::string est;
  for (const auto& [name, e] : estimators) absl::StrAppend(&est, "; ", name, " = ", cell::DescribeEstimator(e));
  f.notes = absl::StrCat(SeedsNote(o), "; reservations from ", profiles.size(),
                         " usage profiles recorded on a real cell, each job taking one by a hash of its name", est);
  return f;
}

}  // namespace herd::sim
