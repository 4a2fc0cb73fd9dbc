// Parsing and printing of resource quantities and durations, shared by job
// specs, CLI flags and tables. Quantities follow Kubernetes' conventions:
//   CPU:    "500m" (millicores), "0.5" or "2" (cores)
//   bytes:  "512Mi", "1Gi", "1.5Gi" (binary), "1G", "500M", "10k" (decimal), "1024"
//   time:   "500ms", "30s", "5m", "1h", "1m30s"; a bare number is seconds
// Errors say what is wrong ("unknown unit 'Mb' in '512Mb' (use Ki, Mi, Gi...)").
#pragma once

#include <cstdint>
#include <string>
#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"

namespace herd {

absl::StatusOr<int64_t> ParseCpuMillis(absl::string_view text);
absl::StatusOr<int64_t> ParseBytes(absl::string_view text);
absl::StatusOr<int64_t> ParseDurationMs(absl::string_view text);
// A plain non-negative integer ("3"), for counts such as ports or gpus.
absl::StatusOr<int64_t> ParseCount(absl::string_view text);

std::string FormatCpu(int64_t millis);      // 500 -> "500m", 2000 -> "2", 1500 -> "1.5"
std::string FormatBytes(int64_t bytes);     // 67108864 -> "64Mi", 1536Mi -> "1.5Gi"
std::string FormatDurationMs(int64_t ms);   // 1500 -> "1.5s", 90000 -> "1m30s"

}  // namespace herd
