#include "base/clock.h"

namespace herd {

int64_t RealClock::NowMs() const { return WallNowMs(); }

int64_t RealClock::MonotonicMs() const { return SteadyNowMs(); }

RealClock* RealClock::Get() {
  static RealClock clock;
  return &clock;
}

int64_t ManualClock::NowMs() const {
  std::lock_guard l(mu_);
  return now_ms_;
}

int64_t ManualClock::MonotonicMs() const {
  std::lock_guard l(mu_);
  return mono_ms_;
}

void ManualClock::AdvanceMs(int64_t ms) {
  std::lock_guard l(mu_);
  now_ms_ += ms;
  mono_ms_ += ms;
}

void ManualClock::SetNowMs(int64_t ms) {
  std::lock_guard l(mu_);
  now_ms_ = ms;
}

}  // namespace herd
