#include "agent/cgroup/interference.h"

#include <dirent.h>

#include <algorithm>
#include <cmath>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/ascii.h"
#include "agent/cgroup/driver.h"

namespace herd::agent {

const char* InterferenceController::LevelName(Level l) {
  switch (l) {
    case Level::kNone: return "none";
    case Level::kThrottle: return "throttle";
    case Level::kEvict: return "evict";
    case Level::kMark: return "mark";
  }
  return "?";
}

InterferenceController::Verdict InterferenceController::Bad(const InterferenceSample& s) const {
  auto pct = [](double share) { return std::llround(share * 100); };
  if (!s.delay_run.empty() && s.runq_delay_share > options_.runq_delay_share) {
    return {absl::StrCat("run ", s.delay_run, " waited for a CPU ", pct(s.runq_delay_share), "% of the time"), true};
  }
  if (!s.slow_run.empty()) {
    return {absl::StrCat("run ", s.slow_run, "'s health check took ", s.slow_ms, " ms, more than its bound"), true};
  }
  if (s.pressure_share > options_.pressure_share) {
    return {absl::StrCat("latency-sensitive runs stalled on CPU ", pct(s.pressure_share), "% of the time"), true};
  }
  if (!s.throttled_run.empty() && s.throttled_share > options_.throttled_share) {
    // Its own quota, not batch, holds it back: squeezing batch keeps room
    // for it, evicting batch would not help.
    return {absl::StrCat("run ", s.throttled_run, " throttled in ", pct(s.throttled_share), "% of its CPU periods"),
            false};
  }
  return {};
}

InterferenceController::Decision InterferenceController::Observe(const InterferenceSample& s) {
  Decision d;
  if (!options_.enabled) return d;
  const int64_t now = s.now_ms;
  const Level was = level_;
  Verdict bad = Bad(s);
  if (!bad.reason.empty()) {
    good_since_ms_ = -1;
    if (bad_since_ms_ < 0) bad_since_ms_ = now;
    reason_ = std::move(bad.reason);
    if (level_ == Level::kNone) {
      if (now - bad_since_ms_ >= options_.detect_ms) {
        level_ = Level::kThrottle;
        throttle_steps_ = 1;
        step_ms_ = now;
      }
    } else if (bad.may_evict && s.batch_busy && now - step_ms_ >= options_.escalate_ms) {
      // Squeezing did not help (or not enough): evict, squeeze harder.
      d.evict_one = true;
      ++evictions_;
      throttle_steps_ = std::min(throttle_steps_ + 1, 6);
      step_ms_ = now;
      level_ = evictions_ >= options_.max_evictions ? Level::kMark : Level::kEvict;
    }
  } else {
    bad_since_ms_ = -1;
    if (good_since_ms_ < 0) good_since_ms_ = now;
    if (level_ != Level::kNone && now - good_since_ms_ >= options_.calm_ms) {
      level_ = static_cast<Level>(static_cast<int>(level_) - 1);
      good_since_ms_ = now;
      step_ms_ = now;
      if (level_ < Level::kMark) evictions_ = 0;
      if (level_ == Level::kThrottle) throttle_steps_ = 1;
      if (level_ == Level::kNone) {
        throttle_steps_ = 0;
        reason_.clear();
      }
    }
  }
  d.level = level_;
  d.changed = level_ != was;
  d.box_factor = level_ == Level::kNone ? 1.0 : std::pow(options_.throttle_factor, throttle_steps_);
  d.reason = reason_;
  return d;
}

int64_t RunQueueDelayNs(const std::vector<pid_t>& pids, int max_threads, const std::string& proc_root) {
  int64_t total = 0;
  int read = 0;
  for (pid_t pid : pids) {
    const std::string dir = absl::StrCat(proc_root, "/", pid, "/task");
    DIR* d = opendir(dir.c_str());
    if (d == nullptr) continue;
    while (dirent* e = readdir(d)) {
      if (e->d_name[0] == '.') continue;
      if (read >= max_threads) break;
      ++read;
      absl::StatusOr<std::string> text = ReadSmallFile(absl::StrCat(dir, "/", e->d_name, "/schedstat"));
      if (!text.ok()) continue;
      std::vector<absl::string_view> f = absl::StrSplit(absl::StripAsciiWhitespace(*text), ' ', absl::SkipEmpty());
      int64_t delay;
      if (f.size() >= 2 && absl::SimpleAtoi(f[1], &delay) && delay > 0) total += delay;
    }
    closedir(d);
    if (read >= max_threads) break;
  }
  return total;
}

}  // namespace herd::agent
