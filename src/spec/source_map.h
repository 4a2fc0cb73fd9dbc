// Where each field of a job was written, so that problems found after
// parsing (by ValidateIssues) can point at a file:line, and so that a field
// whose problem the parser already reported is not reported twice.
#pragma once

#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/string_view.h"
#include "spec/validate.h"

namespace herd::spec {

// 0-based, as yaml-cpp reports positions; line < 0 = unknown.
struct Location {
  int line = -1;
  int column = -1;
  bool known() const { return line >= 0; }
};

// One problem, ready to print as "FILE:LINE:COL: PATH: MESSAGE".
struct Diagnostic {
  Location loc;
  std::string path;  // as the user wrote it, e.g. "jobs[1].resources.gpu"; may be empty
  std::string message;
};

// Joins path parts: ("a", "b") -> "a.b", ("a", "[2]") -> "a[2]", ("", "b") -> "b".
std::string JoinPath(absl::string_view a, absl::string_view b);

// A field's path two ways: `canonical` as validate.h names it (proto order
// and names) and `display` as the user wrote it. They differ for shorthands:
// "resources.gpu" is canonically "resources.extended.gpu", the second item of
// soft_constraints may be "constraints[3]", an override's "index" is "indexes".
struct FieldPath {
  std::string canonical;
  std::string display;

  FieldPath Child(absl::string_view name) const { return Child(name, name); }
  FieldPath Child(absl::string_view canonical_name, absl::string_view display_name) const;
  FieldPath Item(int index) const { return Item(index, index); }
  FieldPath Item(int canonical_index, int display_index) const;
};

// The locations of one job's fields, and the problems found in it (appended
// to a shared list, with display paths prefixed by e.g. "jobs[1]").
class JobSourceMap {
 public:
  // `has_lines`: locations are meaningful (false for Jsonnet's output).
  JobSourceMap(std::string prefix, Location root, bool has_lines, std::vector<Diagnostic>* out);

  bool has_lines() const { return has_lines_; }

  void Record(const FieldPath& f, Location loc);
  // Reports a problem in field `f`. With `mark_bad`, later issues about `f`
  // or anything under it are dropped (the value was not stored, so the
  // defaults left in its place would only produce misleading issues).
  void Error(const FieldPath& f, Location loc, std::string message, bool mark_bad = true);
  // Marks `canonical` as reported without reporting (e.g. a list whose bad
  // item was reported).
  void MarkBad(absl::string_view canonical) { bad_.insert(std::string(canonical)); }
  bool IsBad(absl::string_view canonical) const;

  // Reports a semantic issue at the nearest recorded field, unless the
  // parser already reported a problem there.
  void ReportIssue(const Issue& issue);

  // The display path (with prefix) and location of a canonical path.
  Diagnostic Locate(absl::string_view canonical) const;

 private:
  std::string prefix_;
  bool has_lines_;
  std::vector<Diagnostic>* out_;
  struct Where {
    std::string display;
    Location loc;
  };
  absl::flat_hash_map<std::string, Where> fields_;
  absl::flat_hash_set<std::string> bad_;
};

}  // namespace herd::spec
