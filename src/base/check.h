// Invariant checks, following Envoy's three-way split:
//   HERD_CHECK(cond)  - always on; a broken invariant aborts with file:line.
//   HERD_DCHECK(cond) - debug builds only (hot paths).
//   HERD_BUG(msg)     - "cannot happen" that is survivable: logged and counted
//                       in release builds, aborts in debug builds.
#pragma once

#include <atomic>
#include <cstdint>
#include "absl/strings/string_view.h"

namespace herd {

[[noreturn]] void CheckFailed(const char* file, int line, const char* cond, absl::string_view msg);
void BugHit(const char* file, int line, absl::string_view msg);
// Number of HERD_BUG hits since start (exported as a metric).
uint64_t BugCount();

}  // namespace herd

#define HERD_CHECK(cond)                                             \
  do {                                                               \
    if (!(cond)) [[unlikely]]                                        \
      ::herd::CheckFailed(__FILE__, __LINE__, #cond, "");            \
  } while (0)

#define HERD_CHECK_MSG(cond, msg)                                    \
  do {                                                               \
    if (!(cond)) [[unlikely]]                                        \
      ::herd::CheckFailed(__FILE__, __LINE__, #cond, (msg));         \
  } while (0)

#ifdef NDEBUG
#define HERD_DCHECK(cond) \
  do {                    \
  } while (0)
#else
#define HERD_DCHECK(cond) HERD_CHECK(cond)
#endif

#define HERD_BUG(msg) ::herd::BugHit(__FILE__, __LINE__, (msg))
