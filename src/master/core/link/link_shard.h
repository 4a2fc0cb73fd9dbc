// LinkShard: polls agents (Borg §3.3). Every machine is polled every
// poll_interval and at once when its desired state changes (Kick). Polls are
// asynchronous (AgentLink::PollAsync): a few threads keep up to
// max_in_flight polls going, so a slow agent holds up nobody else. A poll
// carries what changed in the machine's desired state since the revision
// the agent acknowledged (a delta), and the whole of it the first time,
// when the agent lost track, and every full_poll_interval_ms (reconciling
// whatever a delta could have missed); the master turns the differences in
// the reply into mutations. A machine that misses `down_after_misses` polls in a
// row is marked DOWN (its tasks go back to PENDING) -- at most a fraction of
// the cell per window, so a network partition does not look like the loss of
// half the cell. A DOWN machine that answers is marked UP again; since its old
// tasks now run elsewhere, its desired state no longer lists them and the
// agent kills them.
//
// At-most-once jobs (JobSpec.at_most_once): every poll also renews the
// machine's lease (PollRequest.lease_ms, lease_token, lease_ack), and the
// agent's herd-shims stop such tasks once it has run out. A machine holding
// any of them is marked down only after task_lease_ms plus the longest grace
// period among them plus kLeaseMarginMs have passed since its last contact,
// so their replacements start only after they have stopped themselves.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "base/clock.h"
#include "master/core/committer.h"
#include "master/core/link/agent_link.h"
#include "pki/grant.h"

namespace herd::master {

// Users revoked lately go to the agents on every poll (PollRequest.revoked),
// so they refuse those users' grants issued before and end the exec and log
// streams those opened (#33): every user whose revoked_before_s is within an
// access grant's validity and a margin for clocks, at most the latest
// kMaxRevokedPerPoll (past that, a grant of an older revocation lives out
// its validity).
inline constexpr int64_t kRevocationWindowMs = pki::kGrantValidMs + 60'000;
inline constexpr size_t kMaxRevokedPerPoll = 256;
void AddRecentRevocations(const cell::CellState& s, int64_t now_ms, v1::PollRequest* req);

class LinkShard {
 public:
  struct Options {
    int64_t poll_interval_ms = 2000;
    int down_after_misses = 3;
    // How long a poll may take: apart from the interval, so an agent busy
    // starting many tasks is not taken for a dead one (a machine is marked
    // down by missed contact: refused connections, or no answer this long).
    int64_t poll_timeout_ms = 10'000;
    // A poll that hands the agent new runs may take this much longer per
    // run (and per start the agent said it still has to make): the deadline
    // follows the work in flight, not just the interval.
    int64_t poll_timeout_per_start_ms = 5;
    // A machine whose desired state changed (Kick) is polled this soon after,
    // so a burst of changes to it goes in one poll.
    int64_t kick_delay_ms = 10;
    int threads = 4;
    // Polls in flight at once, over all machines.
    int max_in_flight = 2048;
    // How often a machine gets its whole desired state rather than a delta.
    int64_t full_poll_interval_ms = 60'000;
    // At most this fraction of the cell's machines (at least one) is marked
    // down per down window: poll_interval * down_after_misses, and never
    // less than min_down_window_ms (so a 3-machine cell loses at most one
    // machine a minute, not all three in 12 s).
    double max_down_fraction = 0.1;
    int64_t min_down_window_ms = 60'000;
    // While more than this share of the machines that are up fail their
    // polls, none is marked down: the master cannot reach most of the cell,
    // which is a partition or the master's own trouble, and moving the work
    // has nowhere to go (Kubernetes stops evictions in a fully disrupted zone
    // for the same reason).
    double hold_above_fraction = 0.5;
    // Flapping: a machine marked down k > 1 times within flap_window_ms must
    // answer min(2^(k-1), max_flap_polls) polls in a row before it is UP
    // again (and gets work), instead of the first answer.
    int64_t flap_window_ms = 30 * 60 * 1000;
    int max_flap_polls = 16;
    // The machines' lease for at-most-once tasks: they stop themselves this
    // long after the master's last contact with their machine (0: the time
    // a machine is given before it is marked down, poll_interval_ms *
    // down_after_misses).
    int64_t task_lease_ms = 0;
    std::string master_name = "master";
    // For metrics (null: none): each poll's round trip in seconds (send to
    // reply or failure, at the clock's millisecond resolution) and whether
    // it was answered. Called on a link thread, without the shard's lock.
    std::function<void(double seconds, bool answered)> on_poll;
    // Each answered poll's reply (the history's usage; null: none). Called
    // on a link thread, without the shard's lock: keep it cheap.
    std::function<void(const std::string& machine, const v1::PollResponse& reply)> on_reply;
  };
  // Beyond the lease and the grace period, before a machine holding
  // at-most-once tasks is marked down: for the shim's check interval, the
  // kill itself, and clocks that run at slightly different rates.
  static constexpr int64_t kLeaseMarginMs = 1000;
  // The grace period the agent gives a run that asks for none (its
  // Supervisor's default_grace_period_ms).
  static constexpr int64_t kAgentDefaultGraceMs = 10'000;

