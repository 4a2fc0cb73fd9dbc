// The machine's CPUs as Linux describes them under /sys/devices/system:
// which CPUs are online, which of them are hardware threads of one physical
// core (topology/thread_siblings_list), and which NUMA node each belongs to
// (node/nodeN/cpulist). Read from a root directory, so tests can point it at
// a fake sysfs tree. For CPU pinning (cpu_allocator.h).
#pragma once

#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace herd::agent {

// A set of CPU (or memory node) numbers.
using CpuSet = std::set<int>;

// "0-3,8,10-11" <-> {0,1,2,3,8,10,11}, the kernel's list format (cpuset.cpus,
// cpulist, thread_siblings_list, /proc/PID/status Cpus_allowed_list).
// Whitespace around is ignored; "" is the empty set.
absl::StatusOr<CpuSet> ParseCpuList(absl::string_view text);
std::string FormatCpuList(const CpuSet& cpus);

struct CpuTopology {
  struct Cpu {
    int id = 0;
    int core = 0;     // index into `cores`
    int node = 0;     // NUMA node (0 where the machine has no node directory)
    int package = 0;  // physical_package_id (informational)
  };
  struct Core {
    CpuSet cpus;  // its online hardware threads
    int node = 0;
  };
  std::vector<Cpu> cpus;    // online CPUs, by id
  std::vector<Core> cores;  // physical cores, by their lowest CPU id
  CpuSet nodes;             // NUMA nodes that have online CPUs
  CpuSet memory_nodes;      // nodes with memory (node/has_memory; else `nodes`)

  CpuSet AllCpus() const;
  const Cpu* Find(int id) const;
  // "2 cores, 4 CPUs, 1 node" for the log.
  std::string Summary() const;
};

// Reads `sys_root` (normally "/sys/devices/system"): cpu/online, then for
// each online CPU cpu/cpuN/topology/{thread_siblings_list,
// physical_package_id}, and node/node*/cpulist. A CPU without topology files
// is a core of its own; a machine without node/ is one node, 0. Memory
// nodes from node/has_memory.
absl::StatusOr<CpuTopology> ReadCpuTopology(const std::string& sys_root = "/sys/devices/system");

}  // namespace herd::agent
