// Typed access to yaml-cpp nodes that reports every problem to a
// JobSourceMap instead of throwing: wrong types, unknown and duplicate keys,
// bad numbers and units. Used for YAML, for JSON (read as YAML 1.2) and for
// the JSON that Jsonnet produces.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "spec/source_map.h"

namespace herd::spec::yaml {

Location LocationOf(const YAML::Node& node);

// "'three'", "a list", "a map" or "nothing", for "expected X, got Y".
std::string Describe(const YAML::Node& node);

// A node together with the field it is and where it was written.
struct Value {
  YAML::Node node;
  FieldPath path;
  Location loc;
};

// One key: value pair of a map.
struct Entry {
  std::string key;
  Location key_loc;
  YAML::Node value;
  // Where to point for this entry's value (an empty value points at its key).
  Location loc() const;
};

// The entries of a map, in file order (merge-key entries last).
class Fields {
 public:
  // The entry for `key`, or nullptr if absent or null ("key:" or "key: ~"
  // mean the same as leaving the key out).
  const Entry* Get(absl::string_view key) const;
  const std::vector<Entry>& entries() const { return entries_; }

 private:
  friend class NodeReader;
  std::vector<Entry> entries_;
};

class NodeReader {
 public:
  explicit NodeReader(JobSourceMap* map) : map_(map) {}

  JobSourceMap* map() const { return map_; }
  Value ValueOf(const Entry& e, const FieldPath& parent) const;
  // The entry's value as the field `field` (when its path is not parent.key).
  Value ValueAt(const Entry& e, const FieldPath& field) const { return {e.value, field, e.loc()}; }
  void Record(const Value& v) { map_->Record(v.path, v.loc); }
  void Error(const Value& v, std::string message) { map_->Error(v.path, v.loc, std::move(message)); }

  // Reads a map, reporting duplicate keys and, when `known` is not empty,
  // keys not in it (with a suggestion). YAML merge keys ("<<: *base") are
  // expanded. `what` describes the expected value ("a job").
  std::optional<Fields> Map(const Value& v, absl::Span<const absl::string_view> known, absl::string_view what);

  std::optional<std::string> String(const Value& v);
  // A non-negative integer no larger than `max`.
  std::optional<int64_t> Int(const Value& v, int64_t max = std::numeric_limits<int64_t>::max());
  std::optional<bool> Bool(const Value& v);
  // A scalar parsed by `parse` (ParseCpuMillis, ParseBytes, ParseDurationMs).
  std::optional<int64_t> Quantity(const Value& v, absl::StatusOr<int64_t> (*parse)(absl::string_view));
  // A list of scalars; nullopt if it or any item is bad (all are reported).
  std::optional<std::vector<std::string>> StringList(const Value& v);
  // A map of scalars to scalars, into `out`; bad entries are reported and skipped.
  void StringMap(const Value& v, google::protobuf::Map<std::string, std::string>* out);

  void TypeError(const Value& v, absl::string_view expected);

 private:
  void Collect(const YAML::Node& node, const Value& v, absl::Span<const absl::string_view> known, int depth,
               bool merged, Fields* out);

  JobSourceMap* map_;
};

}  // namespace herd::spec::yaml
