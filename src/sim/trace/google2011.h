// The Google cluster trace v2.1 (clusterdata-2011-2) machine table: CSV, no
// header, gzip. Columns: timestamp (us; 0 = before the trace began),
// machine_id, event_type (0 add, 1 remove, 2 update), platform_id,
// cpu_capacity, memory_capacity (each normalised to the largest machine).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace herd::sim {

struct TraceMachine {
  int64_t id = 0;
  std::string platform;  // opaque platform id from the trace
  double cpu = 0;        // normalised: 1.0 = the largest machine
  double memory = 0;
};

// The machines present at `at_us` (0: those present when the trace began),
// in machine-id order. Rows with missing capacity are skipped (the trace
// leaves fields empty when unknown). Errors name the file and line.
absl::StatusOr<std::vector<TraceMachine>> LoadGoogle2011Machines(const std::string& path, int64_t at_us = 0);

// Reads a whole gzip (or plain) text file line by line; fn returns false to stop.
absl::Status ReadGzipLines(const std::string& path, const std::function<bool(absl::string_view line, int64_t n)>& fn);

}  // namespace herd::sim
