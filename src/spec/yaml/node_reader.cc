#include "spec/yaml/node_reader.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "spec/suggest.h"

namespace herd::spec::yaml {
namespace {

constexpr int kMaxMergeDepth = 8;

std::string Quote(absl::string_view s) {
  constexpr size_t kMax = 40;
  if (s.size() > kMax) return absl::StrCat("'", s.substr(0, kMax), "...'");
  return absl::StrCat("'", s, "'");
}

}  // namespace

Location LocationOf(const YAML::Node& node) {
  if (!node.IsDefined()) return {};
  YAML::Mark m = node.Mark();
  return {m.line, m.column};
}

std::string Describe(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Scalar:
      return Quote(node.Scalar());
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Map:
      return "a map";
    default:
      return "nothing";
  }
}

Location Entry::loc() const {
  // yaml-cpp places a block map or list at its first item; its key is where
  // a reader looks for it.
  if (value.IsNull()) return key_loc;
  if ((value.IsMap() || value.IsSequence()) && value.Style() == YAML::EmitterStyle::Block) return key_loc;
  return LocationOf(value);
}

const Entry* Fields::Get(absl::string_view key) const {
  for (const Entry& e : entries_) {
    if (e.key == key) return e.value.IsNull() ? nullptr : &e;
  }
  return nullptr;
}

Value NodeReader::ValueOf(const Entry& e, const FieldPath& parent) const {
  return {e.value, parent.Child(e.key), e.loc()};
}

void NodeReader::TypeError(const Value& v, absl::string_view expected) {
  std::string hint;
  if (v.node.IsMap() && expected == "a string") {
    hint = " (quote text that contains ': ')";
  }
  Error(v, absl::StrCat("expected ", expected, ", got ", Describe(v.node), hint));
}

std::optional<Fields> NodeReader::Map(const Value& v, absl::Span<const absl::string_view> known,
                                      absl::string_view what) {
  map_->Record(v.path, v.loc);
  if (!v.node.IsMap()) {
    TypeError(v, what);
    return std::nullopt;
  }
  Fields out;
  Collect(v.node, v, known, 0, /*merged=*/false, &out);
  return out;
}

void NodeReader::Collect(const YAML::Node& node, const Value& v, absl::Span<const absl::string_view> known,
                         int depth, bool merged, Fields* out) {
  std::vector<YAML::Node> merges;
  const size_t first_own = out->entries_.size();
  for (auto it = node.begin(); it != node.end(); ++it) {
    // Copies: `it->` returns a proxy, so references into it would dangle.
    const YAML::Node k = it->first;
    const YAML::Node value = it->second;
    Location key_loc = LocationOf(k);
    if (!k.IsScalar()) {
      map_->Error(v.path, key_loc, absl::StrCat("field names must be text, got ", Describe(k)),
                  /*mark_bad=*/false);
      continue;
    }
    std::string key = k.Scalar();
    if (key == "<<" && k.Tag() == "?") {
      merges.push_back(value);
      continue;
    }
    auto same = std::find_if(out->entries_.begin(), out->entries_.end(),
                             [&](const Entry& e) { return e.key == key; });
    if (same != out->entries_.end()) {
      // A merged-in key is overridden by the map's own; a repeated own key is an error.
      if (merged || same - out->entries_.begin() < static_cast<ptrdiff_t>(first_own)) continue;
      std::string first = map_->has_lines() && same->key_loc.known()
                              ? absl::StrCat(" (first at line ", same->key_loc.line + 1, ")")
                              : "";
      map_->Error(v.path.Child(key), key_loc, absl::StrCat("duplicate key '", key, "'", first));
      continue;
    }
    if (!known.empty() && std::find(known.begin(), known.end(), key) == known.end()) {
      map_->Error(v.path, key_loc, absl::StrCat("unknown field '", key, "'", DidYouMean(key, known)),
                  /*mark_bad=*/false);
      continue;
    }
    out->entries_.push_back({key, key_loc, value});
  }
  for (const YAML::Node& m : merges) {
    if (depth >= kMaxMergeDepth) {
      map_->Error(v.path, LocationOf(m), "merge keys ('<<') nest too deeply", false);
      continue;
    }
    if (m.IsMap()) {
      Collect(m, v, known, depth + 1, /*merged=*/true, out);
    } else if (m.IsSequence()) {
      for (const YAML::Node& item : m) {
        if (item.IsMap()) {
          Collect(item, v, known, depth + 1, /*merged=*/true, out);
        } else {
          map_->Error(v.path, LocationOf(item), absl::StrCat("'<<' merges maps, got ", Describe(item)), false);
        }
      }
    } else {
      map_->Error(v.path, LocationOf(m), absl::StrCat("'<<' merges maps, got ", Describe(m)), false);
    }
  }
}

