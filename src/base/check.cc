#include "base/check.h"

#include <cstdio>
#include <cstdlib>

namespace herd {
namespace {
std::atomic<uint64_t> g_bugs{0};
}

void CheckFailed(const char* file, int line, const char* cond, absl::string_view msg) {
  std::fprintf(stderr, "%s:%d: check failed: %s %.*s\n", file, line, cond,
               static_cast<int>(msg.size()), msg.data());
  std::fflush(stderr);
  std::abort();
}

void BugHit(const char* file, int line, absl::string_view msg) {
  g_bugs.fetch_add(1, std::memory_order_relaxed);
  std::fprintf(stderr, "%s:%d: BUG: %.*s\n", file, line, static_cast<int>(msg.size()), msg.data());
#ifndef NDEBUG
  std::abort();
#endif
}

uint64_t BugCount() { return g_bugs.load(std::memory_order_relaxed); }

}  // namespace herd
