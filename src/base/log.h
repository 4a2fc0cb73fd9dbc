// Logging: spdlog behind Herd's names. LOG_INFO("placed {} on {}", t, m).
#pragma once

#include "absl/strings/string_view.h"
#include "spdlog/spdlog.h"

// Debian's abseil has its own string_view; teach fmt (spdlog) to print it.
template <>
struct fmt::formatter<absl::string_view> : fmt::formatter<fmt::string_view> {
  template <typename Ctx>
  auto format(absl::string_view s, Ctx& ctx) const {
    return fmt::formatter<fmt::string_view>::format(fmt::string_view(s.data(), s.size()), ctx);
  }
};

#define HERD_LOG_DEBUG(...) SPDLOG_DEBUG(__VA_ARGS__)
#define HERD_LOG_INFO(...) SPDLOG_INFO(__VA_ARGS__)
#define HERD_LOG_WARN(...) SPDLOG_WARN(__VA_ARGS__)
#define HERD_LOG_ERROR(...) SPDLOG_ERROR(__VA_ARGS__)

namespace herd {

// Sets up the default logger: `component` prefixes every line; logs go to
// stderr, and also to `file` when it is non-empty. Level: "debug", "info",
// "warn", "error" (env HERD_LOG_LEVEL overrides).
void InitLogging(absl::string_view component, absl::string_view file = "", absl::string_view level = "info");

}  // namespace herd
