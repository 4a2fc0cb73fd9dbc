#include "agent/cgroup/cpu_allocator.h"

#include <algorithm>
#include <optional>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace herd::agent {
namespace {

bool Intersects(const CpuSet& a, const CpuSet& b) {
  for (int x : a) {
    if (b.contains(x)) return true;
  }
  return false;
}

}  // namespace

std::string EncodeCpuAssignment(const CpuAssignment& a) {
  return absl::StrCat("cpus=", FormatCpuList(a.cpus), " held=", FormatCpuList(a.held),
                      " mems=", FormatCpuList(a.mems), "\n");
}

absl::StatusOr<CpuAssignment> DecodeCpuAssignment(absl::string_view text) {
  CpuAssignment a;
  bool have_cpus = false, have_held = false;
  for (absl::string_view field : absl::StrSplit(text, absl::ByAnyChar(" \n\t"), absl::SkipEmpty())) {
    std::pair<absl::string_view, absl::string_view> kv = absl::StrSplit(field, absl::MaxSplits('=', 1));
    CpuSet* dst = kv.first == "cpus" ? &a.cpus : kv.first == "held" ? &a.held : kv.first == "mems" ? &a.mems : nullptr;
    if (dst == nullptr) continue;  // a later agent's field
    absl::StatusOr<CpuSet> set = ParseCpuList(kv.second);
    if (!set.ok()) return set.status();
    *dst = *std::move(set);
    have_cpus |= kv.first == "cpus";
    have_held |= kv.first == "held";
  }
  if (!have_cpus || !have_held || a.cpus.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("bad CPU assignment '", absl::StripAsciiWhitespace(text), "'"));
  }
  return a;
}

CpuAllocator::CpuAllocator(CpuTopology topology, int min_shared_cpus)
    : topo_(std::move(topology)), min_shared_(std::max(1, min_shared_cpus)) {}

CpuSet CpuAllocator::Held() const {
  CpuSet out;
  for (const auto& [owner, a] : owners_) out.insert(a.held.begin(), a.held.end());
  return out;
}

CpuSet CpuAllocator::SharedPool() const {
  CpuSet out = topo_.AllCpus();
  for (int c : Held()) out.erase(c);
  return out;
}

const CpuAssignment* CpuAllocator::Find(const std::string& owner) const {
  auto it = owners_.find(owner);
  return it == owners_.end() ? nullptr : &it->second;
}

