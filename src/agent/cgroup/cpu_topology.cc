#include "agent/cgroup/cpu_topology.h"

#include <filesystem>
#include <map>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "agent/cgroup/driver.h"

namespace herd::agent {
namespace {

namespace fs = std::filesystem;

// The first line of a sysfs file, or nullopt-ish "" with ok=false.
bool ReadLine(const std::string& path, std::string* out) {
  absl::StatusOr<std::string> text = ReadSmallFile(path);
  if (!text.ok()) return false;
  *out = std::string(absl::StripAsciiWhitespace(*text));
  return true;
}

}  // namespace

absl::StatusOr<CpuSet> ParseCpuList(absl::string_view text) {
  CpuSet out;
  text = absl::StripAsciiWhitespace(text);
  if (text.empty()) return out;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    part = absl::StripAsciiWhitespace(part);
    std::pair<absl::string_view, absl::string_view> lh = absl::StrSplit(part, absl::MaxSplits('-', 1));
    int lo, hi;
    if (!absl::SimpleAtoi(lh.first, &lo)) return absl::InvalidArgumentError(absl::StrCat("bad CPU list '", text, "'"));
    hi = lo;
    if (!lh.second.empty() && !absl::SimpleAtoi(lh.second, &hi)) {
      return absl::InvalidArgumentError(absl::StrCat("bad CPU list '", text, "'"));
    }
    if (lo < 0 || hi < lo || hi - lo > 65536) {
      return absl::InvalidArgumentError(absl::StrCat("bad CPU list '", text, "'"));
    }
    for (int c = lo; c <= hi; ++c) out.insert(c);
  }
  return out;
}

std::string FormatCpuList(const CpuSet& cpus) {
  std::vector<std::string> parts;
  for (auto it = cpus.begin(); it != cpus.end();) {
    int lo = *it, hi = lo;
    for (++it; it != cpus.end() && *it == hi + 1; ++it) hi = *it;
    parts.push_back(lo == hi ? absl::StrCat(lo) : absl::StrCat(lo, "-", hi));
  }
  return absl::StrJoin(parts, ",");
}

CpuSet CpuTopology::AllCpus() const {
  CpuSet out;
  for (const Cpu& c : cpus) out.insert(c.id);
  return out;
}

const CpuTopology::Cpu* CpuTopology::Find(int id) const {
  for (const Cpu& c : cpus) {
    if (c.id == id) return &c;
  }
  return nullptr;
}

std::string CpuTopology::Summary() const {
  return absl::StrCat(cores.size(), " cores, ", cpus.size(), " CPUs (", FormatCpuList(AllCpus()), "), ",
                      nodes.size(), nodes.size() == 1 ? " NUMA node" : " NUMA nodes");
}

absl::StatusOr<CpuTopology> ReadCpuTopology(const std::string& sys_root) {
  const std::string cpu_dir = sys_root + "/cpu";
  std::string line;
  if (!ReadLine(cpu_dir + "/online", &line)) {
    return absl::NotFoundError(absl::StrCat("cannot read ", cpu_dir, "/online"));
  }
  absl::StatusOr<CpuSet> online = ParseCpuList(line);
  if (!online.ok()) return online.status();
  if (online->empty()) return absl::NotFoundError(absl::StrCat(cpu_dir, "/online lists no CPU"));

  // NUMA nodes: node/nodeN/cpulist.
  std::map<int, int> node_of;
  std::error_code ec;
  for (fs::directory_iterator it(sys_root + "/node", ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    int node;
    if (name.rfind("node", 0) != 0 || !absl::SimpleAtoi(name.substr(4), &node)) continue;
    if (!ReadLine(it->path().string() + "/cpulist", &line)) continue;
    absl::StatusOr<CpuSet> cpus = ParseCpuList(line);
    if (!cpus.ok()) continue;
    for (int c : *cpus) node_of[c] = node;
  }

  CpuTopology topo;
  // Cores: CPUs with the same (online) thread siblings. Without the file, a
  // CPU is a core of its own.
  std::map<CpuSet, int> core_index;
  for (int id : *online) {
    const std::string topo_dir = absl::StrCat(cpu_dir, "/cpu", id, "/topology");
    CpuSet siblings = {id};
    if (ReadLine(topo_dir + "/thread_siblings_list", &line)) {
      if (absl::StatusOr<CpuSet> s = ParseCpuList(line); s.ok() && s->contains(id)) {
        siblings.clear();
        for (int c : *s) {
          if (online->contains(c)) siblings.insert(c);
        }
      }
    }
    CpuTopology::Cpu cpu;
    cpu.id = id;
    int package = 0;
    if (ReadLine(topo_dir + "/physical_package_id", &line) && absl::SimpleAtoi(line, &package)) cpu.package = package;
    auto node = node_of.find(id);
    cpu.node = node != node_of.end() ? node->second : 0;
    auto [it, added] = core_index.try_emplace(siblings, static_cast<int>(topo.cores.size()));
    if (added) topo.cores.push_back({siblings, cpu.node});
    cpu.core = it->second;
    topo.nodes.insert(cpu.node);
    topo.cpus.push_back(cpu);
  }
  topo.memory_nodes = topo.nodes;
  if (ReadLine(sys_root + "/node/has_memory", &line)) {
    if (absl::StatusOr<CpuSet> mem = ParseCpuList(line); mem.ok() && !mem->empty()) topo.memory_nodes = *mem;
  }
  return topo;
}

}  // namespace herd::agent
