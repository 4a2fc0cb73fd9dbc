#include "sched/plugins/score/scores.h"

#include <algorithm>
#include <cmath>

#include "base/priority.h"
#include "sched/framework/devices.h"
#include "cell/constraints.h"
#include "sched/framework/pass_context.h"
#include "sched/preempt/preempt.h"

namespace herd::sched {
namespace {

double Frac(int64_t part, int64_t whole) {
  if (whole <= 0) return 1.0;
  return std::clamp(static_cast<double>(part) / static_cast<double>(whole), 0.0, 1.0);
}

// E-PVM's convex per-resource cost.
constexpr double kEpvmBase = 64.0;
double EpvmCost(double u) { return (std::pow(kEpvmBase, u) - 1.0) / (kEpvmBase - 1.0); }

}  // namespace

double PackingScore::Fragmentation(const PassContext& ctx, const MachineView& m, const ResourceVector& free,
                                   const Devices& devices) {
  // FGD (Weng et al., ATC '23), per device: for each typical task shape,
  // the free device capacity (milli-units) it could not use -- all of it when
  // the shape does not fit the machine's other resources or asks for no
  // device; else, per device resource it asks for, the devices too full for
  // it (a share needs one device with room, whole devices need empty ones);
  // all of a resource it does not ask for. Weighted by the shape's share.
  const int64_t total = devices.TotalFree();
  if (total == 0) return 0;
  double frag = 0;
  for (const PassContext::ExtendedShape& s : ctx.extended_shapes()) {
    const ResourceVector& n = s.need;
    bool fits = n.cpu_millis <= free.cpu_millis && n.memory_bytes <= free.memory_bytes &&
                n.disk_bytes <= free.disk_bytes && n.ports <= free.ports;
    for (const v1::Constraint* c : s.hard) fits = fits && cell::Matches(*c, m.machine->attributes());
    for (const auto& [name, want] : n.extended) {
      if (fits && devices.Find(name) == nullptr && want > free.Extended(name)) fits = false;
    }
    double f = 0;
    if (!fits) {
      f = static_cast<double>(total);
    } else {
      for (const DeviceSet& d : devices.sets) {
        const int64_t want = n.Extended(d.name);
        if (want <= 0 || !d.Fits(want)) {
          f += static_cast<double>(d.TotalFree());
          continue;
        }
        const bool whole = WholeDevices(want) > 0;
        for (int32_t left : d.free) {
          if (whole ? left < kDeviceMillis : left < want) f += left;
        }
      }
    }
    frag += s.share * f;
  }
  return frag;
}

double PackingScore::FragmentationGrowth(const PassContext& ctx, const MachineView& m, const ResourceVector& free,
                                         const ResourceVector& need) {
  if (m.devices.empty() || ctx.extended_shapes().empty()) return 0;
  Devices after = m.devices;
  after.Take(need);
  return Fragmentation(ctx, m, free - need, after) - Fragmentation(ctx, m, free, m.devices);
}

void PackingScore::Utilisation(const MachineView& m, const ResourceVector& free, const ResourceVector& need,
                               double* cpu, double* mem) {
  const ResourceVector& cap = m.machine->capacity();
  *cpu = 1.0 - Frac(free.cpu_millis - need.cpu_millis, cap.cpu_millis);
  *mem = 1.0 - Frac(free.memory_bytes - need.memory_bytes, cap.memory_bytes);
}

double PackingScore::Stranded(double free_cpu, double free_mem, double shape) {
  // Typical tasks use `shape` units of CPU fraction per unit of memory
  // fraction; they can fill the machine until one resource runs out, and
  // what is left of the other is stranded.
  if (shape <= 0) shape = 1.0;
  double mem_usable = std::min(free_mem, free_cpu / shape);
  return (free_cpu - shape * mem_usable) + (free_mem - mem_usable);
}

double PackingScore::Pack(const PassContext& ctx, const MachineView& m, const ResourceVector& free,
                      const ResourceVector& need, double uc, double um) {
  // Best fit over CPU, memory and each extended resource the machine
  // has: the machine left fullest, so whole machines stay free for what
  // comes next. Plus the stranding term (the remainder keeps the typical
  // task's shape), plus FGD: how much the placement grows the share of
  // the machine's devices that the pending tasks' shapes could no longer
  // use (it may shrink it: filling a fragment is rewarded).
  const ResourceVector& cap = m.machine->capacity();
  double fit = uc + um;
  int dims = 2;
  double cap_ext = 0, frag_delta = 0;
  for (const auto& [name, c] : cap.extended) {
    if (c <= 0) continue;
    fit += 1.0 - Frac(free.Extended(name) - need.Extended(name), c);
    ++dims;
    cap_ext += static_cast<double>(c);
  }
  fit /= dims;
  if (cap_ext > 0) frag_delta = FragmentationGrowth(ctx, m, free, need) / cap_ext;
  double stranded = std::min(1.0, Stranded(1.0 - uc, 1.0 - um, ctx.shape_cpu_per_mem()));
  double v = fit + kPackStrandWeight * (1.0 - stranded) - kPackFragWeight * frag_delta;
  // v is in [-kPackFragWeight, 1 + kPackStrandWeight + kPackFragWeight].
  return 100.0 * std::clamp((v + kPackFragWeight) / (1.0 + kPackStrandWeight + 2 * kPackFragWeight), 0.0, 1.0);
}

double PackingScore::Score(const PassContext& ctx, const TaskClass& cls, const MachineView& m,
                           const Preemption* p) const {
  ResourceVector free = m.FreeFor(cls);
  if (p != nullptr) free += p->freed;
  const ResourceVector& need = cls.need();
  double uc, um;
  Utilisation(m, free, need, &uc, &um);
  switch (policy_) {
    case PackingPolicy::kBestFit:
      return 100.0 * (uc + um) / 2;
    case PackingPolicy::kWorstFit: {
      const ResourceVector& cap = m.machine->capacity();
      double bc = 1.0 - Frac(free.cpu_millis, cap.cpu_millis), bm = 1.0 - Frac(free.memory_bytes, cap.memory_bytes);
      double marginal = EpvmCost(uc) - EpvmCost(bc) + EpvmCost(um) - EpvmCost(bm);
      // The largest possible marginal cost for this task: on a machine
      // otherwise full.
      double nc = Frac(need.cpu_millis, cap.cpu_millis), nm = Frac(need.memory_bytes, cap.memory_bytes);
      double worst = (1.0 - EpvmCost(1.0 - nc)) + (1.0 - EpvmCost(1.0 - nm));
      if (worst <= 0) return 100.0;
      return 100.0 * std::clamp(1.0 - marginal / worst, 0.0, 1.0);
    }
    case PackingPolicy::kHybrid: {
      // Packed (best fit plus stranding, PassContext::HybridPacks):
      // - on a cell whose tasks ask for devices (GPUs), everything: E-PVM's
      //   spreading strands devices (2.2x the machines of best fit on openb);
      // - production, where it is (nearly) all of the cell's work: packing
      //   leaves whole machines and few holes too small for its own kind --
      //   spreading production alone cost 3% more machines than best fit
      //   (issue #13).
      // Where non-production work is a real share of the cell, production is
      // spread like the rest: it is placed first, and spreading it leaves
      // every machine room in the cell's shape for the work that follows
      // (packing it cost 1.2% on the synthetic workload, 1.4% on g-all).
      if (ctx.HybridPacks(cls)) return Pack(ctx, m, free, need, uc, um);
      // E-PVM's marginal cost keeps headroom and balances load; the stranding
      // term stops a placement from leaving one resource unusable for the
      // cell's typical task shape. The cost of a typical (small) task is a
      // few hundredths, hence the factor that puts both on one scale.
      const ResourceVector& cap = m.machine->capacity();
      double bc = 1.0 - Frac(free.cpu_millis, cap.cpu_millis), bm = 1.0 - Frac(free.memory_bytes, cap.memory_bytes);
      double marginal = EpvmCost(uc) - EpvmCost(bc) + EpvmCost(um) - EpvmCost(bm);
      double stranded = Stranded(1.0 - uc, 1.0 - um, ctx.shape_cpu_per_mem());
      constexpr double kCostScale = 10.0;
      return 100.0 * std::clamp(1.0 - (kCostScale * marginal + stranded) / 2.0, 0.0, 1.0);
    }
    case PackingPolicy::kPack:
      return Pack(ctx, m, free, need, uc, um);
    case PackingPolicy::kK8s: {
      // kube-scheduler's default profile, NodeResourcesFit (LeastAllocated)
      // and NodeResourcesBalancedAllocation, weight 1 each, over CPU and
      // memory: the share left free after the placement, and one minus the
      // spread of the two utilisations (their standard deviation).
      const double least = ((1.0 - uc) + (1.0 - um)) / 2;
      const double balanced = 1.0 - std::abs(uc - um) / 2;
      return 100.0 * (least + balanced) / 2;
    }
  }
  return 0;
}

double SpreadScore::Score(const PassContext& ctx, const TaskClass& cls, const MachineView& m,
                          const Preemption*) const {
  if (cls.job->spec.task_count() <= 1) return 100.0;
  double sum = 1.0 / (1.0 + ctx.CountIn(cls.job, 0, m.domain[0]));
  int n = 1;
  for (int d : ctx.spread_domains()) {
    if (m.domain[d] < 0) continue;
    sum += 1.0 / (1.0 + ctx.CountIn(cls.job, d, m.domain[d]));
    ++n;
  }
  return 100.0 * sum / n;
}

double PreemptCostScore::Score(const PassContext&, const TaskClass&, const MachineView&, const Preemption* p) const {
  if (p == nullptr || p->victims.empty()) return 100.0;
  double prio = static_cast<double>(p->max_priority + 1) / (kMaxPriority + 1);
  double count = std::min(1.0, static_cast<double>(p->victims.size()) / 16.0);
  return 100.0 * std::clamp(1.0 - (0.7 * prio + 0.3 * count), 0.0, 1.0);
}

double LocalityScore::Score(const PassContext&, const TaskClass& cls, const MachineView& m, const Preemption*) const {
  if (cls.packages.empty()) return 100.0;
  int have = 0;
  for (const std::string& p : cls.packages) have += m.machine->HasPackage(p);
  return 100.0 * have / static_cast<double>(cls.packages.size());
}

double PriorityMixScore::Score(const PassContext&, const TaskClass& cls, const MachineView& m,
                               const Preemption*) const {
  // The other kind's share of the machine's CPU capacity: a bonus for
  // mixing, never a reason to open an empty machine. (It was the other
  // kind's share of the CPU in use, 50 on an empty machine: that made an
  // empty machine beat one holding only the same kind, spreading
  // single-kind workloads -- 64% more machines on openb multigpu30 with
  // best fit; issue #13.)
  const int64_t cap = m.machine->capacity().cpu_millis;
  if (cap <= 0) return 0.0;
  return 100.0 * std::clamp(static_cast<double>(cls.prod ? m.nonprod_cpu : m.prod_cpu) / static_cast<double>(cap),
                            0.0, 1.0);
}

double ReserveScore::Score(const PassContext& ctx, const TaskClass& cls, const MachineView& m,
                           const Preemption* p) const {
  if (p != nullptr || ctx.reservations().empty()) return 100.0;
  return ctx.reservations().Breaks(cls, m) ? 0.0 : 100.0;
}

double SoftConstraintScore::Score(const PassContext&, const TaskClass& cls, const MachineView& m,
                                  const Preemption*) const {
  if (cls.soft_weight_total <= 0) return 100.0;
  int64_t met = 0;
  for (const v1::Constraint* c : cls.soft) {
    if (cell::Matches(*c, m.machine->attributes())) met += std::max(1, c->weight());
  }
  return 100.0 * static_cast<double>(met) / static_cast<double>(cls.soft_weight_total);
}

}  // namespace herd::sched
