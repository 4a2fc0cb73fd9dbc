#include "sched/queue/queue.h"

#include <map>
#include <string>

namespace herd::sched {

std::vector<const cell::Task*> OrderPending(const cell::CellState& state, uint64_t turn) {
  std::vector<const cell::Task*> out;
  out.reserve(state.pending().size());
  auto it = state.pending().begin();
  const auto end = state.pending().end();
  while (it != end) {
    // One priority level: bucket by user, keeping each user's order.
    const int32_t prio = (*it)->priority();
    std::map<std::string, std::vector<const cell::Task*>> by_user;
    for (; it != end && (*it)->priority() == prio; ++it) by_user[(*it)->job->spec.user()].push_back(*it);
    if (by_user.size() == 1) {
      auto& only = by_user.begin()->second;
      out.insert(out.end(), only.begin(), only.end());
      continue;
    }
    std::vector<std::vector<const cell::Task*>*> users;
    for (auto& [u, v] : by_user) users.push_back(&v);
    const size_t n = users.size();
    const size_t start = turn % n;
    std::vector<size_t> next(n, 0);
    size_t left = 0;
    for (auto* v : users) left += v->size();
    while (left > 0) {
      for (size_t k = 0; k < n; ++k) {
        size_t u = (start + k) % n;
        if (next[u] < users[u]->size()) {
          out.push_back((*users[u])[next[u]++]);
          --left;
        }
      }
    }
  }
  return out;
}

}  // namespace herd::sched
