#include "base/cron.h"

#include <array>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/civil_time.h"

namespace herd {
namespace {

struct FieldSpec {
  const char* name;
  int lo, hi;
  // Names for values lo, lo+1, ... (month: jan = 1; day of week: sun = 0).
  std::vector<absl::string_view> names;
};

const FieldSpec kFields[5] = {
    {"minute", 0, 59, {}},
    {"hour", 0, 23, {}},
    {"day-of-month", 1, 31, {}},
    {"month", 1, 12, {"jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"}},
    // 7 is Sunday too (folded onto 0 after parsing).
    {"day-of-week", 0, 7, {"sun", "mon", "tue", "wed", "thu", "fri", "sat"}},
};

absl::Status FieldError(const FieldSpec& f, absl::string_view field, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(f.name, " field '", field, "': ", what));
}

// A value of the field: a number in range or (month, day of week) a name.
absl::StatusOr<int> Value(const FieldSpec& f, absl::string_view field, absl::string_view s) {
  if (s.empty()) return FieldError(f, field, "an empty value");
  std::string lower = absl::AsciiStrToLower(s);
  for (size_t i = 0; i < f.names.size(); ++i) {
    if (lower == f.names[i]) return f.lo + static_cast<int>(i);
  }
  int v = 0;
  for (char c : s) {
    if (!absl::ascii_isdigit(c)) {
      std::string hint = f.names.empty()
                             ? absl::StrCat("a number ", f.lo, "-", f.hi)
                             : absl::StrCat("a number ", f.lo, "-", f.hi, " or a name (", f.names.front(), ", ",
                                            f.names[1], ", ...)");
      return FieldError(f, field, absl::StrCat("'", s, "' is not ", hint));
    }
  }
  if (!absl::SimpleAtoi(s, &v) || v < f.lo || v > f.hi) {
    return FieldError(f, field, absl::StrCat(s, " is outside ", f.lo, "-", f.hi));
  }
  return v;
}

// Sets the bits (value - 0) the field names.
absl::Status ParseField(const FieldSpec& f, absl::string_view field, std::vector<bool>* bits) {
  bits->assign(f.hi + 1, false);
  if (field.empty()) return FieldError(f, field, "empty");
  for (absl::string_view item : absl::StrSplit(field, ',')) {
    if (item.empty()) return FieldError(f, field, "an empty list item (two commas, or one at an end)");
    absl::string_view range = item;
    int step = 1;
    bool stepped = false;
    if (size_t slash = item.find('/'); slash != absl::string_view::npos) {
      range = item.substr(0, slash);
      absl::string_view s = item.substr(slash + 1);
      stepped = true;
      if (s.empty() || !absl::SimpleAtoi(s, &step) || step < 1 || step > f.hi - f.lo + 1) {
        return FieldError(f, field, absl::StrCat("step '", s, "' is not a number 1-", f.hi - f.lo + 1));
      }
      for (char c : s) {
        if (!absl::ascii_isdigit(c)) {
          return FieldError(f, field, absl::StrCat("step '", s, "' is not a number 1-", f.hi - f.lo + 1));
        }
      }
    }
    int a = f.lo, b = f.hi;
    if (range == "*") {
      // the whole field
    } else if (size_t dash = range.find('-'); dash != absl::string_view::npos) {
      absl::StatusOr<int> x = Value(f, field, range.substr(0, dash));
      if (!x.ok()) return x.status();
      absl::StatusOr<int> y = Value(f, field, range.substr(dash + 1));
      if (!y.ok()) return y.status();
      if (*x > *y) {
        return FieldError(f, field, absl::StrCat("range '", range, "' runs backwards (write the lower bound first)"));
      }
      a = *x;
      b = *y;
    } else {
      absl::StatusOr<int> x = Value(f, field, range);
      if (!x.ok()) return x.status();
      a = *x;
      b = stepped ? f.hi : *x;  // "N/S": from N to the end, every S
    }
    for (int v = a; v <= b; v += step) (*bits)[v] = true;
  }
  return absl::OkStatus();
}

template <size_t N>
void Copy(const std::vector<bool>& from, std::bitset<N>* to) {
  for (size_t i = 0; i < N && i < from.size(); ++i) (*to)[i] = from[i];
}

absl::string_view Macro(absl::string_view text) {
  if (text == "@yearly" || text == "@annually") return "0 0 1 1 *";
  if (text == "@monthly") return "0 0 1 * *";
  if (text == "@weekly") return "0 0 * * 0";
  if (text == "@daily" || text == "@midnight") return "0 0 * * *";
  if (text == "@hourly") return "0 * * * *";
  return "";
}

}  // namespace

