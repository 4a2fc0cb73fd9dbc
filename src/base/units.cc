#include "base/units.h"

#include <cmath>
#include <cstdio>
#include <limits>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace herd {
namespace {

// Splits "1.5Gi" into the number "1.5" and the suffix "Gi".
void SplitNumber(absl::string_view text, absl::string_view* number, absl::string_view* suffix) {
  size_t i = 0;
  while (i < text.size() && (absl::ascii_isdigit(text[i]) || text[i] == '.' || text[i] == '-' ||
                             text[i] == '+' || ((text[i] == 'e' || text[i] == 'E') && i > 0 &&
                                                i + 1 < text.size() && absl::ascii_isdigit(text[i + 1])))) {
    ++i;
  }
  *number = text.substr(0, i);
  *suffix = text.substr(i);
}

absl::StatusOr<double> ParseNonNegative(absl::string_view number, absl::string_view whole,
                                        absl::string_view what) {
  double v = 0;
  if (number.empty() || !absl::SimpleAtod(number, &v) || !std::isfinite(v)) {
    return absl::InvalidArgumentError(absl::StrCat("'", whole, "' is not a valid ", what));
  }
  if (v < 0) {
    return absl::InvalidArgumentError(absl::StrCat(what, " must not be negative, got '", whole, "'"));
  }
  return v;
}

absl::StatusOr<int64_t> ToInt64(double v, absl::string_view whole, absl::string_view what) {
  if (v > static_cast<double>(std::numeric_limits<int64_t>::max() / 2)) {
    return absl::InvalidArgumentError(absl::StrCat(what, " '", whole, "' is too large"));
  }
  return static_cast<int64_t>(std::llround(v));
}

}  // namespace

absl::StatusOr<int64_t> ParseCpuMillis(absl::string_view text) {
  text = absl::StripAsciiWhitespace(text);
  absl::string_view number, suffix;
  SplitNumber(text, &number, &suffix);
  auto v = ParseNonNegative(number, text, "CPU quantity");
  if (!v.ok()) return v.status();
  double millis;
  if (suffix.empty()) {
    millis = *v * 1000.0;
  } else if (suffix == "m") {
    millis = *v;
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "unknown CPU unit '", suffix, "' in '", text, "' (use cores like 0.5 or millicores like 500m)"));
  }
  if (std::fabs(millis - std::round(millis)) > 1e-6) {
    return absl::InvalidArgumentError(
        absl::StrCat("CPU quantity '", text, "' is finer than 1m (one millicore)"));
  }
  return ToInt64(millis, text, "CPU quantity");
}

absl::StatusOr<int64_t> ParseBytes(absl::string_view text) {
  text = absl::StripAsciiWhitespace(text);
  absl::string_view number, suffix;
  SplitNumber(text, &number, &suffix);
  auto v = ParseNonNegative(number, text, "byte quantity");
  if (!v.ok()) return v.status();
  struct Unit {
    absl::string_view name;
    double factor;
  };
  static constexpr Unit kUnits[] = {
      {"", 1},
      {"B", 1},
      {"k", 1e3},
      {"K", 1e3},
      {"M", 1e6},
      {"G", 1e9},
      {"T", 1e12},
      {"P", 1e15},
      {"E", 1e18},
      {"Ki", 1024.0},
      {"Mi", 1024.0 * 1024},
      {"Gi", 1024.0 * 1024 * 1024},
      {"Ti", 1024.0 * 1024 * 1024 * 1024},
      {"Pi", 1024.0 * 1024 * 1024 * 1024 * 1024},
      {"Ei", 1024.0 * 1024 * 1024 * 1024 * 1024 * 1024},
      {"KiB", 1024.0},
      {"MiB", 1024.0 * 1024},
      {"GiB", 1024.0 * 1024 * 1024},
      {"TiB", 1024.0 * 1024 * 1024 * 1024},
  };
  for (const Unit& u : kUnits) {
    if (suffix == u.name) {
      double bytes = *v * u.factor;
      if (std::fabs(bytes - std::round(bytes)) > 1e-3 && suffix.empty()) {
        return absl::InvalidArgumentError(absl::StrCat("byte quantity '", text, "' is not a whole number"));
      }
      return ToInt64(bytes, text, "byte quantity");
    }
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown unit '", suffix, "' in '", text,
                                                 "' (use Ki, Mi, Gi, Ti or k, M, G, T)"));
}

