#include "spec/source_map.h"

#include "absl/strings/str_cat.h"

namespace herd::spec {
namespace {

// "a.b[2].c" -> "a.b[2]" -> "a.b" -> "a" -> "".
std::string Parent(absl::string_view path) {
  size_t pos = path.find_last_of(".[");
  if (pos == absl::string_view::npos) return "";
  return std::string(path.substr(0, pos));
}

}  // namespace

std::string JoinPath(absl::string_view a, absl::string_view b) {
  if (a.empty()) return std::string(b);
  if (b.empty()) return std::string(a);
  if (b.front() == '[') return absl::StrCat(a, b);
  return absl::StrCat(a, ".", b);
}

FieldPath FieldPath::Child(absl::string_view canonical_name, absl::string_view display_name) const {
  return {JoinPath(canonical, canonical_name), JoinPath(display, display_name)};
}

FieldPath FieldPath::Item(int canonical_index, int display_index) const {
  return {absl::StrCat(canonical, "[", canonical_index, "]"), absl::StrCat(display, "[", display_index, "]")};
}

JobSourceMap::JobSourceMap(std::string prefix, Location root, bool has_lines, std::vector<Diagnostic>* out)
    : prefix_(std::move(prefix)), has_lines_(has_lines), out_(out) {
  fields_[""] = {"", root};
}

void JobSourceMap::Record(const FieldPath& f, Location loc) {
  if (!loc.known() && fields_.contains(f.canonical)) return;
  fields_[f.canonical] = {f.display, loc};
}

void JobSourceMap::Error(const FieldPath& f, Location loc, std::string message, bool mark_bad) {
  if (mark_bad) bad_.insert(f.canonical);
  out_->push_back({loc, JoinPath(prefix_, f.display), std::move(message)});
}

bool JobSourceMap::IsBad(absl::string_view canonical) const {
  std::string p(canonical);
  while (true) {
    if (bad_.contains(p)) return true;
    if (p.empty()) return false;
    p = Parent(p);
  }
}

Diagnostic JobSourceMap::Locate(absl::string_view canonical) const {
  std::string p(canonical);
  while (true) {
    auto it = fields_.find(p);
    if (it != fields_.end()) {
      absl::string_view rest = canonical.substr(p.size());
      if (!rest.empty() && rest.front() == '.') rest.remove_prefix(1);
      return {it->second.loc, JoinPath(prefix_, JoinPath(it->second.display, rest)), ""};
    }
    p = Parent(p);  // ends at "", which is always recorded
  }
}

void JobSourceMap::ReportIssue(const Issue& issue) {
  if (IsBad(issue.path)) return;
  Diagnostic d = Locate(issue.path);
  d.message = issue.message;
  out_->push_back(std::move(d));
}

}  // namespace herd::spec
