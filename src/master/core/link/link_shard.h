// LinkShard: polls agents (Borg §3.3). Every machine is polled every
// poll_interval and at once when its desired state changes (Kick). A poll
// sends the machine's complete desired state and turns the differences in the
// reply into mutations. A machine that misses `down_after_misses` polls in a
// row is marked DOWN (its tasks go back to PENDING) -- at most a fraction of
// the cell per window, so a network partition does not look like the loss of
// half the cell. A DOWN machine that answers is marked UP again; since its old
// tasks now run elsewhere, its desired state no longer lists them and the
// agent kills them.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "base/clock.h"
#include "master/core/committer.h"
#include "master/core/link/agent_link.h"

namespace herd::master {

class LinkShard {
 public:
  struct Options {
    int64_t poll_interval_ms = 2000;
    int down_after_misses = 3;
    // How long a poll may take: apart from the interval, so an agent busy
    // starting many tasks is not taken for a dead one (a machine is marked
    // down by missed contact: refused connections, or no answer this long).
    int64_t poll_timeout_ms = 10'000;
    int threads = 4;
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
    std::string master_name = "master";
  };

  struct Health {
    int misses = 0;
    int64_t last_ok_ms = 0;  // monotonic
    std::string last_error;
    int64_t polls = 0;
  };

  LinkShard(Committer* committer, AgentLink* link, Clock* clock, Options opts);
  ~LinkShard();

  // Starts polling every machine the cell knows.
  void Start();
  void Stop();
  // Polls `machine` as soon as possible (coalesced); adds it if new.
  void Kick(const std::string& machine);
  // Polls every machine once, in registration order, on the calling thread
  // (the simulator drives the link this way instead of Start()).
  void PollAllOnce();
  std::optional<Health> GetHealth(const std::string& machine) const;

 private:
  struct Entry {
    int64_t due_ms = 0;
    bool in_flight = false;
    bool kicked = false;
    bool up = true;  // as of its last poll
    std::deque<int64_t> downs;  // when it was marked down, within flap_window_ms
    int good_polls = 0;         // answered in a row
    Health health;
  };
  void Worker();
  void PollOne(const std::string& name);
  void Schedule(const std::string& name, Entry& e, int64_t due) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether one more machine may be marked down now (and counts it if so).
  bool MayMarkDown(int64_t now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  Committer* const committer_;
  AgentLink* const link_;
  Clock* const clock_;
  const Options opts_;

  mutable absl::Mutex mu_;
  std::map<std::string, Entry> entries_ ABSL_GUARDED_BY(mu_);
  std::set<std::pair<int64_t, std::string>> due_ ABSL_GUARDED_BY(mu_);
  std::deque<int64_t> downs_ ABSL_GUARDED_BY(mu_);  // times machines were marked down
  bool holding_ ABSL_GUARDED_BY(mu_) = false;       // logged that marking down is held
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> workers_;
};

}  // namespace herd::master