std::optional<std::string> NodeReader::String(const Value& v) {
  map_->Record(v.path, v.loc);
  if (!v.node.IsScalar()) {
    TypeError(v, "a string");
    return std::nullopt;
  }
  return v.node.Scalar();
}

std::optional<int64_t> NodeReader::Int(const Value& v, int64_t max) {
  map_->Record(v.path, v.loc);
  if (!v.node.IsScalar()) {
    TypeError(v, "an integer");
    return std::nullopt;
  }
  std::string text(absl::StripAsciiWhitespace(v.node.Scalar()));
  int64_t n = 0;
  double d = 0;
  if (!absl::SimpleAtoi(text, &n)) {
    // Jsonnet prints whole numbers as "3", but accept "3.0" and "1e3" too.
    if (absl::SimpleAtod(text, &d) && std::isfinite(d) && std::abs(d) < 9e18 && d == std::trunc(d)) {
      n = static_cast<int64_t>(d);
    } else if (absl::SimpleAtod(text, &d) && d < 0) {
      Error(v, absl::StrCat("must not be negative, got ", text));
      return std::nullopt;
    } else {
      Error(v, absl::StrCat("expected an integer, got ", Quote(text)));
      return std::nullopt;
    }
  }
  if (n < 0) {
    Error(v, absl::StrCat("must not be negative, got ", n));
    return std::nullopt;
  }
  if (n > max) {
    Error(v, absl::StrCat(n, " is more than the limit of ", max));
    return std::nullopt;
  }
  return n;
}

std::optional<bool> NodeReader::Bool(const Value& v) {
  map_->Record(v.path, v.loc);
  if (v.node.IsScalar()) {
    std::string s = absl::AsciiStrToLower(v.node.Scalar());
    if (s == "true" || s == "yes" || s == "on") return true;
    if (s == "false" || s == "no" || s == "off") return false;
  }
  TypeError(v, "true or false");
  return std::nullopt;
}

std::optional<int64_t> NodeReader::Quantity(const Value& v, absl::StatusOr<int64_t> (*parse)(absl::string_view)) {
  map_->Record(v.path, v.loc);
  if (!v.node.IsScalar()) {
    TypeError(v, "a quantity");
    return std::nullopt;
  }
  absl::StatusOr<int64_t> q = parse(v.node.Scalar());
  if (!q.ok()) {
    Error(v, std::string(q.status().message()));
    return std::nullopt;
  }
  return *q;
}

std::optional<std::vector<std::string>> NodeReader::StringList(const Value& v) {
  map_->Record(v.path, v.loc);
  if (!v.node.IsSequence()) {
    TypeError(v, "a list of strings");
    return std::nullopt;
  }
  std::vector<std::string> out;
  bool ok = true;
  int i = 0;
  for (const YAML::Node& item : v.node) {
    Location loc = LocationOf(item);
    std::optional<std::string> s = String({item, v.path.Item(i), loc.known() ? loc : v.loc});
    if (s) {
      out.push_back(*s);
    } else {
      ok = false;
    }
    ++i;
  }
  if (!ok) {
    map_->MarkBad(v.path.canonical);
    return std::nullopt;
  }
  return out;
}

void NodeReader::StringMap(const Value& v, google::protobuf::Map<std::string, std::string>* out) {
  std::optional<Fields> fields = Map(v, {}, "a map of names to values");
  if (!fields) return;
  for (const Entry& e : fields->entries()) {
    Value item = ValueOf(e, v.path);
    if (e.value.IsNull()) {
      Error(item, absl::StrCat("expected a value, got nothing (write ", e.key, ": \"\" for an empty one)"));
      continue;
    }
    if (std::optional<std::string> s = String(item)) (*out)[e.key] = *s;
  }
}

}  // namespace herd::spec::yaml
