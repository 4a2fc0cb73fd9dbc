#include "base/ids.h"

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "base/priority.h"

namespace herd {
namespace {

TEST(Ids, Names) {
  EXPECT_TRUE(ValidateJobName("hello").ok());
  EXPECT_TRUE(ValidateJobName("web-frontend_2.v1").ok());
  EXPECT_FALSE(ValidateJobName("").ok());
  EXPECT_FALSE(ValidateJobName("3d").ok());
  EXPECT_FALSE(ValidateJobName("Hello").ok());
  EXPECT_FALSE(ValidateJobName("a/b").ok());
  EXPECT_FALSE(ValidateJobName("trailing-").ok());
  EXPECT_FALSE(ValidateJobName(std::string(64, 'a')).ok());
}

TEST(Ids, Refs) {
  auto j = ParseJobRef("alice/hello");
  ASSERT_TRUE(j.ok());
  EXPECT_EQ(j->user, "alice");
  EXPECT_EQ(j->Id(), "alice/hello");
  EXPECT_EQ(ParseJobRef("hello")->user, "");
  EXPECT_FALSE(ParseJobRef("a/b/c").ok());
  auto t = ParseTaskRef("hello/3");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->job.name, "hello");
  EXPECT_EQ(t->index, 3);
  auto t2 = ParseTaskRef("alice/hello/0");
  ASSERT_TRUE(t2.ok());
  EXPECT_EQ(t2->job.user, "alice");
  EXPECT_FALSE(ParseTaskRef("hello").ok());
  EXPECT_FALSE(ParseTaskRef("hello/-1").ok());
  EXPECT_EQ(RunId("alice/hello", 2, 5), "alice.hello.2.5");
}

TEST(Priority, Bands) {
  EXPECT_EQ(BandOf(0), Band::kFree);
  EXPECT_EQ(BandOf(100), Band::kBatch);
  EXPECT_EQ(BandOf(119), Band::kMid);
  EXPECT_EQ(BandOf(200), Band::kProduction);
  EXPECT_EQ(BandOf(360), Band::kMonitoring);
  EXPECT_EQ(ParseBand("production"), Band::kProduction);
  EXPECT_FALSE(ParseBand("urgent").has_value());
  EXPECT_TRUE(MayPreempt(200, 100));
  EXPECT_FALSE(MayPreempt(300, 200));  // production never preempts production
  EXPECT_TRUE(MayPreempt(360, 200));   // monitoring may preempt production
  EXPECT_FALSE(MayPreempt(100, 100));
  EXPECT_TRUE(IsProd(120));
  EXPECT_FALSE(IsProd(119));
}

}  // namespace
}  // namespace herd

namespace herd {
namespace {

TEST(Ids, UntrustedNamesAreQuotedShortAndPrintable) {
  EXPECT_EQ(Quote("web"), "web");
  EXPECT_EQ(Quote("caf\xc3\xa9"), "caf\\xc3\\xa9");  // no broken byte reaches a terminal
  EXPECT_EQ(Quote("a\nb\x1b[2J"), "a\\x0ab\\x1b[2J");
  const std::string huge(10'000, 'x');
  EXPECT_EQ(Quote(huge), std::string(64, 'x') + "...(10000 bytes)");
  absl::Status st = ValidateJobName(huge);
  EXPECT_LT(st.message().size(), 200u) << st.message();
  st = ValidateJobName("w\xc3\xa9" "b");
  EXPECT_TRUE(absl::StrContains(st.message(), "'w\\xc3\\xa9b'")) << st.message();
}

}  // namespace
}  // namespace herd
