// Scheduler options: the packing policy, the queue order, the weights of the
// score plugins and the scalability techniques (each can be switched off to
// measure what it buys, as Borg §3.4 did).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace herd::sched {

enum class PackingPolicy {
  kWorstFit,  // E-PVM's marginal cost alone: spreads load, leaves headroom, fragments
  kBestFit,   // fills machines as tightly as possible
  kHybrid,    // E-PVM's marginal cost plus a stranding term: penalises a placement
              // that leaves one resource unusable for the cell's typical task
              // shape (Borg §3.2: a hybrid "that tries to reduce the amount of
              // stranded resources"); on cells with devices (GPUs), led by
              // FGD's fragmentation growth (Weng et al., ATC '23)
  kPack,      // best fit over every resource the machine has (GPUs included)
              // plus the stranding term, plus, where tasks ask for extended
              // resources (GPUs), the growth of their expected fragmentation
              // for the pending tasks' shapes (FGD, Weng et al. ATC '23)
  kK8s,       // kube-scheduler's default profile: least allocated plus
              // balanced allocation over CPU and memory, equally weighted
};
absl::StatusOr<PackingPolicy> ParsePackingPolicy(absl::string_view name);
absl::string_view PackingPolicyName(PackingPolicy p);

// The order of users' tasks within one priority.
enum class QueueOrder {
  kRoundRobin,  // users take turns (Borg §3.2)
  kDrf,         // the user with the lowest dominant resource share first (Mesos)
};
absl::StatusOr<QueueOrder> ParseQueueOrder(absl::string_view name);

// The order of one user's tasks within one priority.
enum class TaskOrder {
  kSubmission,  // as submitted (job id, then task index)
  kLargest,     // hardest first: dominant share of a typical machine x scarcity
                // (machines in the cell / machines its hard constraints and
                // extended resources allow), as first-fit-decreasing packs;
                // equal ones in submission order
};
absl::StatusOr<TaskOrder> ParseTaskOrder(absl::string_view name);
absl::string_view TaskOrderName(TaskOrder o);

// The weights of the score plugins, by plugin name ("spread": 0.5). A
// score not set here has its registered default weight (framework/registry.h);
// 0 leaves it out.
class ScoreWeights {
 public:
  void Set(absl::string_view score, double weight);
  std::optional<double> Find(absl::string_view score) const;
  const std::vector<std::pair<std::string, double>>& all() const { return set_; }

 private:
  std::vector<std::pair<std::string, double>> set_;
};

class Registry;
struct Options {
  PackingPolicy policy = PackingPolicy::kHybrid;
  QueueOrder order = QueueOrder::kRoundRobin;
  TaskOrder task_order = TaskOrder::kSubmission;
  bool preemption = true;
  // The profile (framework/profile.h): which plugins run, with which
  // weights. `profile` names it for logs; `filters` lists the filter
  // plugins in order (empty: every registered one); `weights` overrides
  // the scores' registered defaults.
  std::string profile = "default";
  std::vector<std::string> filters;
  ScoreWeights weights;
  // Where plugin names are looked up; null: Registry::BuiltIn().
  const Registry* registry = nullptr;
  // Failure domains to spread a job across (machine attributes); the machine
  // itself is always one.
  std::vector<std::string> spread_domains = {"rack", "power"};

  // Scalability techniques.
  bool equivalence_classes = true;    // one feasibility/score computation per group of identical tasks
  bool score_cache = true;            // keep scores until the machine or task changes
  bool relaxed_randomization = true;  // examine machines in random order until enough fit
  // With relaxed randomization: how many feasible machines to find before
  // picking the best of them (more are sought when those fill up).
  int32_t enough_feasible = 48;
  // With relaxed randomization: a new class also examines the cell's fullest
  // machines (mean CPU and memory utilisation, as the pass sees them) until
  // this many of them fit, so a packing score sees where the pass has been
  // packing and not only its random sample (0 = only the random sample).
  int32_t fullest_candidates = 0;
  // The hybrid policy packs production work (best fit plus stranding) only
  // while non-production work asks for less than this share of the CPU the
  // cell's work asks for (running and pending); above it, hybrid spreads
  // every task by E-PVM's cost plus stranding (issue #13: packing production
  // saves machines where production is the workload, spreading it saves them
  // where non-production work follows into what production left). 0: never
  // pack production; > 1: always.
  double hybrid_pack_below = 0.1;
  // With relaxed randomization: feasible machines sought per class that the
  // hybrid policy packs on a cell without devices (production, above); a
  // packing score wants the tightest machine, which a small random sample of
  // a large cell rarely holds. 0 = every feasible machine.
  int32_t hybrid_pack_sample = 192;
  // A machine's cached score is kept while its free CPU and memory moved by
  // less than this fraction of its capacity ("ignoring small changes").
  double small_change = 0.02;
  // The hybrid's stranding term: the typical task's CPU per memory (both as
  // fractions of capacity). 0: the pass's demand (allocated + pending) over
  // the cell's capacity.
  double stranding_shape = 0;

  // Stop after this many tasks considered in one pass (0 = no limit).
  int64_t max_tasks_per_pass = 0;
  // Stop the pass once more than this many tasks are left pending (< 0: never).
  // For yes/no questions such as the simulator's "does this workload fit?".
  int64_t max_unplaced = -1;
  // Machines examined for preemption per task, at most.
  int32_t max_preemption_candidates = 256;
  uint64_t seed = 1;
  std::string name = "scheduler";
};

}  // namespace herd::sched
