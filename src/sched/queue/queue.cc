#include "sched/queue/queue.h"

#include <algorithm>

#include "base/framework_labels.h"
#include "absl/strings/str_cat.h"
#include "base/priority.h"
#include "cell/constraints.h"

namespace herd::sched {

PendingQueue::PendingQueue(const cell::CellState& state, QueueOrder order, uint64_t turn, TaskOrder task_order)
    : state_(state),
      order_(order),
      turn_(turn),
      task_order_(task_order),
      it_(state.pending().begin()),
      end_(state.pending().end()) {
  if (task_order_ == TaskOrder::kLargest) MeasureCell();
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

void PendingQueue::MeasureCell() {
  std::map<std::string, int64_t> with_ext;
  for (const cell::Machine* m : state_.machines()) {
    if (m->state() != v1::Machine::UP) continue;
    ++up_machines_;
    mean_cpu_ += static_cast<double>(m->capacity().cpu_millis);
    mean_mem_ += static_cast<double>(m->capacity().memory_bytes);
    for (const auto& [k, v] : m->capacity().extended) {
      if (v <= 0) continue;
      mean_ext_[k] += static_cast<double>(v);
      ++with_ext[k];
    }
  }
  if (up_machines_ > 0) {
    mean_cpu_ /= up_machines_;
    mean_mem_ /= up_machines_;
  }
  for (auto& [k, v] : mean_ext_) v /= static_cast<double>(with_ext[k]);
}

double PendingQueue::Difficulty(const cell::Task* t) {
  const ResourceVector& r = t->resources();
  auto share = [](int64_t x, double typical) { return typical > 0 ? static_cast<double>(x) / typical : 0.0; };
  double d = std::max(share(r.cpu_millis, mean_cpu_), share(r.memory_bytes, mean_mem_));
  for (const auto& [k, v] : r.extended) {
    auto it = mean_ext_.find(k);
    // No machine has it: nothing can place the task; put it first, it fails fast.
    d = std::max(d, it == mean_ext_.end() ? 1e9 : share(v, it->second));
  }
  // Scarcity: machines in the cell / machines that could ever hold the task
  // (hard constraints, and capacity for each extended resource), counted
  // once per such set in this pass.
  std::string key = cell::HardConstraintKey(t->job()->spec);
  if (key.empty() && r.extended.empty()) return d;
  for (const auto& [k, v] : r.extended) absl::StrAppend(&key, "|", k, "=", v);
  auto [it, added] = homes_.try_emplace(key, 0);
  if (added) {
    for (const cell::Machine* m : state_.machines()) {
      if (m->state() != v1::Machine::UP) continue;
      bool ok = true;
      for (const auto& [k, v] : r.extended) ok = ok && m->capacity().Extended(k) >= v;
      for (const v1::Constraint& c : t->job()->spec.constraints()) {
        if (!ok) break;
        if (!c.soft()) ok = cell::Matches(c, m->attributes());
      }
      it->second += ok;
    }
  }
  const double homes = static_cast<double>(std::max<int64_t>(1, it->second));
  return d * up_machines_ / homes;
}

void PendingQueue::SortHardestFirst(std::vector<const cell::Task*>& tasks) {
  // One key per run of a job's tasks with the same resources (they are
  // adjacent in submission order and equally hard): sorting runs keeps a
  // job's tasks together and costs per job, not per task.
  struct Run {
    double key;
    size_t begin, end;
  };
  std::vector<Run> runs;
  for (size_t i = 0; i < tasks.size();) {
    size_t j = i + 1;
    while (j < tasks.size() && tasks[j]->job() == tasks[i]->job() &&
           tasks[j]->resources() == tasks[i]->resources()) {
      ++j;
    }
    runs.push_back(Run{Difficulty(tasks[i]), i, j});
    i = j;
  }
  if (runs.size() < 2) return;
  std::stable_sort(runs.begin(), runs.end(), [](const Run& a, const Run& b) { return a.key > b.key; });
  std::vector<const cell::Task*> out;
  out.reserve(tasks.size());
  for (const Run& r : runs) out.insert(out.end(), tasks.begin() + r.begin, tasks.begin() + r.end);
  tasks.swap(out);
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
    // A framework's task is placed only by its framework (an accepted
    // offer, docs/frameworks.md): the built-in scheduler leaves it alone.
    if (IsFrameworkTask((*it_)->job()->spec.labels())) continue;
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
  if (task_order_ == TaskOrder::kLargest) {
    for (UserQueue& u : group_) SortHardestFirst(u.tasks);
  }
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

std::vector<const cell::Task*> OrderPending(const cell::CellState& state, uint64_t turn, QueueOrder order,
                                            TaskOrder task_order) {
  PendingQueue q(state, order, turn, task_order);
  std::vector<const cell::Task*> out;
  while (const cell::Task* t = q.Next()) out.push_back(t);
  return out;
}

}  // namespace herd::sched
