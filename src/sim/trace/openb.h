// The Alibaba GPU cluster trace "openb" (cluster-trace-gpu-v2023): CSV with a
// header, plain or gzip. Columns are found by name, so lists with more,
// fewer or reordered columns load alike. See docs/traces.md for the mapping.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "herd/v1/objects.pb.h"

namespace herd::sim {

// The extended resource a GPU share is counted in: 1000 per physical GPU.
inline constexpr char kGpuMilli[] = "gpu_milli";

// Node list (columns sn, cpu_milli, memory_mib, gpu; optional model) ->
// machines named by sn: capacity cpu_millis, memory_bytes = MiB << 20, ports
// 1000, extended gpu_milli = gpu * 1000 when gpu > 0 (no disk: the trace has
// none); attributes gpu_count (always) and gpu_model (when given).
absl::StatusOr<std::vector<v1::Machine>> LoadOpenbNodes(const std::string& path);

struct OpenbPod {
  std::string name;
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
  int32_t num_gpu = 0;
  int64_t gpu_milli = 0;               // share of one GPU for single-GPU pods (0-1000)
  std::vector<std::string> gpu_spec;   // allowed GPU models; empty = any
  std::string qos;                     // LS, BE, Burstable, Guaranteed; empty when absent
  std::string pod_phase;               // e.g. Running, Succeeded, Failed, Pending; may be empty
  int64_t creation_time = -1;          // seconds; -1 when absent
  int64_t deletion_time = -1;
  int64_t scheduled_time = -1;
};

// Pod list (columns name, cpu_milli, memory_mib, num_gpu, gpu_milli; optional
// gpu_spec, qos, pod_phase, creation_time, deletion_time, scheduled_time;
// others ignored). Errors name file:line and the column: a missing required
// column, a row with the wrong number of fields, a non-numeric or negative
// number, gpu_milli over 1000, an unknown qos.
absl::StatusOr<std::vector<OpenbPod>> LoadOpenbPods(const std::string& path);

// Herd priority for a qos class: Guaranteed 250, LS 200 (production);
// Burstable 116 (mid); BE 100 (batch); empty (the list has no qos) 200.
int32_t OpenbPriority(absl::string_view qos);

// A valid Herd job name for a pod name: lowercased, other characters than
// a-z 0-9 '-' '_' '.' replaced by '-', prefixed with "p" unless it starts
// with a letter, shortened to 63 characters with a hash suffix when longer.
std::string OpenbJobName(absl::string_view pod_name);

// One single-task job for a pod: user "openb", priority and appclass by qos
// (LS and Guaranteed latency-sensitive), cpu and memory (at least 1 millicore
// and 1 MiB), extended gpu_milli = num_gpu * 1000 when num_gpu > 1 else the
// pod's gpu_milli (a fractional share of one GPU), constraint gpu_model in
// [gpu_spec...] when gpu_spec is given. Pods of every phase become jobs.
v1::JobSpec JobFromPod(const OpenbPod& pod);

// JobFromPod for each pod; names that collide after sanitising get "-2",
// "-3"... in list order.
std::vector<v1::JobSpec> JobsFromPods(const std::vector<OpenbPod>& pods);

}  // namespace herd::sim
