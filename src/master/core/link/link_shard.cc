#include "master/core/link/link_shard.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/ids.h"
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

void AddRecentRevocations(const cell::CellState& s, int64_t now_ms, v1::PollRequest* req) {
  std::vector<const v1::User*> recent;
  for (const auto& [name, user] : s.users()) {
    if (user.revoked_before_s() > 0 && user.revoked_before_s() * 1000 >= now_ms - kRevocationWindowMs) {
      recent.push_back(&user);
    }
  }
  if (recent.size() > kMaxRevokedPerPoll) {
    std::partial_sort(recent.begin(), recent.begin() + kMaxRevokedPerPoll, recent.end(),
                      [](const v1::User* a, const v1::User* b) { return a->revoked_before_s() > b->revoked_before_s(); });
    recent.resize(kMaxRevokedPerPoll);
  }
  for (const v1::User* user : recent) {
    v1::RevokedUser* r = req->add_revoked();
    r->set_name(user->name());
    r->set_revoked_before_s(user->revoked_before_s());
  }
}

struct LinkShard::Plan {
  std::string name;
  bool up = false;
  std::string address;
  v1::PollRequest request;
  // Every run wanted on the machine at request.revision(), whether the
  // request carries them all or only what changed.
  std::shared_ptr<const absl::flat_hash_set<std::string>> sent;
  // The job version of each run's spec as sent (an in-place update sends
  // a held run again).
  std::shared_ptr<const RunVersions> versions;
  int new_runs = 0;  // runs the agent is handed that it did not hold
  // The machine holds at-most-once tasks; the longest grace period among
  // them (what the agent gives them: 0 means its default).
  bool at_most_once = false;
  int64_t max_grace_ms = 0;
  int64_t timeout_ms = 0;
  int64_t started_ms = 0;  // monotonic, when sent
};

LinkShard::LinkShard(Committer* committer, AgentLink* link, Clock* clock, Options opts)
    : committer_(committer),
      link_(link),
      clock_(clock),
      opts_(std::move(opts)),
      task_lease_ms_(opts_.task_lease_ms > 0 ? opts_.task_lease_ms
                                             : opts_.poll_interval_ms * std::max(1, opts_.down_after_misses)),
      next_lease_token_((static_cast<uint64_t>(std::random_device()()) << 32) ^ std::random_device()()) {}

LinkShard::~LinkShard() { Stop(); }

void LinkShard::SeedFromState() {
  // When the machines that are down went down (Unix ms).
  std::vector<std::pair<std::string, int64_t>> down;
  committer_->Read([&](const cell::CellState& s) {
    for (const cell::Machine* m : s.machines()) {
      if (m->state() == v1::Machine::DOWN && m->state_ms() > 0) down.emplace_back(m->name(), m->state_ms());
    }
    return 0;
  });
  absl::MutexLock l(&mu_);
  if (seeded_) return;
  seeded_ = true;
  // Machines the previous leader marked down count against this window's
  // budget (and their flap history): a failover in the middle of a
  // partition does not start the rate limit afresh.
  const int64_t now = clock_->MonotonicMs();
  const int64_t wall = clock_->NowMs();
  const int64_t window = std::max(opts_.poll_interval_ms * opts_.down_after_misses, opts_.min_down_window_ms);
  std::vector<int64_t> recent;
  for (const auto& [name, at_ms] : down) {
    const int64_t ago = wall - at_ms;
    if (ago < 0) continue;
    if (ago < window) recent.push_back(now - ago);
    if (ago < opts_.flap_window_ms) {
      Entry& e = entries_[name];
      e.health.last_ok_ms = now;  // as for every machine at the start
      e.downs.push_back(now - ago);
    }
  }
  std::sort(recent.begin(), recent.end());
  for (int64_t t : recent) downs_.push_back(t);
}

void LinkShard::Start() {
  SeedFromState();
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
  durable_thread_ = std::thread([this] { DurableLoop(); });
}

