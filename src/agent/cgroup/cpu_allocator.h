// Exclusive CPU sets for latency-sensitive runs that ask for whole cores.
//
// The allocator hands out whole physical cores: a run asking for n CPUs
// gets the hardware threads of ceil(n / threads-per-core) free cores, all of
// them held for it (`held`) so that no other run, batch in particular, ever
// shares a core with it through a hyper-thread sibling. Its cpuset
// (`cpus`) is n of those threads, whole cores first; the odd thread left
// over on an SMT machine (n = 3 on two threads per core) stays idle. All on
// one NUMA node when one has enough free cores (the node with the fewest
// free CPUs that fits, so big nodes stay free for big requests; of equals
// the highest-numbered); else across nodes, most free CPUs first. Cores are taken highest-numbered first: CPU
// 0, where the system's interrupts and daemons tend to be, stays shared.
//
// What no run holds is the shared pool (batch runs, LS runs that are not
// pinned); it always keeps at least `min_shared_cpus` CPUs. Pure logic, no
// I/O, not thread-safe: the caller locks.
#pragma once

#include <map>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "agent/cgroup/cpu_topology.h"

namespace herd::agent {

struct CpuAssignment {
  CpuSet cpus;  // the run's cpuset.cpus
  CpuSet held;  // its whole cores: cpus plus the idle siblings; out of the shared pool
  CpuSet mems;  // the NUMA nodes of cpus (its cpuset.mems)

  bool operator==(const CpuAssignment&) const = default;
};

// "cpus=2-3 held=2-3 mems=0" and back (the run directory's record).
std::string EncodeCpuAssignment(const CpuAssignment& a);
absl::StatusOr<CpuAssignment> DecodeCpuAssignment(absl::string_view text);

class CpuAllocator {
 public:
  explicit CpuAllocator(CpuTopology topology, int min_shared_cpus = 1);

  const CpuTopology& topology() const { return topo_; }

  // `n` CPUs for `owner` (who must hold none). RESOURCE_EXHAUSTED, saying
  // how many whole cores are free, if they do not fit beside the shared
  // pool's minimum; INVALID_ARGUMENT if n < 1.
  absl::StatusOr<CpuAssignment> Allocate(const std::string& owner, int n);
  // After an agent restart: `owner` takes exactly `a` again (read back from
  // its run directory). FAILED_PRECONDITION if any of it is offline, held
  // by another owner, splits a core, or would leave the shared pool below
  // its minimum.
  absl::Status Claim(const std::string& owner, const CpuAssignment& a);
  // Gives back what `owner` holds (nothing if none).
  void Release(const std::string& owner);

  const CpuAssignment* Find(const std::string& owner) const;
  const std::map<std::string, CpuAssignment>& assignments() const { return owners_; }
  // Online CPUs no owner holds.
  CpuSet SharedPool() const;
  // The memory nodes shared runs may use: every node.
  CpuSet SharedMems() const { return topo_.nodes; }
  int min_shared_cpus() const { return min_shared_; }

 private:
  CpuSet Held() const;

  CpuTopology topo_;
  int min_shared_;
  std::map<std::string, CpuAssignment> owners_;
};

}  // namespace herd::agent