absl::StatusOr<CronSchedule> CronSchedule::Parse(absl::string_view text) {
  CronSchedule c;
  c.text_ = std::string(text);
  absl::string_view expr = absl::StripAsciiWhitespace(text);
  if (!expr.empty() && expr[0] == '@') {
    absl::string_view m = Macro(expr);
    if (m.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "unknown macro '", expr, "' (@yearly, @annually, @monthly, @weekly, @daily, @midnight or @hourly)"));
    }
    expr = m;
  }
  std::vector<absl::string_view> fields = absl::StrSplit(expr, absl::ByAnyChar(" \t"), absl::SkipEmpty());
  if (fields.size() != 5) {
    return absl::InvalidArgumentError(absl::StrCat(
        "'", text, "' has ", fields.size(),
        " fields; a schedule has 5: minute hour day-of-month month day-of-week, e.g. \"*/15 * * * *\""));
  }
  std::vector<bool> bits;
  for (int i = 0; i < 5; ++i) {
    absl::Status st = ParseField(kFields[i], fields[i], &bits);
    if (!st.ok()) return st;
    switch (i) {
      case 0: Copy(bits, &c.minutes_); break;
      case 1: Copy(bits, &c.hours_); break;
      case 2: Copy(bits, &c.days_); break;
      case 3: Copy(bits, &c.months_); break;
      case 4:
        if (bits[7]) bits[0] = true;
        Copy(bits, &c.weekdays_);
        break;
    }
  }
  c.day_star_ = fields[2][0] == '*';
  c.weekday_star_ = fields[4][0] == '*';
  return c;
}

bool CronSchedule::Matches(const absl::CivilMinute& m) const {
  if (!minutes_[m.minute()] || !hours_[m.hour()] || !months_[m.month()]) return false;
  const absl::CivilDay d(m);
  const absl::Weekday wd = absl::GetWeekday(d);
  const int w = wd == absl::Weekday::sunday ? 0 : static_cast<int>(wd) + 1;
  const bool day = days_[d.day()];
  const bool weekday = weekdays_[w];
  if (!day_star_ && !weekday_star_) return day || weekday;
  return day && weekday;
}

std::optional<absl::Time> CronSchedule::Next(absl::Time after, absl::TimeZone zone) const {
  const absl::CivilMinute start(absl::ToCivilSecond(after, zone));
  const absl::CivilMinute limit(absl::CivilYear(start) + 5);
  absl::CivilMinute c = start;
  while (c < limit) {
    if (!months_[c.month()]) {
      c = absl::CivilMinute(absl::CivilMonth(c) + 1);
      continue;
    }
    const absl::CivilDay d(c);
    const absl::Weekday wd = absl::GetWeekday(d);
    const int w = wd == absl::Weekday::sunday ? 0 : static_cast<int>(wd) + 1;
    const bool day_ok = (!day_star_ && !weekday_star_) ? (days_[d.day()] || weekdays_[w])
                                                       : (days_[d.day()] && weekdays_[w]);
    if (!day_ok) {
      c = absl::CivilMinute(d + 1);
      continue;
    }
    if (!hours_[c.hour()]) {
      c = absl::CivilMinute(absl::CivilHour(c) + 1);
      continue;
    }
    if (!minutes_[c.minute()]) {
      c += 1;
      continue;
    }
    const absl::TimeZone::TimeInfo ti = zone.At(c);
    // Skipped (clocks went forward past it): at the change. Repeated
    // (clocks went back): its first occurrence only.
    const absl::Time t = ti.kind == absl::TimeZone::TimeInfo::SKIPPED ? ti.trans : ti.pre;
    if (t > after) return t;
    c += 1;
  }
  return std::nullopt;
}

}  // namespace herd
