// ResourceVector: the in-memory form of herd.v1.Resources, with vector
// arithmetic. Every dimension is independent; a vector "fits" another when
// it is no larger in any dimension.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include "absl/strings/string_view.h"
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "herd/v1/objects.pb.h"

namespace herd {

struct ResourceVector {
  int64_t cpu_millis = 0;
  int64_t memory_bytes = 0;
  int64_t disk_bytes = 0;
  int64_t ports = 0;
  // Named extended resources, sorted by name, no zero entries.
  std::vector<std::pair<std::string, int64_t>> extended;

  static ResourceVector FromProto(const v1::Resources& r);
  v1::Resources ToProto() const;
  void ToProto(v1::Resources* out) const;

  int64_t Extended(absl::string_view name) const;
  void SetExtended(absl::string_view name, int64_t value);

  ResourceVector& operator+=(const ResourceVector& o);
  ResourceVector& operator-=(const ResourceVector& o);
  friend ResourceVector operator+(ResourceVector a, const ResourceVector& b) { return a += b; }
  friend ResourceVector operator-(ResourceVector a, const ResourceVector& b) { return a -= b; }
  bool operator==(const ResourceVector& o) const = default;

  // True if every dimension of *this is <= the same dimension of `avail`.
  bool FitsIn(const ResourceVector& avail) const;
  // The first dimension ("cpu", "memory", "disk", "ports", or an extended
  // name) in which *this exceeds `avail`, if any.
  std::optional<std::string> FirstShortfall(const ResourceVector& avail) const;
  bool IsZero() const;
  bool AnyNegative() const;
  // Dimension value by name ("cpu", "memory", ...), for messages.
  int64_t Get(absl::string_view dim) const;

  // "cpu=500m memory=64Mi disk=1Gi ports=2 gpu=1" (zero dimensions omitted).
  std::string ToString() const;
};

// Formats one dimension's value with its unit ("500m", "64Mi", "2").
std::string FormatDimension(absl::string_view dim, int64_t value);

// Parses "cpu=2,memory=4Gi,disk=100Gi,ports=1000,gpu=2" (flags, quotas).
absl::StatusOr<ResourceVector> ParseResourceList(absl::string_view text);

}  // namespace herd
