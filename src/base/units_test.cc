#include "base/units.h"

#include <gtest/gtest.h>

namespace herd {
namespace {

TEST(Units, Cpu) {
  EXPECT_EQ(*ParseCpuMillis("500m"), 500);
  EXPECT_EQ(*ParseCpuMillis("0.5"), 500);
  EXPECT_EQ(*ParseCpuMillis("2"), 2000);
  EXPECT_EQ(*ParseCpuMillis(" 1.25 "), 1250);
  EXPECT_FALSE(ParseCpuMillis("-1").ok());
  EXPECT_FALSE(ParseCpuMillis("0.0001").ok());
  EXPECT_FALSE(ParseCpuMillis("2cores").ok());
  EXPECT_FALSE(ParseCpuMillis("").ok());
  EXPECT_FALSE(ParseCpuMillis("abc").ok());
  EXPECT_NE(ParseCpuMillis("2x").status().message().find("unknown CPU unit 'x'"), std::string::npos);
}

TEST(Units, Bytes) {
  EXPECT_EQ(*ParseBytes("64Mi"), 64LL << 20);
  EXPECT_EQ(*ParseBytes("1.5Gi"), 3LL << 29);
  EXPECT_EQ(*ParseBytes("1G"), 1'000'000'000);
  EXPECT_EQ(*ParseBytes("1024"), 1024);
  EXPECT_EQ(*ParseBytes("512MiB"), 512LL << 20);
  EXPECT_FALSE(ParseBytes("512Mb").ok());
  EXPECT_FALSE(ParseBytes("-5Mi").ok());
  EXPECT_FALSE(ParseBytes("1e30Ei").ok());
  EXPECT_NE(ParseBytes("512Mb").status().message().find("unknown unit 'Mb'"), std::string::npos);
}

TEST(Units, Duration) {
  EXPECT_EQ(*ParseDurationMs("30s"), 30'000);
  EXPECT_EQ(*ParseDurationMs("500ms"), 500);
  EXPECT_EQ(*ParseDurationMs("1m30s"), 90'000);
  EXPECT_EQ(*ParseDurationMs("2h"), 7'200'000);
  EXPECT_EQ(*ParseDurationMs("10"), 10'000);
  EXPECT_EQ(*ParseDurationMs("1.5s"), 1500);
  EXPECT_FALSE(ParseDurationMs("10x").ok());
  EXPECT_FALSE(ParseDurationMs("-1s").ok());
  EXPECT_FALSE(ParseDurationMs("").ok());
}

TEST(Units, Format) {
  EXPECT_EQ(FormatCpu(500), "500m");
  EXPECT_EQ(FormatCpu(2000), "2");
  EXPECT_EQ(FormatCpu(1500), "1.5");
  EXPECT_EQ(FormatBytes(64LL << 20), "64Mi");
  EXPECT_EQ(FormatBytes(3LL << 29), "1.5Gi");
  EXPECT_EQ(FormatBytes(100), "100");
  EXPECT_EQ(FormatDurationMs(1500), "1.5s");
  EXPECT_EQ(FormatDurationMs(90'000), "1m30s");
  EXPECT_EQ(FormatDurationMs(250), "250ms");
}

}  // namespace
}  // namespace herd
