// Interference control for latency-sensitive (LS) runs (issue #16 item 5;
// seed 004's escalation: squeeze offline work, then evict it, then keep
// offline work off the machine). The agent's cgroup extension feeds one
// sample per control interval (CgroupOptions::control_interval_ms); the
// controller answers with a level, and each level adds to the last:
//
//   kNone      batch/ is the batch box (capacity - predicted LS use - margin)
//   kThrottle  the box times throttle_factor, halved again every escalate_ms
//              while interference lasts (down to the 5% floor)
//   kEvict     and one batch run evicted (lowest priority first) every
//              escalate_ms while it lasts
//   kMark      after max_evictions evictions: the machine says so (log,
//              /metrics, `herd machines`); batch keeps being squeezed
//
// A signal is "bad" when any of these is over its threshold in a sample:
//   - run-queue delay: the share of wall time an LS run's threads waited for
//     a CPU (/proc/<pid>/task/<tid>/schedstat, second field), less the time
//     its group was throttled (which the kernel counts as waiting), worst run;
//   - throttling: the share of an LS run's CFS periods in which it was
//     throttled (cpu.stat nr_throttled / nr_periods), worst run. Its own
//     quota throttles it, not batch: this signal squeezes batch (kThrottle)
//     but never evicts;
//   - pressure (cgroup v2 only): the share of wall time some LS task was
//     stalled on CPU (ls/cpu.pressure "some" total);
//   - an LS run's health check that answered slower than its bound.
// Bad for detect_ms escalates to kThrottle; bad for escalate_ms more at any
// level escalates one more (or evicts again) -- only while batch is busy
// (InterferenceSample::batch_busy): evicting idle batch would not help. Calm for calm_ms steps one
// level down. Pure: fed by tests with made-up samples and times.
#pragma once

#include <cstdint>
#include <string>
#include <sys/types.h>
#include <vector>

namespace herd::agent {

struct InterferenceOptions {
  bool enabled = true;
  double runq_delay_share = 0.10;    // 100 ms of waiting for a CPU per second
  double throttled_share = 0.25;     // throttled in a quarter of its periods
  double pressure_share = 0.10;      // v2: some LS task stalled 10% of the time
  int64_t detect_ms = 1'000;
  int64_t escalate_ms = 5'000;
  int64_t calm_ms = 30'000;
  double throttle_factor = 0.5;
  int max_evictions = 3;  // evictions before the machine is marked
  // Batch counts as busy (a possible cause) when batch/ used at least this
  // share of the capacity in the sample (InterferenceSample::batch_busy).
  double batch_busy_share = 0.05;
};

struct InterferenceSample {
  int64_t now_ms = 0;  // monotonic
  // The worst LS run by each signal ("" if none) and its value (0..1).
  std::string delay_run;
  double runq_delay_share = 0;
  std::string throttled_run;
  double throttled_share = 0;
  double pressure_share = -1;  // < 0: unknown (cgroup v1)
  std::string slow_run;        // an LS run whose health check was slower than its bound
  int64_t slow_ms = 0;
  // Whether batch used enough CPU in the sample to be the cause. If not,
  // the interference comes from elsewhere (other LS work, processes Herd
  // does not run): batch is still squeezed, never evicted for it.
  bool batch_busy = true;
};

class InterferenceController {
 public:
  enum class Level { kNone = 0, kThrottle = 1, kEvict = 2, kMark = 3 };
  struct Decision {
    Level level = Level::kNone;
    double box_factor = 1.0;  // multiply the batch box by this
    bool evict_one = false;   // evict the lowest-priority batch run now
    bool changed = false;     // the level moved in this sample
    std::string reason;       // what is bad, e.g. "run r1 waited for a CPU 31% of the time"
  };

  explicit InterferenceController(InterferenceOptions options = {}) : options_(options) {}
  Decision Observe(const InterferenceSample& s);
  Level level() const { return level_; }
  int evictions() const { return evictions_; }
  // Why the level is what it is ("" at kNone).
  const std::string& reason() const { return reason_; }
  static const char* LevelName(Level l);

 private:
  // What is over its threshold in `s` ("" if nothing), and whether
  // evicting batch could help.
  struct Verdict {
    std::string reason;
    bool may_evict = false;
  };
  Verdict Bad(const InterferenceSample& s) const;

  InterferenceOptions options_;
  Level level_ = Level::kNone;
  int64_t bad_since_ms_ = -1;   // start of the current run of bad samples
  int64_t good_since_ms_ = -1;  // start of the current run of good samples
  int64_t step_ms_ = -1;        // when the level last moved or evicted
  int throttle_steps_ = 0;      // halvings at kThrottle and above
  int evictions_ = 0;
  std::string reason_;
};

// The run-queue delay of processes and all their threads so far, in ns
// (/proc/<pid>/task/<tid>/schedstat, second field), at most `max_threads`
// threads read. Threads that went away are missed: callers compare two
// readings of the same set and ignore a fall.
int64_t RunQueueDelayNs(const std::vector<pid_t>& pids, int max_threads = 256,
                        const std::string& proc_root = "/proc");

}  // namespace herd::agent
