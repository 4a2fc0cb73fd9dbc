// Time comes in through Clock so the same code runs on wall time (master,
// agent) and on virtual time (tests, the simulator).
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>

namespace herd {

// The machine's clocks, read directly: for code that must use real time
// (deadlines of real I/O, herd-shim, which links nothing of Herd) and for
// RealClock. Everything that can take a Clock* should.
inline int64_t SteadyNowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
inline int64_t WallNowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

class Clock {
 public:
  virtual ~Clock() = default;
  // Wall time, milliseconds since the Unix epoch.
  virtual int64_t NowMs() const = 0;
  // Monotonic time in milliseconds (arbitrary origin).
  virtual int64_t MonotonicMs() const = 0;
};

class RealClock final : public Clock {
 public:
  int64_t NowMs() const override;
  int64_t MonotonicMs() const override;
  static RealClock* Get();
};

// A clock that moves only when told to.
class ManualClock final : public Clock {
 public:
  explicit ManualClock(int64_t start_ms = 1'700'000'000'000) : now_ms_(start_ms), mono_ms_(0) {}
  int64_t NowMs() const override;
  int64_t MonotonicMs() const override;
  void AdvanceMs(int64_t ms);
  void SetNowMs(int64_t ms);

 private:
  mutable std::mutex mu_;
  int64_t now_ms_;
  int64_t mono_ms_;
};

}  // namespace herd
