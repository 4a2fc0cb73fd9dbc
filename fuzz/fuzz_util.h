// Helpers shared by the fuzz targets (fuzz/*_fuzzer.cc). Each target is a
// libFuzzer entry point, LLVMFuzzerTestOneInput; the same source is built
// twice: with clang and -fsanitize=fuzzer,address,undefined by
// fuzz/run_fuzzers.sh, and with the normal build into fuzz_replay_test, which
// renames the entry point (-DLLVMFuzzerTestOneInput=...) and replays the
// seed corpus and every regression input through it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include "absl/strings/string_view.h"

#include "spdlog/spdlog.h"

namespace herd::fuzz {

// No logging: a fuzzer runs its target millions of times.
inline void Quiet() {
  static const bool once = [] {
    spdlog::set_level(spdlog::level::off);
    return true;
  }();
  (void)once;
}

inline absl::string_view AsText(const uint8_t* data, size_t size) {
  return absl::string_view(reinterpret_cast<const char*>(data), size);
}

// A property the code under test promises did not hold: abort, so libFuzzer
// (and the replay test) report the input.
[[noreturn]] inline void Broken(const char* file, int line, const char* what, absl::string_view detail) {
  std::fprintf(stderr, "%s:%d: fuzz property violated: %s\n  %.*s\n", file, line, what,
               static_cast<int>(detail.size() > 2000 ? 2000 : detail.size()), detail.data());
  std::abort();
}

// Reads a fuzz input front to back; past the end, everything reads as 0 and
// empty.
class Bytes {
 public:
  Bytes(const uint8_t* data, size_t size) : p_(data), left_(size) {}
  bool empty() const { return left_ == 0; }
  size_t left() const { return left_; }
  uint8_t U8() {
    if (left_ == 0) return 0;
    --left_;
    return *p_++;
  }
  uint16_t U16() { return static_cast<uint16_t>(U8() | (U8() << 8)); }
  // Up to n bytes (fewer at the end).
  absl::string_view Take(size_t n) {
    if (n > left_) n = left_;
    absl::string_view out(reinterpret_cast<const char*>(p_), n);
    p_ += n;
    left_ -= n;
    return out;
  }

 private:
  const uint8_t* p_;
  size_t left_;
};

}  // namespace herd::fuzz

#define HERD_FUZZ_ASSERT(cond, detail)                                       \
  do {                                                                       \
    if (!(cond)) ::herd::fuzz::Broken(__FILE__, __LINE__, #cond, (detail)); \
  } while (0)
