#include "harness/netns.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "base/status.h"
#include "harness/harness.h"

namespace herd::harness {
namespace {

// Names of this suite's namespaces and links: "hf<pid>" and more.
constexpr absl::string_view kPrefix = "hf";
// Serializes the picking of a subnet (and the cleanup) among test processes.
constexpr char kLockFile[] = "/run/herd-fault-net.lock";

std::string FindProgram(const std::string& name) {
  for (const char* dir : {"/usr/sbin", "/sbin", "/usr/bin", "/bin"}) {
    std::string p = absl::StrCat(dir, "/", name);
    if (access(p.c_str(), X_OK) == 0) return p;
  }
  return "";
}

const std::string& IpBinary() {
  static const std::string* p = new std::string(FindProgram("ip"));
  return *p;
}

absl::StatusOr<std::string> Ip(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {IpBinary()};
  argv.insert(argv.end(), args.begin(), args.end());
  RunResult r = Run(argv, 20s);
  if (r.exit_code != 0) {
    return absl::InternalError(absl::StrCat("`", Cell::Join(argv), "` failed: ", r.Describe()));
  }
  return r.out;
}

absl::Status IpStatus(const std::vector<std::string>& args) { return Ip(args).status(); }

// The pid in a name "hf<pid>..." (0 if it is not one of ours).
pid_t OwnerPid(absl::string_view name) {
  if (!absl::ConsumePrefix(&name, kPrefix)) return 0;
  size_t n = 0;
  while (n < name.size() && absl::ascii_isdigit(static_cast<unsigned char>(name[n]))) ++n;
  pid_t pid = 0;
  if (n == 0 || n == name.size() || !absl::SimpleAtoi(name.substr(0, n), &pid)) return 0;
  return pid;
}

// Leftovers of `pid`'s network may go: it is this process (a previous
// network of ours that was not torn down) or a process that is gone.
bool Reclaimable(pid_t pid) { return pid > 0 && (pid == getpid() || !ProcessAlive(pid)); }

void KillNamespaceProcesses(const std::string& netns) {
  absl::StatusOr<std::string> pids = Ip({"netns", "pids", netns});
  if (!pids.ok()) return;
  for (absl::string_view line : absl::StrSplit(*pids, '\n', absl::SkipWhitespace())) {
    pid_t pid = 0;
    if (absl::SimpleAtoi(absl::StripAsciiWhitespace(line), &pid) && pid > 1 && pid != getpid()) kill(pid, SIGKILL);
  }
}

// Deletes the namespaces, links and bridges of dead test processes (and our
// own from before).
void DeleteLeftovers() {
  if (absl::StatusOr<std::string> list = Ip({"netns", "list"}); list.ok()) {
    for (absl::string_view line : absl::StrSplit(*list, '\n', absl::SkipWhitespace())) {
      std::string name(line.substr(0, line.find(' ')));
      if (!Reclaimable(OwnerPid(name))) continue;
      KillNamespaceProcesses(name);
      (void)IpStatus({"netns", "del", name});
    }
  }
  if (absl::StatusOr<std::string> links = Ip({"-o", "link", "show"}); links.ok()) {
    for (absl::string_view line : absl::StrSplit(*links, '\n', absl::SkipWhitespace())) {
      // "7: hf123v0@if2: <BROADCAST,..."
      std::vector<absl::string_view> f = absl::StrSplit(line, absl::MaxSplits(": ", 2));
      if (f.size() < 2) continue;
      std::string name(f[1].substr(0, f[1].find('@')));
      if (Reclaimable(OwnerPid(name))) (void)IpStatus({"link", "del", name});
    }
  }
}

// The N of every 10.77.N.0/24 some interface of the root namespace is on.
std::set<int> SubnetsInUse() {
  std::set<int> used;
  absl::StatusOr<std::string> addrs = Ip({"-o", "-4", "addr", "show"});
  if (!addrs.ok()) return used;
  for (absl::string_view word : absl::StrSplit(*addrs, absl::ByAnyChar(" \t\n"), absl::SkipEmpty())) {
    if (!absl::ConsumePrefix(&word, "10.77.")) continue;
    int n = 0;
    if (absl::SimpleAtoi(word.substr(0, word.find('.')), &n)) used.insert(n);
  }
  return used;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Network>> Network::Create() {
  if (geteuid() != 0) {
    return absl::FailedPreconditionError(
        "the fault suite builds real network partitions (network namespaces, veth pairs, a bridge): it must run "
        "as root");
  }
  if (IpBinary().empty()) return absl::FailedPreconditionError("`ip` (iproute2) is not installed");
  if (FindProgram("nsenter").empty()) return absl::FailedPreconditionError("`nsenter` (util-linux) is not installed");
  int lock = open(kLockFile, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lock < 0 || flock(lock, LOCK_EX) != 0) {
    if (lock >= 0) close(lock);
    return absl::InternalError(absl::StrCat("cannot lock ", kLockFile, ": ", strerror(errno)));
  }
  DeleteLeftovers();
  const std::string prefix = absl::StrCat(kPrefix, getpid());
  const std::set<int> used = SubnetsInUse();
  int subnet = -1;
  for (int k = 0; k < 250 && subnet < 0; ++k) {
    int n = 1 + (getpid() + k) % 250;
    if (!used.contains(n)) subnet = n;
  }
  absl::Status st = subnet < 0 ? absl::ResourceExhaustedError("every 10.77.N.0/24 is in use") : absl::OkStatus();
  const std::string bridge = prefix + "b";
  const std::string gateway = absl::StrCat("10.77.", subnet, ".1");
  if (st.ok()) st = IpStatus({"link", "add", bridge, "type", "bridge"});
  if (st.ok()) st = IpStatus({"addr", "add", gateway + "/24", "dev", bridge});
  if (st.ok()) st = IpStatus({"link", "set", bridge, "up"});
  close(lock);
  if (!st.ok()) {
    (void)IpStatus({"link", "del", bridge});
    return absl::Status(st.code(), absl::StrCat("cannot build the test network (namespaces on a bridge): ",
                                                st.message()));
  }
  return std::unique_ptr<Network>(new Network(prefix, bridge, gateway, subnet));
}

Network::~Network() {
  for (const std::string& name : order_) {
    const Host& h = hosts_.at(name);
    KillNamespaceProcesses(h.netns);
    (void)IpStatus({"netns", "del", h.netns});
    (void)IpStatus({"link", "del", h.veth});
  }
  (void)IpStatus({"link", "del", bridge_});
}

absl::StatusOr<const Network::Host*> Network::AddHost(const std::string& name) {
  if (hosts_.contains(name)) return absl::AlreadyExistsError("host " + name + " exists");
  const int k = static_cast<int>(order_.size());
  if (k >= 200) return absl::ResourceExhaustedError("at most 200 hosts");
  Host h{name, absl::StrCat(prefix_, "-", name), absl::StrCat("10.77.", subnet_, ".", 10 + k),
         absl::StrCat(prefix_, "v", k)};
  // Registered first, so that the destructor deletes whatever part was made.
  hosts_[name] = h;
  order_.push_back(name);
  for (const std::vector<std::string>& cmd : std::vector<std::vector<std::string>>{
           {"netns", "add", h.netns},
           {"link", "add", h.veth, "type", "veth", "peer", "name", "eth0", "netns", h.netns},
           {"link", "set", h.veth, "master", bridge_},
           {"link", "set", h.veth, "up"},
           {"-n", h.netns, "addr", "add", h.ip + "/24", "dev", "eth0"},
           {"-n", h.netns, "link", "set", "eth0", "up"},
           {"-n", h.netns, "link", "set", "lo", "up"}}) {
    if (absl::Status st = IpStatus(cmd); !st.ok()) return st;
  }
  return &hosts_.at(name);
}

std::vector<std::string> Network::Wrapper(const Host& h) {
  return {FindProgram("nsenter"), "--net=/run/netns/" + h.netns, "--"};
}

absl::Status Network::Cut(const std::string& name) {
  auto it = hosts_.find(name);
  if (it == hosts_.end()) return absl::NotFoundError("no host " + name);
  HERD_RETURN_IF_ERROR(IpStatus({"link", "set", it->second.veth, "down"}));
  cut_[name] = true;
  return absl::OkStatus();
}

absl::Status Network::Heal(const std::string& name) {
  auto it = hosts_.find(name);
  if (it == hosts_.end()) return absl::NotFoundError("no host " + name);
  HERD_RETURN_IF_ERROR(IpStatus({"link", "set", it->second.veth, "up"}));
  cut_.erase(name);
  return absl::OkStatus();
}

absl::Status Network::Block(const std::string& a, const std::string& b) {
  if (!hosts_.contains(a) || !hosts_.contains(b)) return absl::NotFoundError("no host " + a + " or " + b);
  const Host& ha = hosts_.at(a);
  const Host& hb = hosts_.at(b);
  HERD_RETURN_IF_ERROR(IpStatus({"-n", ha.netns, "route", "add", "blackhole", hb.ip + "/32"}));
  blocks_.emplace_back(a, b);
  HERD_RETURN_IF_ERROR(IpStatus({"-n", hb.netns, "route", "add", "blackhole", ha.ip + "/32"}));
  return absl::OkStatus();
}

absl::Status Network::Unblock(const std::string& a, const std::string& b) {
  auto it = std::find(blocks_.begin(), blocks_.end(), std::make_pair(a, b));
  if (it == blocks_.end()) return absl::NotFoundError("no block between " + a + " and " + b);
  blocks_.erase(it);
  const Host& ha = hosts_.at(a);
  const Host& hb = hosts_.at(b);
  absl::Status s1 = IpStatus({"-n", ha.netns, "route", "del", "blackhole", hb.ip + "/32"});
  absl::Status s2 = IpStatus({"-n", hb.netns, "route", "del", "blackhole", ha.ip + "/32"});
  return s1.ok() ? s2 : s1;
}

absl::Status Network::HealAll() {
  absl::Status first;
  std::vector<std::string> cut;
  for (const auto& [name, c] : cut_) cut.push_back(name);
  for (const std::string& name : cut) {
    if (absl::Status st = Heal(name); !st.ok() && first.ok()) first = st;
  }
  while (!blocks_.empty()) {
    auto [a, b] = blocks_.back();
    if (absl::Status st = Unblock(a, b); !st.ok() && first.ok()) first = st;
  }
  return first;
}

}  // namespace herd::harness
