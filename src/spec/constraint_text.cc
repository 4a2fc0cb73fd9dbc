#include "spec/constraint_text.h"

#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace herd::spec {
namespace {

using Op = v1::Constraint::Op;

struct OpName {
  absl::string_view text;
  Op op;
};
// Longest first, so "<=" is tried before "<" and "not in" before "in".
constexpr OpName kOps[] = {
    {"not exists", v1::Constraint::NOT_EXISTS},
    {"not in", v1::Constraint::NOT_IN},
    {"exists", v1::Constraint::EXISTS},
    {"==", v1::Constraint::EQ},
    {"!=", v1::Constraint::NE},
    {"<=", v1::Constraint::LE},
    {">=", v1::Constraint::GE},
    {"in", v1::Constraint::IN},
    {"<", v1::Constraint::LT},
    {">", v1::Constraint::GT},
};

bool IsAttributeChar(char c) {
  return absl::ascii_isalnum(c) || c == '_' || c == '.' || c == '/' || c == '-';
}

// Removes one pair of matching quotes around `v`.
absl::string_view Unquote(absl::string_view v) {
  if (v.size() >= 2 && (v.front() == '"' || v.front() == '\'') && v.back() == v.front()) {
    return v.substr(1, v.size() - 2);
  }
  return v;
}

// True if `rest` starts with the word `word` (followed by a space, '[' or the end).
bool StartsWithWord(absl::string_view rest, absl::string_view word) {
  if (!absl::StartsWith(rest, word)) return false;
  if (rest.size() == word.size()) return true;
  char next = rest[word.size()];
  return absl::ascii_isspace(next) || next == '[';
}

}  // namespace

std::optional<Op> ParseConstraintOp(absl::string_view op) {
  std::string norm = absl::AsciiStrToLower(absl::StripAsciiWhitespace(op));
  // Collapse inner runs of spaces and accept "not_in" / "not-in".
  std::vector<absl::string_view> words = absl::StrSplit(norm, absl::ByAnyChar(" _-"), absl::SkipEmpty());
  std::string joined = absl::StrJoin(words, " ");
  for (const OpName& o : kOps) {
    if (joined == o.text) return o.op;
  }
  static constexpr struct {
    absl::string_view name;
    Op op;
  } kEnumNames[] = {{"eq", v1::Constraint::EQ}, {"ne", v1::Constraint::NE}, {"lt", v1::Constraint::LT}, {"le", v1::Constraint::LE},
                    {"gt", v1::Constraint::GT}, {"ge", v1::Constraint::GE}};
  for (const auto& e : kEnumNames) {
    if (joined == e.name) return e.op;
  }
  return std::nullopt;
}

absl::string_view ConstraintOpText(Op op) {
  for (const OpName& o : kOps) {
    if (o.op == op) return o.text;
  }
  return "?";
}

absl::StatusOr<v1::Constraint> ParseConstraint(absl::string_view text) {
  absl::string_view s = absl::StripAsciiWhitespace(text);
  auto error = [&](absl::string_view what) {
    return absl::InvalidArgumentError(absl::StrCat(what, " in '", s, "'"));
  };
  size_t i = 0;
  while (i < s.size() && IsAttributeChar(s[i])) ++i;
  if (i == 0) return error("missing attribute name");
  v1::Constraint c;
  c.set_attribute(std::string(s.substr(0, i)));
  absl::string_view rest = absl::StripLeadingAsciiWhitespace(s.substr(i));
  if (rest.empty()) {
    return error("missing operator (use ==, !=, in, not in, exists, not exists, <, <=, >, >=)");
  }
  const OpName* found = nullptr;
  for (const OpName& o : kOps) {
    bool is_word = absl::ascii_isalpha(o.text[0]);
    if (is_word) {
      if (absl::StartsWith(o.text, "not ") && absl::StartsWith(rest, "not")) {
        absl::string_view after = absl::StripLeadingAsciiWhitespace(rest.substr(3));
        absl::string_view word = o.text.substr(4);
        if (after.size() < rest.size() - 3 && StartsWithWord(after, word)) {
          found = &o;
          rest = after.substr(word.size());
          break;
        }
        continue;
      }
      if (StartsWithWord(rest, o.text)) {
        found = &o;
        rest = rest.substr(o.text.size());
        break;
      }
    } else if (absl::StartsWith(rest, o.text)) {
      found = &o;
      rest = rest.substr(o.text.size());
      break;
    }
  }
  if (found == nullptr) {
    size_t end = 0;
    while (end < rest.size() && !absl::ascii_isspace(rest[end])) ++end;
    absl::string_view bad = rest.substr(0, end);
    std::string hint = bad == "=" ? " (use ==)" : " (use ==, !=, in, not in, exists, not exists, <, <=, >, >=)";
    return absl::InvalidArgumentError(absl::StrCat("unknown operator '", bad, "' in '", s, "'", hint));
  }
  c.set_op(found->op);
  rest = absl::StripAsciiWhitespace(rest);
  switch (found->op) {
    case v1::Constraint::EXISTS:
    case v1::Constraint::NOT_EXISTS:
      if (!rest.empty()) return error(absl::StrCat("'", found->text, "' takes no value"));
      break;
    case v1::Constraint::IN:
    case v1::Constraint::NOT_IN: {
      if (absl::ConsumePrefix(&rest, "[")) {
        if (!absl::ConsumeSuffix(&rest, "]")) return error("missing ']'");
      }
      rest = absl::StripAsciiWhitespace(rest);
      if (rest.empty()) return error(absl::StrCat("'", found->text, "' needs at least one value, e.g. [a, b]"));
      for (absl::string_view v : absl::StrSplit(rest, ',')) {
        v = Unquote(absl::StripAsciiWhitespace(v));
        if (v.empty()) return error("empty value in the list");
        c.add_values(std::string(v));
      }
      break;
    }
    default: {
      absl::string_view v = Unquote(rest);
      if (v.empty()) return error(absl::StrCat("'", found->text, "' needs a value"));
      if (absl::StrContains(v, ' ') && rest.front() != '"' && rest.front() != '\'') {
        return error(absl::StrCat("'", found->text, "' takes one value, got '", v, "'"));
      }
      c.add_values(std::string(v));
      break;
    }
  }
  return c;
}

std::string FormatConstraint(const v1::Constraint& c) {
  switch (c.op()) {
    case v1::Constraint::EXISTS:
    case v1::Constraint::NOT_EXISTS:
      return absl::StrCat(c.attribute(), " ", ConstraintOpText(c.op()));
    case v1::Constraint::IN:
    case v1::Constraint::NOT_IN:
      return absl::StrCat(c.attribute(), " ", ConstraintOpText(c.op()), " [", absl::StrJoin(c.values(), ", "), "]");
    default:
      return absl::StrCat(c.attribute(), " ", ConstraintOpText(c.op()), " ",
                          c.values().empty() ? "" : c.values(0));
  }
}

}  // namespace herd::spec