  struct Health {
    int misses = 0;
    int64_t last_ok_ms = 0;  // monotonic
    std::string last_error;
    // Holds at-most-once tasks: not marked down before this long after
    // last_ok_ms (the lease, their longest grace period and the margin); 0
    // when it holds none. As of its last poll.
    int64_t lease_hold_ms = 0;
    int64_t polls = 0;
    int64_t full_polls = 0;  // of which carried the whole desired state
    // Starts the agent said it still had to make (it is behind, not dead).
    int32_t starts_pending = 0;
  };

  // The whole shard's figures (for GetCell and benchmarks).
  struct Stats {
    int64_t polls = 0;
    int64_t full_polls = 0;
    int64_t failures = 0;
    int32_t in_flight = 0;
    int32_t machines_behind = 0;  // with starts pending
    // Poll round trips (send to reply, the agent's work included) over the
    // last kLatencyWindow polls.
    double latency_p50_ms = 0;
    double latency_p99_ms = 0;
    double latency_max_ms = 0;
  };
  static constexpr size_t kLatencyWindow = 10'000;

  LinkShard(Committer* committer, AgentLink* link, Clock* clock, Options opts);
  ~LinkShard();

  // Options::task_lease_ms, or its default.
  int64_t task_lease_ms() const { return task_lease_ms_; }

  // Starts polling every machine the cell knows.
  void Start();
  void Stop();
  // Polls `machine` as soon as possible (coalesced); adds it if new.
  void Kick(const std::string& machine);
  // Polls every machine once, in registration order, on the calling thread
  // (the simulator drives the link this way instead of Start()).
  void PollAllOnce();
  std::optional<Health> GetHealth(const std::string& machine) const;
  Stats GetStats() const;

 private:
  // Once, before the first poll: the down-marking budget and flap history
  // from the machines the cell says went down recently (under an earlier
  // leader), by their state_ms.
  void SeedFromState();
  struct Plan;
  // Run id -> the job version of the spec sent for it.
  using RunVersions = absl::flat_hash_map<std::string, int64_t>;
  struct Entry {
    int64_t due_ms = 0;
    bool in_flight = false;
    bool kicked = false;
    bool up = true;  // as of its last poll
    std::deque<int64_t> downs;  // when it was marked down, within flap_window_ms
    int good_polls = 0;         // answered in a row
    Health health;
    // The desired state the agent holds (0: none we know of; the next poll
    // is full) and its runs, with the job version of each one's spec.
    int64_t acked_revision = 0;
    std::shared_ptr<const RunVersions> acked;
    int64_t last_full_ms = 0;  // monotonic
    // The lease token of the last poll whose reply came back: the next
    // poll acknowledges it (PollRequest.lease_ack).
    uint64_t lease_ack = 0;
    bool lease_wait_logged = false;  // said that it waits for the lease
  };
  struct Completion {
    std::shared_ptr<Plan> plan;
    absl::StatusOr<v1::PollResponse> response;
  };
  void Worker();
  // Builds the request for one machine (nullptr: the machine is gone).
  std::shared_ptr<Plan> BuildPlan(const std::string& name);
  // Builds one poll and sends it once what it says is durable (at once, or
  // from the durability thread); its completion is queued for a worker.
  void Begin(const std::string& name);
  void Send(const std::shared_ptr<Plan>& plan);
  // Sends the plans that wait for their revision to be durable, a group
  // commit at a time, so no worker ever waits on the disk.
  void DurableLoop();
  // Handles a poll's reply or failure.
  void Finish(const Plan& plan, const absl::StatusOr<v1::PollResponse>& resp);
  void Missed(const Plan& plan, const absl::Status& error, int64_t now_mono);
  void Answered(const Plan& plan, const v1::PollResponse& reply, int64_t now_mono);
  // The entry is no longer in flight; schedules its next poll.
  void Done(const std::string& name) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Schedule(const std::string& name, Entry& e, int64_t due) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether one more machine may be marked down now (and counts it if so).
  bool MayMarkDown(int64_t now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  Committer* const committer_;
  AgentLink* const link_;
  Clock* const clock_;
  const Options opts_;
  const int64_t task_lease_ms_;
  // Lease tokens: a random start, then counting (unique per poll; never 0).
  std::atomic<uint64_t> next_lease_token_;

  mutable absl::Mutex mu_;
  std::map<std::string, Entry> entries_ ABSL_GUARDED_BY(mu_);
  std::set<std::pair<int64_t, std::string>> due_ ABSL_GUARDED_BY(mu_);
  std::deque<int64_t> downs_ ABSL_GUARDED_BY(mu_);  // times machines were marked down
  bool seeded_ ABSL_GUARDED_BY(mu_) = false;
  bool holding_ ABSL_GUARDED_BY(mu_) = false;       // logged that marking down is held
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::deque<Completion> completions_ ABSL_GUARDED_BY(mu_);
  std::vector<std::shared_ptr<Plan>> awaiting_durable_ ABSL_GUARDED_BY(mu_);
  std::thread durable_thread_;
  int in_flight_ ABSL_GUARDED_BY(mu_) = 0;  // begun, not yet finished
  int outstanding_ ABSL_GUARDED_BY(mu_) = 0;  // PollAsync not yet called back
  // Counters and the last kLatencyWindow round trips (a ring).
  int64_t polls_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t full_polls_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t failures_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<float> latencies_ ABSL_GUARDED_BY(mu_);
  size_t latency_next_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::thread> workers_;
};

}  // namespace herd::master
