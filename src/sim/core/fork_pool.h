// Runs independent pieces of work in child processes, a few at a time: the
// simulator's experiments repeat big scheduling runs per seed, and each
// child also gets its own memory (peak measured per run).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace herd::sim {

// Calls fn(i) for i in [0, n) in child processes, at most `parallel` at once,
// and returns what each returned, in order. A child that fails (crashes, or
// exits non-zero) makes the whole call fail, naming i.
absl::StatusOr<std::vector<std::string>> ForkMap(int n, int parallel, const std::function<std::string(int)>& fn);

}  // namespace herd::sim
