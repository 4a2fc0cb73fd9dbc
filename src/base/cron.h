// Cron schedules: the 5-field syntax of Vixie cron (crontab(5)), evaluated
// in a time zone, for scheduled jobs (spec `schedule:`, docs/batch.md).
//
//   minute hour day-of-month month day-of-week
//   0-59   0-23 1-31         1-12  0-7 (0 and 7 are Sunday)
//     or jan-dec / sun-sat (any case) for month and day of week
//
// Each field is `*` or a comma-separated list of `N`, `A-B`, `*/S`, `A-B/S`
// or `N/S` (N to the field's end, every S). As in Vixie cron, when both
// day fields are restricted (neither starts with `*`) a day matches if
// either does; otherwise both must. The macros @yearly (@annually),
// @monthly, @weekly, @daily (@midnight) and @hourly stand for their usual
// expressions.
//
// Daylight saving time: a time that does not exist (skipped when clocks
// go forward) runs at the moment of the change; a time that occurs twice
// (when clocks go back) runs once, at its first occurrence.
//
// Pure: no I/O (the caller loads the time zone).
#pragma once

#include <bitset>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace herd {

class CronSchedule {
 public:
  // INVALID_ARGUMENT naming the field and what is wrong with it, e.g.
  // "minute field '61': 61 is outside 0-59".
  static absl::StatusOr<CronSchedule> Parse(absl::string_view text);

  // The first time strictly after `after` that the schedule names, in
  // `zone`; nullopt if there is none within the next 5 years (e.g.
  // "0 0 31 2 *").
  std::optional<absl::Time> Next(absl::Time after, absl::TimeZone zone) const;

  // Whether the civil minute matches (ignoring time zones).
  bool Matches(const absl::CivilMinute& m) const;

  const std::string& text() const { return text_; }

 private:
  std::string text_;
  std::bitset<60> minutes_;
  std::bitset<24> hours_;
  std::bitset<32> days_;    // 1-31
  std::bitset<13> months_;  // 1-12
  std::bitset<7> weekdays_; // 0-6, Sunday = 0
  bool day_star_ = false;
  bool weekday_star_ = false;
};

}  // namespace herd
