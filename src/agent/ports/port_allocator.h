// Named ports for task runs: a PortAllocator hands out ports from the
// agent's range so that no two runs ever hold the same port, and skips ports
// something else on the host is bound to.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace herd::agent {

// True if nothing on this host is bound to TCP `port` now: binding it on
// 0.0.0.0 and 127.0.0.1 (and [::] where IPv6 exists) succeeds. Sockets in
// TIME_WAIT do not count (SO_REUSEADDR), since a task's own listener would
// not be refused by them either.
bool TcpPortIsFree(int32_t port);

// Named port -> port number, for one run.
using PortMap = std::map<std::string, int32_t>;

// Thread-safe.
class PortAllocator {
 public:
  // Ports in [min_port, max_port]; `is_free` says whether the host can give
  // a port out right now (tests replace it).
  PortAllocator(int32_t min_port, int32_t max_port, std::function<bool(int32_t)> is_free = TcpPortIsFree);

  // The ports of `owner`: those it already holds, plus a new one for each
  // name it does not hold yet (all of them or none). Ports are taken round
  // robin from after the last one handed out, so a port just released is
  // reused last (its old clients may still be trying it). UNAVAILABLE when
  // the range has too few free ports.
  absl::StatusOr<PortMap> Allocate(const std::string& owner, const std::vector<std::string>& names);

  // Marks ports as held by `owner` (recovery after an agent restart). Ports
  // outside the range are kept as the owner's but never collide with the
  // range. ALREADY_EXISTS if another owner holds one of them (nothing is
  // taken then).
  absl::Status Reserve(const std::string& owner, const PortMap& ports);

  // Frees everything `owner` holds.
  void Release(const std::string& owner);

  // What `owner` holds (empty if nothing).
  PortMap PortsOf(const std::string& owner) const;
  // The owner of `port`, empty if free.
  std::string OwnerOf(int32_t port) const;

  int32_t min_port() const { return min_; }
  int32_t max_port() const { return max_; }
  // Ports of the range held by some owner.
  size_t allocated() const;

 private:
  const int32_t min_, max_;
  const std::function<bool(int32_t)> is_free_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, PortMap> by_owner_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<int32_t, std::string> owner_of_ ABSL_GUARDED_BY(mu_);
  int32_t next_ ABSL_GUARDED_BY(mu_);
};

}  // namespace herd::agent