void LinkShard::Stop() {
  {
    absl::MutexLock l(&mu_);
    if (stopping_ && workers_.empty()) return;
    stopping_ = true;
  }
  for (auto& t : workers_) t.join();
  workers_.clear();
  if (durable_thread_.joinable()) durable_thread_.join();
  // Nothing may call back into a stopped shard.
  link_->CancelAll();
  absl::MutexLock l(&mu_);
  auto idle = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return outstanding_ == 0; };
  mu_.Await(absl::Condition(&idle));
  completions_.clear();
  awaiting_durable_.clear();
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
  Entry& e = it->second;
  if (e.in_flight) {
    e.kicked = true;
    return;
  }
  // Soon, not now: the rest of a burst (a scheduler pass placing many tasks
  // on this machine, commit after commit) goes in the same poll.
  const int64_t due = clock_->MonotonicMs() + opts_.kick_delay_ms;
  if (added || e.due_ms > due || !due_.contains({e.due_ms, machine})) Schedule(machine, e, due);
}

void LinkShard::PollAllOnce() {
  SeedFromState();
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
      if (it->second.in_flight) continue;
      it->second.in_flight = true;
      ++in_flight_;
    }
    std::shared_ptr<Plan> plan = BuildPlan(name);
    if (plan == nullptr) {
      absl::MutexLock l(&mu_);
      entries_.erase(name);
      --in_flight_;
      continue;
    }
    if (committer_->WaitDurable(plan->request.revision()).ok()) {
      plan->started_ms = clock_->MonotonicMs();
      Finish(*plan, link_->Poll(plan->address, plan->request, plan->timeout_ms));
    }
    absl::MutexLock l(&mu_);
    Done(name);
  }
}

std::optional<LinkShard::Health> LinkShard::GetHealth(const std::string& machine) const {
  absl::MutexLock l(&mu_);
  auto it = entries_.find(machine);
  if (it == entries_.end()) return std::nullopt;
  return it->second.health;
}

LinkShard::Stats LinkShard::GetStats() const {
  Stats st;
  std::vector<float> lat;
  {
    absl::MutexLock l(&mu_);
    st.polls = polls_;
    st.full_polls = full_polls_;
    st.failures = failures_;
    st.in_flight = in_flight_;
    for (const auto& [name, e] : entries_) st.machines_behind += e.health.starts_pending > 0;
    lat = latencies_;
  }
  if (lat.empty()) return st;
  std::sort(lat.begin(), lat.end());
  auto at = [&lat](double p) { return lat[std::min(lat.size() - 1, static_cast<size_t>(p * (lat.size() - 1) + 0.5))]; };
  st.latency_p50_ms = at(0.5);
  st.latency_p99_ms = at(0.99);
  st.latency_max_ms = lat.back();
  return st;
}

void LinkShard::Worker() {
  while (true) {
    std::optional<Completion> done;
    std::string name;
    {
      absl::MutexLock l(&mu_);
      while (true) {
        if (stopping_) return;
        if (!completions_.empty()) break;
        const int64_t now = clock_->MonotonicMs();
        const bool room = in_flight_ < opts_.max_in_flight;
        if (room && !due_.empty() && due_.begin()->first <= now) break;
        const int64_t wait = !room || due_.empty() ? 1000 : std::min<int64_t>(1000, due_.begin()->first - now);
        // Wake early for a reply, for something due sooner (a Kick), or to stop.
        const int64_t earliest = due_.empty() ? INT64_MAX : due_.begin()->first;
        auto sooner = [this, earliest]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
          return stopping_ || !completions_.empty() ||
                 (in_flight_ < opts_.max_in_flight && !due_.empty() && due_.begin()->first < earliest);
        };
        mu_.AwaitWithTimeout(absl::Condition(&sooner), absl::Milliseconds(std::max<int64_t>(1, wait)));
      }
      if (!completions_.empty()) {
        done = std::move(completions_.front());
        completions_.pop_front();
      } else {
        name = due_.begin()->second;
        due_.erase(due_.begin());
        Entry& e = entries_[name];
        e.in_flight = true;
        e.kicked = false;
        ++in_flight_;
      }
    }
    if (done) {
      Finish(*done->plan, done->response);
      absl::MutexLock l(&mu_);
      Done(done->plan->name);
    } else {
      Begin(name);
    }
  }
}

