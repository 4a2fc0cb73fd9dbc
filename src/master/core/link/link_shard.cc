#include "master/core/link/link_shard.h"

#include <cmath>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/log.h"
#include "master/core/link/reconcile.h"

namespace herd::master {
namespace {

// A poll failure in a few words ("connection refused", "no answer within
// 2000ms") rather than the transport's full text.
std::string Summarize(const absl::Status& st, int64_t timeout_ms) {
  std::string msg(st.message());
  if (st.code() == absl::StatusCode::kDeadlineExceeded) return absl::StrCat("no answer within ", timeout_ms, "ms");
  if (absl::StrContains(msg, "Connection refused") || absl::StrContains(msg, "connection refused")) {
    return "connection refused";
  }
  if (msg.size() > 120) msg = msg.substr(0, 117) + "...";
  return msg;
}

}  // namespace

LinkShard::LinkShard(Committer* committer, AgentLink* link, Clock* clock, Options opts)
    : committer_(committer), link_(link), clock_(clock), opts_(std::move(opts)) {}

LinkShard::~LinkShard() { Stop(); }

void LinkShard::Start() {
  std::vector<std::string> names = committer_->Read([](const cell::CellState& s) {
    std::vector<std::string> out;
    for (const cell::Machine* m : s.machines()) out.push_back(m->name());
    return out;
  });
  {
    absl::MutexLock l(&mu_);
    int64_t now = clock_->MonotonicMs();
    for (size_t i = 0; i < names.size(); ++i) {
      Entry& e = entries_[names[i]];
      // Spread the first round over one interval; count the master's start
      // as the last contact so a restart does not mark machines down.
      e.health.last_ok_ms = now;
      Schedule(names[i], e, now + static_cast<int64_t>(opts_.poll_interval_ms * i / std::max<size_t>(1, names.size())));
    }
  }
  for (int i = 0; i < opts_.threads; ++i) workers_.emplace_back([this] { Worker(); });
}

void LinkShard::Stop() {
  {
    absl::MutexLock l(&mu_);
    if (stopping_ && workers_.empty()) return;
    stopping_ = true;
  }
  for (auto& t : workers_) t.join();
  workers_.clear();
}

void LinkShard::Schedule(const std::string& name, Entry& e, int64_t due) {
  due_.erase({e.due_ms, name});
  e.due_ms = due;
  if (!e.in_flight) due_.insert({due, name});
}

void LinkShard::Kick(const std::string& machine) {
  absl::MutexLock l(&mu_);
  auto [it, added] = entries_.try_emplace(machine);
  if (added) it->second.health.last_ok_ms = clock_->MonotonicMs();
  if (it->second.in_flight) {
    it->second.kicked = true;
  } else {
    Schedule(machine, it->second, clock_->MonotonicMs());
  }
}

void LinkShard::PollAllOnce() {
  std::vector<std::string> names = committer_->Read([](const cell::CellState& s) {
    std::vector<std::string> out;
    for (const cell::Machine* m : s.machines()) out.push_back(m->name());
    return out;
  });
  for (const std::string& name : names) {
    {
      absl::MutexLock l(&mu_);
      auto [it, added] = entries_.try_emplace(name);
      if (added) it->second.health.last_ok_ms = clock_->MonotonicMs();
    }
    PollOne(name);
  }
}

std::optional<LinkShard::Health> LinkShard::GetHealth(const std::string& machine) const {
  absl::MutexLock l(&mu_);
  auto it = entries_.find(machine);
  if (it == entries_.end()) return std::nullopt;
  return it->second.health;
}

void LinkShard::Worker() {
  while (true) {
    std::string name;
    {
      absl::MutexLock l(&mu_);
      while (true) {
        if (stopping_) return;
        int64_t now = clock_->MonotonicMs();
        if (!due_.empty() && due_.begin()->first <= now) break;
        int64_t wait = due_.empty() ? 1000 : std::min<int64_t>(1000, due_.begin()->first - now);
        // Wake early if something becomes due sooner (a Kick) or we stop.
        const int64_t earliest = due_.empty() ? INT64_MAX : due_.begin()->first;
        auto sooner = [this, earliest]() { return stopping_ || (!due_.empty() && due_.begin()->first < earliest); };
        mu_.AwaitWithTimeout(absl::Condition(&sooner), absl::Milliseconds(std::max<int64_t>(1, wait)));
      }
      name = due_.begin()->second;
      due_.erase(due_.begin());
      Entry& e = entries_[name];
      e.in_flight = true;
      e.kicked = false;
    }
    PollOne(name);
    absl::MutexLock l(&mu_);
    auto it = entries_.find(name);
    if (it == entries_.end()) continue;
    it->second.in_flight = false;
    int64_t now = clock_->MonotonicMs();
    Schedule(name, it->second, it->second.kicked ? now : now + opts_.poll_interval_ms);
    it->second.kicked = false;
  }
}

bool LinkShard::MayMarkDown(int64_t now) {
  size_t up = 0, failing = 0;
  for (const auto& [name, e] : entries_) {
    if (!e.up) continue;
    ++up;
    failing += e.health.misses > 0;
  }
  if (up > 0 && static_cast<double>(failing) > opts_.hold_above_fraction * static_cast<double>(up)) {
    if (!holding_) {
      HERD_LOG_WARN("{} of {} machines fail their polls: more than {:.0f}% of the cell, so none is marked down "
                    "until most answer again",
                    failing, up, 100 * opts_.hold_above_fraction);
    }
    holding_ = true;
    return false;
  }
  holding_ = false;
  const int64_t window = std::max(opts_.poll_interval_ms * opts_.down_after_misses, opts_.min_down_window_ms);
  while (!downs_.empty() && downs_.front() <= now - window) downs_.pop_front();
  size_t budget = std::max<size_t>(1, static_cast<size_t>(std::floor(opts_.max_down_fraction * entries_.size())));
  if (downs_.size() >= budget) return false;
  downs_.push_back(now);
  return true;
}

void LinkShard::PollOne(const std::string& name) {
  struct Plan {
    bool exists = false;
    bool up = false;
    std::string address;
    v1::PollRequest request;
    absl::flat_hash_set<std::string> sent;
  };
  Plan plan = committer_->Read([&](const cell::CellState& s) {
    Plan p;
    const cell::Machine* m = s.FindMachine(name);
    if (m == nullptr) return p;
    p.exists = true;
    p.up = m->state() == v1::Machine::UP;
    p.address = m->address();
    p.request = BuildPollRequest(s, *m);
    p.request.set_master(opts_.master_name);
    for (const auto& run : p.request.desired()) p.sent.insert(run.run_id());
    return p;
  });
  if (!plan.exists) {
    absl::MutexLock l(&mu_);
    entries_.erase(name);
    return;
  }
  // Never tell an agent about state that could still be lost.
  if (!committer_->WaitDurable(plan.request.revision()).ok()) return;
  absl::StatusOr<v1::PollResponse> resp = link_->Poll(plan.address, plan.request, opts_.poll_timeout_ms);
  if (!resp.ok()) {
    bool mark_down = false;
    int misses;
    {
      absl::MutexLock l(&mu_);
      Entry& e = entries_[name];
      e.up = plan.up;
      Health& h = e.health;
      ++h.polls;
      misses = ++h.misses;
      h.last_error = Summarize(resp.status(), opts_.poll_timeout_ms);
      mark_down = plan.up && misses >= opts_.down_after_misses && MayMarkDown(clock_->MonotonicMs());
      if (mark_down) {
        e.up = false;
        e.downs.push_back(clock_->MonotonicMs());
      }
      e.good_polls = 0;
    }
    if (misses == 1) HERD_LOG_WARN("poll of {} at {} failed: {}", name, plan.address, resp.status().ToString());
    std::string why = Summarize(resp.status(), opts_.poll_timeout_ms);
    if (mark_down) {
      v1::Mutation m;
      m.mutable_machine_down()->set_name(name);
      m.mutable_machine_down()->set_reason(
          absl::StrCat("missed ", misses, " polls: ", why));
      auto st = committer_->CommitEach("master", {m});
      if (st[0].ok()) HERD_LOG_WARN("machine {} marked down after {} missed polls", name, misses);
    }
    return;
  }
  bool stay_down = false;
  int need_polls = 1, flap_downs = 0;
  {
    absl::MutexLock l(&mu_);
    Entry& e = entries_[name];
    Health& h = e.health;
    ++h.polls;
    h.misses = 0;
    ++e.good_polls;
    if (!plan.up) {
      const int64_t now = clock_->MonotonicMs();
      while (!e.downs.empty() && e.downs.front() < now - opts_.flap_window_ms) e.downs.pop_front();
      const int downs = static_cast<int>(e.downs.size());
      need_polls = downs <= 1 ? 1 : std::min<int>(opts_.max_flap_polls, 1 << std::min(downs - 1, 30));
      if (e.good_polls < need_polls) {
        flap_downs = downs;
        stay_down = true;
      }
    }
    e.up = plan.up || !stay_down;
    h.last_ok_ms = clock_->MonotonicMs();
    h.last_error.clear();
  }
  std::vector<v1::Mutation> changes;
  if (stay_down) {
    HERD_LOG_INFO("machine {} answers again but flaps ({} times down in {} min): UP after {} good polls in a row",
                  name, flap_downs, opts_.flap_window_ms / 60000, need_polls);
  } else if (!plan.up) {
    v1::Mutation up;
    up.mutable_machine_up()->set_name(name);
    up.mutable_machine_up()->set_reason("answered a poll");
    changes.push_back(up);
    HERD_LOG_INFO("machine {} is back", name);
  }
  std::vector<v1::Mutation> diff = committer_->Read(
      [&](const cell::CellState& s) { return Reconcile(s, name, plan.sent, *resp, clock_->NowMs()); });
  for (auto& m : diff) changes.push_back(std::move(m));
  if (!changes.empty()) committer_->CommitEach(absl::StrCat("agent:", name), std::move(changes));
}

}  // namespace herd::master
