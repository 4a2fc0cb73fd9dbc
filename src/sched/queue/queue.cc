#include "sched/queue/queue.h"

#include <algorithm>

#include "base/priority.h"

namespace herd::sched {

PendingQueue::PendingQueue(const cell::CellState& state, QueueOrder order, uint64_t turn)
    : state_(state), order_(order), turn_(turn), it_(state.pending().begin()), end_(state.pending().end()) {
  if (order_ == QueueOrder::kDrf) {
    for (const cell::Machine* m : state.machines()) {
      if (m->state() != v1::Machine::UP) continue;
      capacity_ += m->capacity();
      for (const cell::Task* t : m->tasks()) {
        if (t->in_alloc()) continue;  // its alloc holds it
        held_[{t->job()->spec.user(), static_cast<int>(BandOf(t->priority()))}] += t->resources();
      }
    }
  }
}

double PendingQueue::DominantShare(const ResourceVector& a) const {
  auto share = [](int64_t x, int64_t cap) { return cap > 0 ? static_cast<double>(x) / static_cast<double>(cap) : 0.0; };
  double s = std::max(share(a.cpu_millis, capacity_.cpu_millis), share(a.memory_bytes, capacity_.memory_bytes));
  s = std::max(s, share(a.disk_bytes, capacity_.disk_bytes));
  for (const auto& [k, v] : a.extended) s = std::max(s, share(v, capacity_.Extended(k)));
  return s;
}

void PendingQueue::LoadGroup() {
  group_.clear();
  cursor_ = 0;
  left_ = 0;
  last_ = nullptr;
  if (it_ == end_) return;
  const int32_t prio = (*it_)->priority();
  std::map<std::string, size_t> index;
  for (; it_ != end_ && (*it_)->priority() == prio; ++it_) {
    const std::string& user = (*it_)->job()->spec.user();
    auto [pos, added] = index.try_emplace(user, group_.size());
    if (added) {
      group_.push_back(UserQueue{user, {}, 0, {}, 0});
    }
    group_[pos->second].tasks.push_back(*it_);
    ++left_;
  }
  // Users in name order (the map's), deterministic; then rotate the start.
  std::sort(group_.begin(), group_.end(), [](const UserQueue& a, const UserQueue& b) { return a.user < b.user; });
  if (!group_.empty()) cursor_ = turn_ % group_.size();
  if (order_ == QueueOrder::kDrf) {
    int band = static_cast<int>(BandOf(prio));
    for (UserQueue& u : group_) {
      auto h = held_.find({u.user, band});
      if (h != held_.end()) u.alloc = h->second;
      u.share = DominantShare(u.alloc);
    }
  }
}

const cell::Task* PendingQueue::Next() {
  while (left_ == 0) {
    if (it_ == end_) return nullptr;
    LoadGroup();
  }
  UserQueue* pick = nullptr;
  if (order_ == QueueOrder::kDrf) {
    for (UserQueue& u : group_) {
      if (u.done()) continue;
      if (pick == nullptr || u.share < pick->share) pick = &u;  // ties: name order
    }
  } else {
    for (size_t k = 0; k < group_.size(); ++k) {
      UserQueue& u = group_[(cursor_ + k) % group_.size()];
      if (!u.done()) {
        pick = &u;
        cursor_ = (cursor_ + k + 1) % group_.size();
        break;
      }
    }
  }
  --left_;
  last_ = pick;
  return pick->tasks[pick->next++];
}

void PendingQueue::Placed(const cell::Task* t, const ResourceVector& r) {
  if (order_ != QueueOrder::kDrf || last_ == nullptr) return;
  last_->alloc += r;
  last_->share = DominantShare(last_->alloc);
  held_[{last_->user, static_cast<int>(BandOf(t->priority()))}] = last_->alloc;
}

std::vector<const cell::Task*> OrderPending(const cell::CellState& state, uint64_t turn, QueueOrder order) {
  PendingQueue q(state, order, turn);
  std::vector<const cell::Task*> out;
  while (const cell::Task* t = q.Next()) out.push_back(t);
  return out;
}

}  // namespace herd::sched
