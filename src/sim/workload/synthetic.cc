#include "sim/workload/synthetic.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <set>

#include "absl/strings/str_cat.h"
#include "base/priority.h"
#include "base/rng.h"

namespace herd::sim {

std::vector<v1::Machine> MakeMachines(const std::vector<TraceMachine>& shapes, const CellOptions& o) {
  Rng rng(o.seed * 7919 + 1);
  // Platforms by frequency: the most common is p0.
  std::map<std::string, int> count;
  for (const TraceMachine& m : shapes) ++count[m.platform];
  std::vector<std::pair<int, std::string>> by_freq;
  for (const auto& [p, n] : count) by_freq.push_back({-n, p});
  std::sort(by_freq.begin(), by_freq.end());
  std::map<std::string, std::string> platform_name;
  for (size_t i = 0; i < by_freq.size(); ++i) platform_name[by_freq[i].second] = absl::StrCat("p", i);

  const bool all = static_cast<size_t>(o.machines) == shapes.size();
  std::vector<v1::Machine> out;
  out.reserve(static_cast<size_t>(o.machines));
  static const char* kKernels[] = {"3.2.0", "3.2.0", "3.2.0", "3.2.0", "3.2.0", "3.2.0",
                                   "3.4.0", "3.4.0", "3.4.0", "3.8.0"};
  for (int i = 0; i < o.machines; ++i) {
    const TraceMachine& s = all ? shapes[static_cast<size_t>(i)] : shapes[rng.Uniform(shapes.size())];
    v1::Machine m;
    m.set_name(absl::StrCat("m", i));
    m.set_address(absl::StrCat("sim:", i));
    m.mutable_capacity()->set_cpu_millis(std::max<int64_t>(1000, std::llround(s.cpu * o.cpu_millis_per_unit)));
    m.mutable_capacity()->set_memory_bytes(
        std::max<int64_t>(1LL << 30, std::llround(s.memory * static_cast<double>(o.memory_bytes_per_unit))));
    m.mutable_capacity()->set_disk_bytes(2LL << 40);
    m.mutable_capacity()->set_ports(1000);
    int rack = i / o.machines_per_rack;
    auto& a = *m.mutable_attributes();
    a["rack"] = absl::StrCat("r", rack);
    a["power"] = absl::StrCat("pd", rack / o.racks_per_power_domain);
    a["platform"] = platform_name[s.platform];
    a["kernel"] = kKernels[rng.Uniform(10)];
    a["arch"] = "amd64";
    if (rng.UniformDouble() < 0.3) a["ssd"] = "yes";
    out.push_back(std::move(m));
  }
  return out;
}

namespace {

// Heavy-tailed job sizes: most jobs have one task, a few have thousands
// (mean about 32 tasks).
int64_t JobSize(Rng& rng) {
  double u = rng.UniformDouble();
  auto log_uniform = [&](double lo, double hi) {
    return static_cast<int64_t>(std::floor(std::exp(std::log(lo) + rng.UniformDouble() * (std::log(hi + 1) - std::log(lo)))));
  };
  if (u < 0.60) return 1;
  if (u < 0.85) return log_uniform(2, 10);
  if (u < 0.96) return log_uniform(11, 100);
  if (u < 0.995) return log_uniform(101, 1000);
  return log_uniform(1001, 10000);
}

struct Band {
  double p;
  int32_t lo, hi;
};
// Share of jobs per band: free, batch, mid, production, monitoring.
constexpr Band kBandsByJob[] = {{0.15, 0, 99}, {0.35, 100, 115}, {0.05, 116, 119}, {0.40, 120, 359}, {0.05, 360, 400}};
// The same in the Google 2011 trace: few monitoring jobs, almost no mid tier
// (docs/sim/calibration.md; the 2019 trace paper's tiers).
constexpr Band kBandsByJob2011[] = {
    {0.20, 0, 99}, {0.37, 100, 115}, {0.02, 116, 119}, {0.40, 120, 359}, {0.01, 360, 400}};

}  // namespace

Workload MakeWorkload(const std::vector<v1::Machine>& machines, const WorkloadOptions& o) {
  Rng rng(o.seed * 104'729 + 17);
  const bool t2011 = o.shapes == 2011;
  // Cores; memory per core. 2015: 18% of batch under 0.1 core. 2011: the
  // shapes of the trace's tasks (medians set prod against non-prod before
  // the fill rescales them; docs/sim/calibration.md).
  std::lognormal_distribution<double> prod_cpu(std::log(t2011 ? 1.5 : 0.6), 0.8);
  std::lognormal_distribution<double> batch_cpu(std::log(t2011 ? 1.9 : 0.3), t2011 ? 0.7 : 1.2);
  std::lognormal_distribution<double> gib_per_core(std::log(t2011 ? 2.0 : 4.0), 0.7);
  std::lognormal_distribution<double> prod_gib_2011(std::log(4.0), 1.0);
  // One distribution for both under 2015 shapes (its draws stay as they were).
  auto& prod_gib_per_core = t2011 ? prod_gib_2011 : gib_per_core;
  const auto& bands = t2011 ? kBandsByJob2011 : kBandsByJob;
  double cap_cpu = 0, cap_mem = 0;
  std::vector<double> cpus, mems;
  for (const auto& m : machines) {
    cap_cpu += static_cast<double>(m.capacity().cpu_millis());
    cap_mem += static_cast<double>(m.capacity().memory_bytes());
    cpus.push_back(static_cast<double>(m.capacity().cpu_millis()));
    mems.push_back(static_cast<double>(m.capacity().memory_bytes()));
  }
  // No task is bigger than 40% of a median machine in either resource.
  std::nth_element(cpus.begin(), cpus.begin() + cpus.size() / 2, cpus.end());
  std::nth_element(mems.begin(), mems.begin() + mems.size() / 2, mems.end());
  const double max_cpu = cpus[cpus.size() / 2] * 0.4, max_mem = mems[mems.size() / 2] * 0.4;
  std::set<std::string> racks;
  for (const auto& m : machines) {
    auto it = m.attributes().find("rack");
    if (it != m.attributes().end()) racks.insert(it->second);
  }
  // Anti-affinity only where the cell can honour it.
  const int64_t max_spread_job = std::min<int64_t>(2000, static_cast<int64_t>(machines.size()) / 4);
  // Raw shapes first (cores, GiB), scaled to the fill target afterwards.
  struct Raw {
    double cores, gib;
    bool prod, tiny;
  };
  std::vector<Raw> raw;
  Workload w;
  double sum_cores = 0, sum_gib = 0;
  int64_t left = o.tasks;
  int64_t j = 0;
  int64_t nonprod_so_far = 0, tiny_so_far = 0;
  while (left > 0) {
    int64_t n = std::min(left, JobSize(rng));
    left -= n;
    v1::JobSpec s;
    s.set_name(absl::StrCat(o.name_prefix, j++));
    s.set_user(o.users[rng.Uniform(o.users.size())]);
    double u = rng.UniformDouble(), acc = 0;
    Band band = bands[3];
    for (const Band& b : bands) {
      acc += b.p;
      if (u < acc) {
        band = b;
        break;
      }
    }
    int32_t prio = band.lo + static_cast<int32_t>(rng.Uniform(static_cast<uint64_t>(std::min(band.hi - band.lo, 20) + 1)));
    if (band.lo == 120) prio = rng.Uniform(3) == 0 ? 150 : 200;
    s.set_priority(prio);
    s.set_task_count(static_cast<int32_t>(n));
    s.mutable_task()->add_command("/bin/true");
    const bool prod = IsProd(prio);
    // A share of non-prod tasks asks for under 0.1 core (fixed, not scaled):
    // a job is tiny if that brings the share of tiny tasks so far closer to
    // the target.
    const double want = o.tiny_nonprod_tasks * static_cast<double>(nonprod_so_far + n);
    const bool tiny = !prod && std::abs(static_cast<double>(tiny_so_far + n) - want) <
                                   std::abs(static_cast<double>(tiny_so_far) - want);
    if (!prod) {
      nonprod_so_far += n;
      if (tiny) tiny_so_far += n;
    }
    double cores = tiny ? 0.01 + 0.089 * rng.UniformDouble() : (prod ? prod_cpu(rng.engine()) : batch_cpu(rng.engine()));
    double gib = std::max(0.03, (tiny ? 0.3 : cores) * (prod ? prod_gib_per_core : gib_per_core)(rng.engine()));
    raw.push_back({cores, gib, prod, tiny});
    sum_cores += cores * static_cast<double>(n);
    sum_gib += gib * static_cast<double>(n);
    if (prod && rng.UniformDouble() < 0.3) s.mutable_task()->mutable_resources()->set_ports(1 + rng.Uniform(2));
    s.set_appclass(prod ? v1::LATENCY_SENSITIVE : v1::BATCH);
    s.set_grace_period_ms(10'000);
    s.mutable_restart()->set_mode(v1::RestartPolicy::ON_FAILURE);
    // Hard constraints; the picky ones only on small jobs.
    if (rng.UniformDouble() < o.constrained_jobs) {
      v1::Constraint* c = s.add_constraints();
      double k = rng.UniformDouble();
      if (k < 0.4) {
        c->set_attribute("platform");
        c->set_op(v1::Constraint::EQ);
        c->add_values("p0");
      } else if (k < 0.6 && n <= 100) {
        c->set_attribute("platform");
        c->set_op(v1::Constraint::EQ);
        c->add_values("p1");
      } else if (k < 0.8) {
        c->set_attribute("ssd");
        c->set_op(v1::Constraint::EXISTS);
      } else if (k < 0.95 || n > 20) {
        c->set_attribute("kernel");
        c->set_op(v1::Constraint::GE);
        c->add_values("3.4.0");
      } else {
        c->set_attribute("platform");
        c->set_op(v1::Constraint::IN);
        c->add_values("p1");
        c->add_values("p2");
      }
    }
    if (n > 1 && n <= max_spread_job && rng.UniformDouble() < o.anti_affinity_jobs) {
      s.set_different_machines(true);
    } else if (prod && n > 4 && rng.UniformDouble() < 0.05) {
      // At most so many per rack that half of the cell's racks suffice.
      const int64_t half = std::max<int64_t>(1, static_cast<int64_t>(racks.size()) / 2);
      (*s.mutable_max_per_domain())["rack"] = static_cast<int32_t>((n + half - 1) / half);
    }
    w.jobs.push_back(std::move(s));
  }
  // Calibrate: prod requests are scaled against non-prod ones until prod holds
  // the paper's shares of CPU and memory, and everything is scaled until the
  // most demanded resource is filled to `fill`. Tiny tasks keep their CPU;
  // the others keep at least 0.1 core, so the share under 0.1 core is the
  // tiny share. A few rounds, each adjusting from what the last one gave.
  double fc = 1, fm = 1, scale = 1;
  auto final_cpu = [&](size_t i) {
    if (raw[i].tiny) return raw[i].cores * 1000;
    return std::max(100.0, raw[i].cores * (raw[i].prod ? fc : 1.0) * scale * 1000);
  };
  auto final_mem = [&](size_t i) { return raw[i].gib * (raw[i].prod ? fm : 1.0) * scale * (1LL << 30); };
  for (int round = 0; round < 12; ++round) {
    double pc = 0, tc = 0, pm = 0, tm = 0;
    for (size_t i = 0; i < w.jobs.size(); ++i) {
      double n = w.jobs[i].task_count();
      double c = final_cpu(i) * n, m = final_mem(i) * n;
      tc += c;
      tm += m;
      if (raw[i].prod) {
        pc += c;
        pm += m;
      }
    }
    auto adjust = [](double prod, double total, double share) {
      double rest = total - prod;
      return prod > 0 && rest > 0 ? (share / (1 - share)) / (prod / rest) : 1.0;
    };
    fc *= adjust(pc, tc, o.prod_cpu_share);
    fm *= adjust(pm, tm, o.prod_memory_share);
    scale *= o.fill / std::max(tc / cap_cpu, tm / cap_mem);
  }
  int64_t prod_c = 0, prod_m = 0, nonprod_tasks = 0, tiny_tasks = 0;
  for (size_t i = 0; i < w.jobs.size(); ++i) {
    v1::JobSpec& s = w.jobs[i];
    int64_t cpu = std::clamp<int64_t>(std::llround(final_cpu(i)), 1, static_cast<int64_t>(max_cpu));
    int64_t mem = std::clamp<int64_t>(std::llround(final_mem(i)), 4LL << 20, static_cast<int64_t>(max_mem));
    s.mutable_task()->mutable_resources()->set_cpu_millis(cpu);
    s.mutable_task()->mutable_resources()->set_memory_bytes(mem);
    w.tasks += s.task_count();
    w.cpu_millis += cpu * s.task_count();
    w.memory_bytes += mem * s.task_count();
    if (raw[i].prod) {
      prod_c += cpu * s.task_count();
      prod_m += mem * s.task_count();
    } else {
      nonprod_tasks += s.task_count();
      if (cpu < 100) tiny_tasks += s.task_count();
    }
  }
  w.prod_cpu_share = static_cast<double>(prod_c) / static_cast<double>(std::max<int64_t>(1, w.cpu_millis));
  w.prod_memory_share = static_cast<double>(prod_m) / static_cast<double>(std::max<int64_t>(1, w.memory_bytes));
  w.tiny_nonprod_share = static_cast<double>(tiny_tasks) / static_cast<double>(std::max<int64_t>(1, nonprod_tasks));
  return w;
}

}  // namespace herd::sim
