// The labels that make a job a framework's task (issue #17,
// docs/frameworks.md). A job with kFrameworkLabel is placed only by its
// framework (an accepted offer commits the job with its placement); the
// built-in scheduler leaves its pending tasks alone. The other labels let a
// new leader rebuild the framework registry from the cell state alone.
// Only the master's Framework API sets them: Submit refuses them.
#pragma once

#include <string>

namespace herd {

inline constexpr char kFrameworkLabelPrefix[] = "herd.framework";
inline constexpr char kFrameworkLabel[] = "herd.framework";              // framework id
inline constexpr char kFrameworkTaskLabel[] = "herd.framework-task";     // its task id
inline constexpr char kFrameworkNameLabel[] = "herd.framework-name";
inline constexpr char kFrameworkRoleLabel[] = "herd.framework-role";
inline constexpr char kFrameworkFailoverLabel[] = "herd.framework-failover-ms";

// True if `labels` (a protobuf or std map) mark a framework's task.
template <typename Map>
bool IsFrameworkTask(const Map& labels) {
  return !labels.empty() && labels.find(std::string(kFrameworkLabel)) != labels.end();
}

}  // namespace herd
