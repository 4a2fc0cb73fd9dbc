#include "cell/constraints.h"

#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace herd::cell {
namespace {

// Splits "1.10.2-rc1" into runs of digits and non-digits: [1][.][10][.][2][-rc][1].
std::vector<absl::string_view> Tokens(absl::string_view s) {
  std::vector<absl::string_view> out;
  size_t i = 0;
  while (i < s.size()) {
    size_t j = i;
    bool digit = absl::ascii_isdigit(s[i]);
    while (j < s.size() && absl::ascii_isdigit(s[j]) == digit) ++j;
    out.push_back(s.substr(i, j - i));
    i = j;
  }
  return out;
}

}  // namespace

int CompareValues(absl::string_view a, absl::string_view b) {
  // Integers compare numerically; anything else token by token, numeric runs
  // as numbers ("5.10" > "5.9", "1.2.3-rc1" < "1.2.3-rc2"), the rest as text.
  int64_t x, y;
  if (absl::SimpleAtoi(a, &x) && absl::SimpleAtoi(b, &y)) return x < y ? -1 : (x > y ? 1 : 0);
  std::vector<absl::string_view> ta = Tokens(a), tb = Tokens(b);
  for (size_t i = 0; i < ta.size() && i < tb.size(); ++i) {
    bool da = absl::ascii_isdigit(ta[i][0]), db = absl::ascii_isdigit(tb[i][0]);
    if (da && db) {
      uint64_t na = 0, nb = 0;
      if (absl::SimpleAtoi(ta[i], &na) && absl::SimpleAtoi(tb[i], &nb) && na != nb) return na < nb ? -1 : 1;
      continue;
    }
    int c = ta[i].compare(tb[i]);
    if (c != 0) return c < 0 ? -1 : 1;
  }
  if (ta.size() != tb.size()) return ta.size() < tb.size() ? -1 : 1;
  return 0;
}

bool Matches(const v1::Constraint& c, const Attributes& attrs) {
  auto it = attrs.find(c.attribute());
  bool present = it != attrs.end();
  auto first = [&]() -> absl::string_view {
    return c.values().empty() ? absl::string_view() : absl::string_view(c.values(0));
  };
  switch (c.op()) {
    case v1::Constraint::EXISTS:
      return present;
    case v1::Constraint::NOT_EXISTS:
      return !present;
    case v1::Constraint::EQ:
      return present && it->second == first();
    case v1::Constraint::NE:
      return !present || it->second != first();
    case v1::Constraint::IN:
      if (!present) return false;
      for (const auto& v : c.values()) {
        if (v == it->second) return true;
      }
      return false;
    case v1::Constraint::NOT_IN:
      if (!present) return true;
      for (const auto& v : c.values()) {
        if (v == it->second) return false;
      }
      return true;
    case v1::Constraint::LT:
      return present && CompareValues(it->second, first()) < 0;
    case v1::Constraint::LE:
      return present && CompareValues(it->second, first()) <= 0;
    case v1::Constraint::GT:
      return present && CompareValues(it->second, first()) > 0;
    case v1::Constraint::GE:
      return present && CompareValues(it->second, first()) >= 0;
    default:
      return false;
  }
}

std::string Describe(const v1::Constraint& c) {
  auto one = [&]() -> std::string { return c.values().empty() ? "" : c.values(0); };
  switch (c.op()) {
    case v1::Constraint::EXISTS:
      return absl::StrCat(c.attribute(), " exists");
    case v1::Constraint::NOT_EXISTS:
      return absl::StrCat(c.attribute(), " not exists");
    case v1::Constraint::EQ:
      return absl::StrCat(c.attribute(), " == ", one());
    case v1::Constraint::NE:
      return absl::StrCat(c.attribute(), " != ", one());
    case v1::Constraint::IN:
      return absl::StrCat(c.attribute(), " in [", absl::StrJoin(c.values(), ", "), "]");
    case v1::Constraint::NOT_IN:
      return absl::StrCat(c.attribute(), " not in [", absl::StrJoin(c.values(), ", "), "]");
    case v1::Constraint::LT:
      return absl::StrCat(c.attribute(), " < ", one());
    case v1::Constraint::LE:
      return absl::StrCat(c.attribute(), " <= ", one());
    case v1::Constraint::GT:
      return absl::StrCat(c.attribute(), " > ", one());
    case v1::Constraint::GE:
      return absl::StrCat(c.attribute(), " >= ", one());
    default:
      return absl::StrCat(c.attribute(), " ?");
  }
}

std::string HardConstraintKey(const v1::JobSpec& spec) {
  std::string key;
  for (const v1::Constraint& c : spec.constraints()) {
    if (!c.soft()) absl::StrAppend(&key, Describe(c), ";");
  }
  return key;
}

}  // namespace herd::cell
