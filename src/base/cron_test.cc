#include "base/cron.h"

#include <gtest/gtest.h>

#include "absl/time/civil_time.h"

namespace herd {
namespace {

absl::Time Utc(int y, int mo, int d, int h, int mi) {
  return absl::FromCivil(absl::CivilMinute(y, mo, d, h, mi), absl::UTCTimeZone());
}

absl::TimeZone Zone(const char* name) {
  absl::TimeZone z;
  EXPECT_TRUE(absl::LoadTimeZone(name, &z)) << name;
  return z;
}

CronSchedule Cron(const char* text) {
  auto c = CronSchedule::Parse(text);
  EXPECT_TRUE(c.ok()) << text << ": " << c.status();
  return c.ok() ? *c : *CronSchedule::Parse("* * * * *");
}

std::string NextUtc(const char* text, absl::Time after, absl::TimeZone zone = absl::UTCTimeZone()) {
  auto n = Cron(text).Next(after, zone);
  if (!n) return "none";
  return absl::FormatTime("%Y-%m-%d %H:%M", *n, absl::UTCTimeZone());
}

TEST(CronTest, EveryFifteenMinutes) {
  EXPECT_EQ(NextUtc("*/15 * * * *", Utc(2025, 6, 1, 10, 7)), "2025-06-01 10:15");
  // Strictly after: a due time is never returned twice.
  EXPECT_EQ(NextUtc("*/15 * * * *", Utc(2025, 6, 1, 10, 15)), "2025-06-01 10:30");
  EXPECT_EQ(NextUtc("*/15 * * * *", Utc(2025, 6, 1, 23, 50)), "2025-06-02 00:00");
}

TEST(CronTest, NumbersRangesListsAndSteps) {
  EXPECT_EQ(NextUtc("5 4 * * *", Utc(2025, 6, 1, 10, 0)), "2025-06-02 04:05");
  EXPECT_EQ(NextUtc("0 9-11 * * *", Utc(2025, 6, 1, 10, 0)), "2025-06-01 11:00");
  EXPECT_EQ(NextUtc("0,30 8,17 * * *", Utc(2025, 6, 1, 8, 30)), "2025-06-01 17:00");
  EXPECT_EQ(NextUtc("10-50/20 * * * *", Utc(2025, 6, 1, 8, 31)), "2025-06-01 08:50");
  EXPECT_EQ(NextUtc("10/20 * * * *", Utc(2025, 6, 1, 8, 51)), "2025-06-01 09:10");
  // 2025-06-06 is a Friday: weekdays only skips to Monday.
  EXPECT_EQ(NextUtc("0 9 * * 1-5", Utc(2025, 6, 6, 10, 0)), "2025-06-09 09:00");
}

TEST(CronTest, NamesAndSundayAsSeven) {
  EXPECT_EQ(NextUtc("0 0 1 jan,JUL *", Utc(2025, 2, 1, 0, 0)), "2025-07-01 00:00");
  // 2025-06-01 is a Sunday.
  EXPECT_EQ(NextUtc("0 12 * * sun", Utc(2025, 5, 28, 0, 0)), "2025-06-01 12:00");
  EXPECT_EQ(NextUtc("0 12 * * 7", Utc(2025, 5, 28, 0, 0)), "2025-06-01 12:00");
  EXPECT_EQ(NextUtc("0 12 * * mon-fri", Utc(2025, 5, 31, 0, 0)), "2025-06-02 12:00");
}

TEST(CronTest, BothDayFieldsRestrictedMatchEither) {
  // The 13th, or any Friday (Vixie cron): 2025-06-06 is a Friday, before the 13th.
  EXPECT_EQ(NextUtc("0 0 13 * 5", Utc(2025, 6, 1, 0, 0)), "2025-06-06 00:00");
  // A star day of week: only the 13th.
  EXPECT_EQ(NextUtc("0 0 13 * *", Utc(2025, 6, 1, 0, 0)), "2025-06-13 00:00");
}

TEST(CronTest, Macros) {
  EXPECT_EQ(NextUtc("@hourly", Utc(2025, 6, 1, 10, 7)), "2025-06-01 11:00");
  EXPECT_EQ(NextUtc("@daily", Utc(2025, 6, 1, 10, 7)), "2025-06-02 00:00");
  EXPECT_EQ(NextUtc("@yearly", Utc(2025, 6, 1, 10, 7)), "2026-01-01 00:00");
}

TEST(CronTest, NeverDue) { EXPECT_EQ(NextUtc("0 0 31 2 *", Utc(2025, 1, 1, 0, 0)), "none"); }

TEST(CronTest, TimeZone) {
  // 09:00 in Berlin in June is 07:00 UTC (CEST, +2); in January 08:00 (CET, +1).
  absl::TimeZone berlin = Zone("Europe/Berlin");
  EXPECT_EQ(NextUtc("0 9 * * *", Utc(2025, 6, 1, 0, 0), berlin), "2025-06-01 07:00");
  EXPECT_EQ(NextUtc("0 9 * * *", Utc(2025, 1, 10, 0, 0), berlin), "2025-01-10 08:00");
}

TEST(CronTest, SpringForwardRunsSkippedTimesAtTheChange) {
  // Berlin, 2025-03-30: 02:00 CET becomes 03:00 CEST (01:00 UTC); 02:30
  // does not exist that day.
  absl::TimeZone berlin = Zone("Europe/Berlin");
  EXPECT_EQ(NextUtc("30 2 * * *", Utc(2025, 3, 29, 12, 0), berlin), "2025-03-30 01:00");
  EXPECT_EQ(NextUtc("30 2 * * *", Utc(2025, 3, 30, 1, 0), berlin), "2025-03-31 00:30");
  // Several skipped times run once, at the change, and the schedule goes on.
  EXPECT_EQ(NextUtc("*/30 * * * *", Utc(2025, 3, 30, 0, 45), berlin), "2025-03-30 01:00");
  EXPECT_EQ(NextUtc("*/30 * * * *", Utc(2025, 3, 30, 1, 0), berlin), "2025-03-30 01:30");
}

TEST(CronTest, FallBackRunsRepeatedTimesOnce) {
  // Berlin, 2025-10-26: 03:00 CEST becomes 02:00 CET (01:00 UTC); 02:30
  // happens at 00:30 and at 01:30 UTC. It runs at the first only.
  absl::TimeZone berlin = Zone("Europe/Berlin");
  EXPECT_EQ(NextUtc("30 2 * * *", Utc(2025, 10, 25, 12, 0), berlin), "2025-10-26 00:30");
  EXPECT_EQ(NextUtc("30 2 * * *", Utc(2025, 10, 26, 0, 30), berlin), "2025-10-27 01:30");
  // From inside the second pass of the hour, the next is after it.
  EXPECT_EQ(NextUtc("*/15 * * * *", Utc(2025, 10, 26, 1, 10), berlin), "2025-10-26 02:00");
}

TEST(CronTest, Errors) {
  auto msg = [](const char* text) { return std::string(CronSchedule::Parse(text).status().message()); };
  EXPECT_EQ(msg("61 * * * *"), "minute field '61': 61 is outside 0-59");
  EXPECT_EQ(msg("* 24 * * *"), "hour field '24': 24 is outside 0-23");
  EXPECT_EQ(msg("* * 0 * *"), "day-of-month field '0': 0 is outside 1-31");
  EXPECT_EQ(msg("* * * 13 *"), "month field '13': 13 is outside 1-12");
  EXPECT_EQ(msg("* * * * 8"), "day-of-week field '8': 8 is outside 0-7");
  EXPECT_EQ(msg("* * * *"),
            "'* * * *' has 4 fields; a schedule has 5: minute hour day-of-month month day-of-week, e.g. \"*/15 * * * *\"");
  EXPECT_EQ(msg("*/0 * * * *"), "minute field '*/0': step '0' is not a number 1-60");
  EXPECT_EQ(msg("30-10 * * * *"), "minute field '30-10': range '30-10' runs backwards (write the lower bound first)");
  EXPECT_EQ(msg("1,,2 * * * *"), "minute field '1,,2': an empty list item (two commas, or one at an end)");
  EXPECT_EQ(msg("* * * foo *"), "month field 'foo': 'foo' is not a number 1-12 or a name (jan, feb, ...)");
  EXPECT_EQ(msg("x * * * *"), "minute field 'x': 'x' is not a number 0-59");
  EXPECT_EQ(msg("@often"), "unknown macro '@often' (@yearly, @annually, @monthly, @weekly, @daily, @midnight or @hourly)");
  EXPECT_FALSE(CronSchedule::Parse("").ok());
}

}  // namespace
}  // namespace herd