absl::StatusOr<int64_t> ParseDurationMs(absl::string_view text) {
  text = absl::StripAsciiWhitespace(text);
  if (text.empty()) return absl::InvalidArgumentError("empty duration");
  double total = 0;
  absl::string_view rest = text;
  bool any = false;
  while (!rest.empty()) {
    absl::string_view number, suffix;
    SplitNumber(rest, &number, &suffix);
    // The suffix runs until the next digit.
    size_t j = 0;
    while (j < suffix.size() && !absl::ascii_isdigit(suffix[j]) && suffix[j] != '.') ++j;
    absl::string_view unit = suffix.substr(0, j);
    auto v = ParseNonNegative(number, text, "duration");
    if (!v.ok()) return v.status();
    double factor;
    if (unit.empty()) {
      if (any || j != suffix.size()) {
        return absl::InvalidArgumentError(absl::StrCat("duration '", text, "' is missing a unit"));
      }
      factor = 1000;
    } else if (unit == "ms") {
      factor = 1;
    } else if (unit == "s") {
      factor = 1000;
    } else if (unit == "m") {
      factor = 60'000;
    } else if (unit == "h") {
      factor = 3'600'000;
    } else if (unit == "d") {
      factor = 86'400'000;
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown duration unit '", unit, "' in '", text, "' (use ms, s, m, h, d)"));
    }
    total += *v * factor;
    any = true;
    rest = suffix.substr(j);
  }
  return ToInt64(total, text, "duration");
}

absl::StatusOr<int64_t> ParseCount(absl::string_view text) {
  text = absl::StripAsciiWhitespace(text);
  int64_t v = 0;
  if (!absl::SimpleAtoi(text, &v)) {
    return absl::InvalidArgumentError(absl::StrCat("'", text, "' is not a whole number"));
  }
  if (v < 0) return absl::InvalidArgumentError(absl::StrCat("count must not be negative, got ", v));
  return v;
}

std::string FormatCpu(int64_t millis) {
  if (millis % 1000 == 0) return absl::StrCat(millis / 1000);
  if (millis < 1000) return absl::StrCat(millis, "m");
  std::string s = absl::StrFormat("%.3f", millis / 1000.0);
  while (s.back() == '0') s.pop_back();
  return s;
}

std::string FormatBytes(int64_t bytes) {
  static constexpr const char* kUnits[] = {"", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"};
  if (bytes < 1024) return absl::StrCat(bytes);
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 6) {
    v /= 1024;
    ++u;
  }
  if (std::fabs(v - std::round(v)) < 1e-9) return absl::StrCat(static_cast<int64_t>(std::round(v)), kUnits[u]);
  std::string s = absl::StrFormat("%.1f", v);
  if (s.size() > 2 && s.substr(s.size() - 2) == ".0") s.resize(s.size() - 2);
  return absl::StrCat(s, kUnits[u]);
}

std::string FormatDurationMs(int64_t ms) {
  if (ms < 1000) return absl::StrCat(ms, "ms");
  if (ms < 60'000) {
    if (ms % 1000 == 0) return absl::StrCat(ms / 1000, "s");
    std::string s = absl::StrFormat("%.1f", ms / 1000.0);
    return absl::StrCat(s, "s");
  }
  int64_t s = ms / 1000;
  int64_t h = s / 3600, m = (s % 3600) / 60, sec = s % 60;
  std::string out;
  if (h) absl::StrAppend(&out, h, "h");
  if (m) absl::StrAppend(&out, m, "m");
  if (sec || out.empty()) absl::StrAppend(&out, sec, "s");
  return out;
}

}  // namespace herd