absl::StatusOr<CpuAssignment> CpuAllocator::Allocate(const std::string& owner, int n) {
  if (n < 1) return absl::InvalidArgumentError(absl::StrCat("cannot pin to ", n, " CPUs"));
  if (owners_.contains(owner)) return absl::AlreadyExistsError(absl::StrCat(owner, " already holds CPUs"));
  const CpuSet held = Held();
  const int pool = static_cast<int>(topo_.cpus.size() - held.size());
  // Free cores by node, highest-numbered first.
  std::map<int, std::vector<int>> free_by_node;
  int free_cores = 0, free_cpus = 0;
  for (int i = static_cast<int>(topo_.cores.size()) - 1; i >= 0; --i) {
    const CpuTopology::Core& core = topo_.cores[i];
    if (Intersects(core.cpus, held)) continue;
    free_by_node[core.node].push_back(i);
    ++free_cores;
    free_cpus += static_cast<int>(core.cpus.size());
  }
  // Whole cores from `cores` (in order) until n CPUs; nullopt if they do
  // not reach n or would shrink the shared pool below its minimum.
  auto take = [&](const std::vector<int>& cores) -> std::optional<std::vector<int>> {
    std::vector<int> chosen;
    int cpus = 0;
    for (int i : cores) {
      if (cpus >= n) break;
      chosen.push_back(i);
      cpus += static_cast<int>(topo_.cores[i].cpus.size());
    }
    if (cpus < n || pool - cpus < min_shared_) return std::nullopt;
    return chosen;
  };
  std::optional<std::vector<int>> chosen;
  int best_free = 0;
  for (const auto& [node, cores] : free_by_node) {
    int node_free = 0;
    for (int i : cores) node_free += static_cast<int>(topo_.cores[i].cpus.size());
    std::optional<std::vector<int>> fit = take(cores);
    if (fit && (!chosen || node_free <= best_free)) {  // ties: the later node (node 0 stays shared)
      chosen = std::move(fit);
      best_free = node_free;
    }
  }
  if (!chosen) {
    // Across nodes: the nodes with the most free CPUs first.
    std::vector<std::pair<int, int>> nodes;  // (-free cpus, node)
    for (const auto& [node, cores] : free_by_node) {
      int node_free = 0;
      for (int i : cores) node_free += static_cast<int>(topo_.cores[i].cpus.size());
      nodes.emplace_back(-node_free, node);
    }
    std::sort(nodes.begin(), nodes.end());
    std::vector<int> all;
    for (const auto& [neg, node] : nodes) {
      const std::vector<int>& cores = free_by_node[node];
      all.insert(all.end(), cores.begin(), cores.end());
    }
    chosen = take(all);
  }
  if (!chosen) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "not enough free whole cores for ", n, n == 1 ? " CPU" : " CPUs", ": ", free_cores,
        free_cores == 1 ? " core (" : " cores (", free_cpus, free_cpus == 1 ? " CPU" : " CPUs",
        ") free, and the shared pool keeps at least ", min_shared_, min_shared_ == 1 ? " CPU" : " CPUs"));
  }
  CpuAssignment a;
  // Whole cores first: the cores filled entirely, then the rest of the
  // last one (whose other threads stay idle, held).
  int left = n;
  for (int i : *chosen) {
    const CpuTopology::Core& core = topo_.cores[i];
    a.held.insert(core.cpus.begin(), core.cpus.end());
    a.mems.insert(core.node);
    for (int c : core.cpus) {
      if (left == 0) break;
      a.cpus.insert(c);
      --left;
    }
  }
  owners_[owner] = a;
  return a;
}

absl::Status CpuAllocator::Claim(const std::string& owner, const CpuAssignment& a) {
  if (owners_.contains(owner)) return absl::AlreadyExistsError(absl::StrCat(owner, " already holds CPUs"));
  const CpuSet online = topo_.AllCpus();
  if (a.cpus.empty()) return absl::FailedPreconditionError("no CPUs");
  for (int c : a.cpus) {
    if (!a.held.contains(c)) return absl::FailedPreconditionError(absl::StrCat("CPU ", c, " is not held"));
  }
  for (int c : a.held) {
    if (!online.contains(c)) return absl::FailedPreconditionError(absl::StrCat("CPU ", c, " is not online"));
  }
  // Whole cores only, none shared with another owner.
  for (const CpuTopology::Core& core : topo_.cores) {
    if (Intersects(core.cpus, a.held) && !std::includes(a.held.begin(), a.held.end(), core.cpus.begin(),
                                                        core.cpus.end())) {
      return absl::FailedPreconditionError(
          absl::StrCat("CPUs ", FormatCpuList(a.held), " split the core of CPUs ", FormatCpuList(core.cpus)));
    }
  }
  const CpuSet held = Held();
  if (Intersects(held, a.held)) {
    return absl::FailedPreconditionError(absl::StrCat("CPUs ", FormatCpuList(a.held), " are held by another run"));
  }
  if (static_cast<int>(online.size() - held.size() - a.held.size()) < min_shared_) {
    return absl::FailedPreconditionError(
        absl::StrCat("CPUs ", FormatCpuList(a.held), " would leave the shared pool fewer than ", min_shared_));
  }
  CpuAssignment& mine = owners_[owner] = a;
  mine.mems.clear();  // from this boot's topology, not the record's
  for (int c : a.cpus) mine.mems.insert(topo_.Find(c)->node);
  return absl::OkStatus();
}

void CpuAllocator::Release(const std::string& owner) { owners_.erase(owner); }

}  // namespace herd::agent