void LinkShard::Done(const std::string& name) {
  --in_flight_;
  auto it = entries_.find(name);
  if (it == entries_.end()) return;
  Entry& e = it->second;
  e.in_flight = false;
  const int64_t now = clock_->MonotonicMs();
  Schedule(name, e, e.kicked ? now + opts_.kick_delay_ms : now + opts_.poll_interval_ms);
  e.kicked = false;
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
      HERD_LOG_WARN(
          "{} of {} machines fail their polls: more than {:.0f}% of the cell, so none is marked down "
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

std::shared_ptr<LinkShard::Plan> LinkShard::BuildPlan(const std::string& name) {
  std::shared_ptr<const RunVersions> acked;
  int64_t acked_revision = 0;
  bool full = true;
  int32_t pending = 0;
  uint64_t lease_ack = 0;
  {
    absl::MutexLock l(&mu_);
    auto it = entries_.find(name);
    if (it != entries_.end()) {
      const Entry& e = it->second;
      acked = e.acked;
      acked_revision = e.acked_revision;
      pending = e.health.starts_pending;
      lease_ack = e.lease_ack;
      full = acked == nullptr || acked_revision == 0 ||
             clock_->MonotonicMs() - e.last_full_ms >= opts_.full_poll_interval_ms;
    }
  }
  auto plan = std::make_shared<Plan>();
  plan->name = name;
  const bool exists = committer_->Read([&](const cell::CellState& s) {
    const cell::Machine* m = s.FindMachine(name);
    if (m == nullptr) return false;
    plan->up = m->state() == v1::Machine::UP;
    plan->address = m->address();
    v1::PollRequest& req = plan->request;
    req.set_machine(name);
    req.set_revision(s.revision());
    req.set_master(opts_.master_name);
    // Every poll renews the machine's lease for at-most-once tasks (to the
    // time the agent received the poll acknowledged here, plus lease_ms).
    req.set_lease_ms(task_lease_ms_);
    uint64_t token;
    do {
      token = next_lease_token_.fetch_add(1);
    } while (token == 0);
    req.set_lease_token(token);
    req.set_lease_ack(lease_ack);
    // Users revoked lately: the agent refuses their grants issued before,
    // and ends the exec and log streams those opened (#33).
    AddRecentRevocations(s, clock_->NowMs(), &req);
    auto sent = std::make_shared<absl::flat_hash_set<std::string>>();
    auto versions = std::make_shared<RunVersions>();
    sent->reserve(m->tasks().size());
    versions->reserve(m->tasks().size());
    for (const cell::Task* t : m->tasks()) {
      const v1::JobSpec& spec = t->job()->SpecAt(t->job_version());
      if (spec.at_most_once()) {
        plan->at_most_once = true;
        plan->max_grace_ms =
            std::max(plan->max_grace_ms, spec.grace_period_ms() > 0 ? spec.grace_period_ms() : kAgentDefaultGraceMs);
      }
      std::string id = RunId(t->job()->id, t->index(), t->incarnation());
      // Held: the agent has this run at this version (else it is new, or
      // changed in place by an update, and is sent).
      bool known = false, held = false;
      if (acked != nullptr) {
        auto it = acked->find(id);
        known = it != acked->end();
        held = known && it->second == t->job_version();
      }
      if (full || !held) *req.add_desired() = BuildTaskRun(s, *t);
      plan->new_runs += !known;
      versions->emplace(id, t->job_version());
      sent->insert(std::move(id));
    }
    if (!full) {
      req.set_delta(true);
      req.set_base_revision(acked_revision);
      for (const auto& [id, version] : *acked) {
        if (!sent->contains(id)) req.add_stop(id);
      }
    }
    plan->sent = std::move(sent);
    plan->versions = std::move(versions);
    return true;
  });
  if (!exists) return nullptr;
  plan->timeout_ms = opts_.poll_timeout_ms + opts_.poll_timeout_per_start_ms * (plan->new_runs + pending);
  return plan;
}

void LinkShard::Begin(const std::string& name) {
  std::shared_ptr<Plan> plan = BuildPlan(name);
  if (plan == nullptr) {
    absl::MutexLock l(&mu_);
    entries_.erase(name);
    --in_flight_;
    return;
  }
  // Never tell an agent about state that could still be lost.
  if (plan->request.revision() > committer_->durable_revision()) {
    absl::MutexLock l(&mu_);
    awaiting_durable_.push_back(std::move(plan));
    return;
  }
  Send(plan);
}

void LinkShard::Send(const std::shared_ptr<Plan>& plan) {
  plan->started_ms = clock_->MonotonicMs();
  {
    absl::MutexLock l(&mu_);
    ++outstanding_;
  }
  link_->PollAsync(plan->address, plan->request, plan->timeout_ms, [this, plan](absl::StatusOr<v1::PollResponse> resp) {
    absl::MutexLock l(&mu_);
    completions_.push_back({plan, std::move(resp)});
    --outstanding_;
  });
}

void LinkShard::DurableLoop() {
  while (true) {
    int64_t wanted = 0;
    {
      absl::MutexLock l(&mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_ || !awaiting_durable_.empty(); };
      mu_.AwaitWithTimeout(absl::Condition(&ready), absl::Seconds(1));
      if (stopping_) return;
      for (const auto& p : awaiting_durable_) wanted = std::max(wanted, p->request.revision());
    }
    if (wanted == 0) continue;
    const bool durable = committer_->WaitDurable(wanted).ok();
    std::vector<std::shared_ptr<Plan>> ready;
    {
      absl::MutexLock l(&mu_);
      for (auto& p : awaiting_durable_) {
        if (p->request.revision() <= wanted) {
          ready.push_back(std::move(p));
        }
      }
      std::erase(awaiting_durable_, nullptr);
      if (!durable) {
        // The store failed (the master is going down): skip these polls.
        for (const auto& p : ready) Done(p->name);
        continue;
      }
    }
    for (const auto& p : ready) Send(p);
  }
}

void LinkShard::Finish(const Plan& plan, const absl::StatusOr<v1::PollResponse>& resp) {
  const std::string& name = plan.name;
  const int64_t now_mono = clock_->MonotonicMs();
  {
    absl::MutexLock l(&mu_);
    ++polls_;
    full_polls_ += !plan.request.delta();
    failures_ += !resp.ok();
    const float ms = static_cast<float>(now_mono - plan.started_ms);
    if (latencies_.size() < kLatencyWindow) {
      latencies_.push_back(ms);
    } else {
      latencies_[latency_next_] = ms;
      latency_next_ = (latency_next_ + 1) % kLatencyWindow;
    }
  }
  if (opts_.on_poll) opts_.on_poll(static_cast<double>(now_mono - plan.started_ms) / 1000.0, resp.ok());
  if (opts_.on_reply && resp.ok()) opts_.on_reply(name, *resp);
  if (resp.ok()) {
    Answered(plan, *resp, now_mono);
  } else {
    Missed(plan, resp.status(), now_mono);
  }
}

// A poll that got no answer: counted as a miss; enough misses in a row
// mark the machine down (at-most-once tasks: once their lease is out).
void LinkShard::Missed(const Plan& plan, const absl::Status& error, int64_t now_mono) {
  const std::string& name = plan.name;
  bool mark_down = false, lease_wait = false;
  int misses;
  int64_t since_ok = 0, hold = 0;
  {
    absl::MutexLock l(&mu_);
    Entry& e = entries_[name];
    e.up = plan.up;
    // What the agent holds is unknown if it applied this poll but the
    // reply was lost; the next delta still builds on what it last said it
    // holds, and an agent that holds something else refuses it and gets
    // everything then. Resetting here instead made every poll of a
    // machine that does not answer a full one -- the whole desired state
    // built, again and again, for nobody.
    Health& h = e.health;
    ++h.polls;
    misses = ++h.misses;
    h.last_error = Summarize(error, plan.timeout_ms);
    // A machine with at-most-once tasks is marked down (and its tasks
    // placed again) only once they have stopped themselves: the agent's
    // lease runs until the time it received the last poll we got a reply
    // to (acknowledged by a later poll's lease_ack) plus the lease. That
    // is before h.last_ok_ms, when we saw that reply, so the lease is out
    // by last_ok_ms + task_lease_ms on any clock running at our rate; the
    // shims then stop their tasks within the grace period, and the
    // margin covers their check interval and the kill. A restarted
    // master counts its start as the last contact (Start), later than
    // any contact the previous one had, so it waits at least as long.
    hold = plan.at_most_once ? task_lease_ms_ + plan.max_grace_ms + kLeaseMarginMs : 0;
    h.lease_hold_ms = hold;
    since_ok = now_mono - h.last_ok_ms;
    const bool missed = plan.up && misses >= opts_.down_after_misses;
    lease_wait = missed && since_ok < hold;
    mark_down = missed && !lease_wait && MayMarkDown(now_mono);
    if (lease_wait && e.lease_wait_logged) lease_wait = false;  // said already
    if (lease_wait) e.lease_wait_logged = true;
    if (mark_down) {
      e.up = false;
      e.downs.push_back(now_mono);
    }
    e.good_polls = 0;
  }
  if (misses == 1) HERD_LOG_WARN("poll of {} at {} failed: {}", name, plan.address, error.ToString());
  if (lease_wait) {
    HERD_LOG_WARN(
        "machine {} missed {} polls but holds at-most-once tasks: it is marked down once their lease "
        "({}ms) and grace period ({}ms) have run out, {}ms after its last contact",
        name, misses, task_lease_ms_, plan.max_grace_ms, hold);
  }
  std::string why = Summarize(error, plan.timeout_ms);
  if (mark_down) {
    v1::Mutation m;
    m.mutable_machine_down()->set_name(name);
    m.mutable_machine_down()->set_reason(
        hold > 0 ? absl::StrCat("missed ", misses, " polls: ", why, "; no contact for ", since_ok,
                                "ms, past its at-most-once tasks' lease and grace period")
                 : absl::StrCat("missed ", misses, " polls: ", why));
    auto st = committer_->CommitEach("master", {m});
    if (st[0].ok()) HERD_LOG_WARN("machine {} marked down after {} missed polls", name, misses);
  }
}

// A poll answered: the machine is up again (unless it flaps), and what the
// agent reports is reconciled with what the cell holds.
void LinkShard::Answered(const Plan& plan, const v1::PollResponse& reply, int64_t now_mono) {
  const std::string& name = plan.name;
  // A full poll is always applied; a delta only by an agent that held its
  // base revision (otherwise it applied nothing, and gets everything now).
  const bool holds = reply.desired_revision() == plan.request.revision();
  const bool applied = !plan.request.delta() || holds;
  bool stay_down = false;
  int need_polls = 1, flap_downs = 0;
  {
    absl::MutexLock l(&mu_);
    Entry& e = entries_[name];
    Health& h = e.health;
    ++h.polls;
    h.full_polls += !plan.request.delta();
    h.misses = 0;
    h.starts_pending = reply.starts_pending();
    h.lease_hold_ms = plan.at_most_once ? task_lease_ms_ + plan.max_grace_ms + kLeaseMarginMs : 0;
    // The next poll acknowledges this one: the agent may then count its
    // lease from when it received it.
    e.lease_ack = plan.request.lease_token();
    e.lease_wait_logged = false;
    ++e.good_polls;
    if (holds) {
      e.acked = plan.versions;
      e.acked_revision = plan.request.revision();
      if (!plan.request.delta()) e.last_full_ms = plan.started_ms;
    } else {
      // An agent that predates deltas (it never says what it holds), or one
      // that lost track (restarted): whole desired states only.
      e.acked = nullptr;
      e.acked_revision = 0;
      if (!applied) e.kicked = true;
    }
    if (!plan.up) {
      while (!e.downs.empty() && e.downs.front() < now_mono - opts_.flap_window_ms) e.downs.pop_front();
      const int downs = static_cast<int>(e.downs.size());
      need_polls = downs <= 1 ? 1 : std::min<int>(opts_.max_flap_polls, 1 << std::min(downs - 1, 30));
      if (e.good_polls < need_polls) {
        flap_downs = downs;
        stay_down = true;
      }
    }
    e.up = plan.up || !stay_down;
    h.last_ok_ms = now_mono;
    h.last_error.clear();
  }
  std::vector<v1::Mutation> changes;
  if (stay_down) {
    HERD_LOG_INFO("machine {} answers again but flaps ({} times down in {} min): UP after {} good polls in a row", name,
                  flap_downs, opts_.flap_window_ms / 60000, need_polls);
  } else if (!plan.up) {
    v1::Mutation up;
    up.mutable_machine_up()->set_name(name);
    up.mutable_machine_up()->set_reason("answered a poll");
    changes.push_back(up);
    HERD_LOG_INFO("machine {} is back", name);
  }
  // What the agent reports of runs it was not given says nothing yet.
  static const absl::flat_hash_set<std::string> kNone;
  const absl::flat_hash_set<std::string>& sent = applied ? *plan.sent : kNone;
  std::vector<v1::Mutation> diff =
      committer_->Read([&](const cell::CellState& s) { return Reconcile(s, name, sent, reply, clock_->NowMs()); });
  for (auto& m : diff) changes.push_back(std::move(m));
  // What the agent reported, it reports again if this were lost: no need
  // to wait for the disk here.
  if (!changes.empty()) committer_->CommitEachNoWait(absl::StrCat("agent:", name), std::move(changes));
}

}  // namespace herd::master
