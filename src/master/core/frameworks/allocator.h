// The framework allocator (issue #17; the Mesos paper, seed 002, §3-4):
// what the built-in scheduler has not committed is offered to registered
// frameworks, machine by machine, by Dominant Resource Fairness between
// them.
//
// A framework's share in a dimension is what it holds (tasks it launched
// plus offers it has not answered yet) over the cell's total; its dominant
// share is the largest of those (CPU, memory, and every extended resource
// the cell has), divided by its role's weight. Each round offers each
// machine's slack whole to one framework: a role still below its guarantee
// first, then the lowest weighted dominant share (ties: the framework
// registered first). An offer counts as held until it is answered:
// accepted tasks keep what they use (Recover gives back the rest), a decline
// gives it all back. A framework never gets a machine it declined with a
// filter until the filter expires, nor one whose attributes its filter
// rejects. Pure: no clock, no I/O; the master feeds it the cell's slack
// (capacity minus every committed task's limit minus outstanding offers:
// one ledger with the built-in scheduler).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "base/resources.h"

namespace herd::master::frameworks {

struct MachineSlack {
  std::string machine;
  ResourceVector free;  // not committed to any task, not offered
  std::map<std::string, std::string> attributes;
};

struct Offer {
  std::string framework;
  std::string machine;
  ResourceVector resources;
};

class DrfAllocator {
 public:
  struct Options {
    // Slack smaller than this in CPU or in memory is not offered (nothing
    // useful fits; Mesos' min allocatable resources).
    int64_t min_cpu_millis = 10;
    int64_t min_memory_bytes = 32ll << 20;
  };
  DrfAllocator() = default;
  explicit DrfAllocator(Options o) : options_(o) {}

  // A role's weight (its frameworks' dominant shares are divided by it) and
  // guarantee (while it holds less, its frameworks come first).
  absl::Status SetRole(const std::string& role, double weight, const ResourceVector& guarantee);
  absl::Status AddFramework(const std::string& id, const std::string& role);
  void RemoveFramework(const std::string& id);
  bool HasFramework(const std::string& id) const { return frameworks_.contains(id); }

  // What a framework holds: tasks it runs (Allocate on recovery, after a
  // master failover) and offers it has not answered.
  void Allocate(const std::string& id, const ResourceVector& r);
  // Gives back part of what it held: the unused rest of an accepted offer,
  // a declined or rescinded offer, a task that ended.
  void Recover(const std::string& id, const ResourceVector& r);
  // "Refuse this machine for a while" (a decline's filter).
  void Decline(const std::string& id, const std::string& machine, int64_t until_ms);
  // "Never offer me machines without these attributes": each key must have
  // the given value. Replaces the framework's earlier attribute filter.
  void RequireAttributes(const std::string& id, std::map<std::string, std::string> attributes);
  // Stop / start offering to it (a framework that is disconnected keeps its
  // tasks and share, but gets no offers).
  void SetActive(const std::string& id, bool active);

  // One allocation round over the machines' slack at `now_ms`; every offer
  // made is counted as held by its framework.
  std::vector<Offer> Round(const std::vector<MachineSlack>& slack, const ResourceVector& total, int64_t now_ms);

  const ResourceVector& Held(const std::string& id) const;
  // max over dimensions of held / total, divided by the role's weight.
  double DominantShare(const std::string& id, const ResourceVector& total) const;
  // A role's weight (1 unless SetRole gave another).
  double Weight(const std::string& role) const;

 private:
  struct Role {
    double weight = 1;
    ResourceVector guarantee;
  };
  struct Framework {
    std::string role;
    int64_t order = 0;  // registration order, for ties
    bool active = true;
    ResourceVector held;
    std::map<std::string, int64_t> declined;  // machine -> until
    std::map<std::string, std::string> required;
  };
  bool Eligible(const Framework& f, const MachineSlack& m, int64_t now_ms) const;
  bool UnderGuarantee(const std::string& role) const;

  Options options_;
  std::map<std::string, Role> roles_;
  std::map<std::string, Framework> frameworks_;
  int64_t next_order_ = 0;
  static const ResourceVector kNone;
};

// Share of `r` in `total`, dimension by dimension: the largest (CPU, memory,
// disk, and each extended resource the total has).
double DominantShareOf(const ResourceVector& r, const ResourceVector& total);

}  // namespace herd::master::frameworks
