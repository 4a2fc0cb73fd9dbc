#include "agent/ports/port_allocator.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace herd::agent {
namespace {

// EADDRINUSE means taken; any other failure (no IPv6, say) says nothing.
bool CanBind(int family, int32_t port, bool loopback) {
  int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return true;
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  int rc;
  if (family == AF_INET) {
    struct sockaddr_in addr = {};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(loopback ? INADDR_LOOPBACK : INADDR_ANY);
    rc = bind(fd, reinterpret_cast<struct sockaddr*>(&addr), sizeof(addr));
  } else {
    struct sockaddr_in6 addr = {};
    addr.sin6_family = AF_INET6;
    addr.sin6_port = htons(static_cast<uint16_t>(port));
    addr.sin6_addr = loopback ? in6addr_loopback : in6addr_any;
    rc = bind(fd, reinterpret_cast<struct sockaddr*>(&addr), sizeof(addr));
  }
  int err = errno;
  close(fd);
  return rc == 0 || err != EADDRINUSE;
}

}  // namespace

bool TcpPortIsFree(int32_t port) {
  // 0.0.0.0 conflicts with any IPv4 listener; 127.0.0.1 as well in case
  // something bound the loopback with SO_REUSEADDR; [::] catches IPv6 (and
  // dual-stack) listeners.
  return CanBind(AF_INET, port, false) && CanBind(AF_INET, port, true) && CanBind(AF_INET6, port, false);
}

PortAllocator::PortAllocator(int32_t min_port, int32_t max_port, std::function<bool(int32_t)> is_free)
    : min_(min_port), max_(max_port), is_free_(std::move(is_free)), next_(min_port) {}

absl::StatusOr<PortMap> PortAllocator::Allocate(const std::string& owner, const std::vector<std::string>& names) {
  absl::MutexLock l(&mu_);
  PortMap ports;
  if (auto it = by_owner_.find(owner); it != by_owner_.end()) ports = it->second;
  std::vector<std::string> missing;
  for (const std::string& name : names) {
    if (!ports.contains(name) && std::find(missing.begin(), missing.end(), name) == missing.end()) {
      missing.push_back(name);
    }
  }
  if (missing.empty()) return ports;
  const int64_t range = max_ >= min_ ? int64_t{max_} - min_ + 1 : 0;
  std::vector<int32_t> picked;
  int32_t busy = 0;
  int32_t p = next_;
  for (int64_t tried = 0; tried < range && picked.size() < missing.size(); ++tried) {
    if (p < min_ || p > max_) p = min_;
    int32_t candidate = p++;
    if (owner_of_.contains(candidate)) continue;
    // The bind test runs under mu_: a few syscalls per port, and keeping
    // the lock makes the test and the take one step.
    if (!is_free_(candidate)) {
      ++busy;
      continue;
    }
    picked.push_back(candidate);
  }
  if (picked.size() < missing.size()) {
    return absl::UnavailableError(absl::StrCat("no free port for ", absl::StrJoin(missing, ", "), " in [", min_, ", ",
                                               max_, "]: ", owner_of_.size(), " held by tasks, ", busy,
                                               " in use by other programs"));
  }
  next_ = p > max_ ? min_ : p;
  PortMap& held = by_owner_[owner];
  for (size_t i = 0; i < missing.size(); ++i) {
    held[missing[i]] = picked[i];
    owner_of_[picked[i]] = owner;
  }
  return held;
}

absl::Status PortAllocator::Reserve(const std::string& owner, const PortMap& ports) {
  absl::MutexLock l(&mu_);
  for (const auto& [name, port] : ports) {
    auto it = owner_of_.find(port);
    if (it != owner_of_.end() && it->second != owner) {
      return absl::AlreadyExistsError(absl::StrCat("port ", port, " (", name, ") is already held by ", it->second));
    }
  }
  PortMap& held = by_owner_[owner];
  for (const auto& [name, port] : ports) {
    if (auto old = held.find(name); old != held.end() && old->second != port) owner_of_.erase(old->second);
    held[name] = port;
    owner_of_[port] = owner;
  }
  return absl::OkStatus();
}

void PortAllocator::Release(const std::string& owner) {
  absl::MutexLock l(&mu_);
  auto it = by_owner_.find(owner);
  if (it == by_owner_.end()) return;
  for (const auto& [name, port] : it->second) {
    auto o = owner_of_.find(port);
    if (o != owner_of_.end() && o->second == owner) owner_of_.erase(o);
  }
  by_owner_.erase(it);
}

PortMap PortAllocator::PortsOf(const std::string& owner) const {
  absl::MutexLock l(&mu_);
  auto it = by_owner_.find(owner);
  return it == by_owner_.end() ? PortMap{} : it->second;
}

std::string PortAllocator::OwnerOf(int32_t port) const {
  absl::MutexLock l(&mu_);
  auto it = owner_of_.find(port);
  return it == owner_of_.end() ? std::string() : it->second;
}

size_t PortAllocator::allocated() const {
  absl::MutexLock l(&mu_);
  size_t n = 0;
  for (const auto& [port, owner] : owner_of_) n += port >= min_ && port <= max_;
  return n;
}

}  // namespace herd::agent
