#include "base/resources.h"

#include <gtest/gtest.h>

namespace herd {
namespace {

TEST(ResourceVector, ArithmeticAndFit) {
  ResourceVector a{.cpu_millis = 1000, .memory_bytes = 1 << 20};
  a.SetExtended("gpu", 2);
  ResourceVector b{.cpu_millis = 500, .memory_bytes = 1 << 19};
  b.SetExtended("gpu", 1);
  EXPECT_TRUE(b.FitsIn(a));
  EXPECT_FALSE(a.FitsIn(b));
  EXPECT_EQ(a.FirstShortfall(b), "cpu");
  ResourceVector c = a - b;
  EXPECT_EQ(c.cpu_millis, 500);
  EXPECT_EQ(c.Extended("gpu"), 1);
  c -= b;
  EXPECT_TRUE(c.IsZero());
  ResourceVector d;
  d.SetExtended("tpu", 1);
  EXPECT_EQ(d.FirstShortfall(a), "tpu");
}

TEST(ResourceVector, ProtoRoundTrip) {
  ResourceVector a{.cpu_millis = 250, .memory_bytes = 64 << 20, .disk_bytes = 7, .ports = 2};
  a.SetExtended("gpu", 3);
  EXPECT_EQ(ResourceVector::FromProto(a.ToProto()), a);
  EXPECT_EQ(a.ToString(), "cpu=250m memory=64Mi disk=7 ports=2 gpu=3");
}

TEST(ResourceVector, ParseList) {
  auto v = ParseResourceList("cpu=2,memory=4Gi,disk=10Gi,ports=100,gpu=2");
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->cpu_millis, 2000);
  EXPECT_EQ(v->memory_bytes, 4LL << 30);
  EXPECT_EQ(v->ports, 100);
  EXPECT_EQ(v->Extended("gpu"), 2);
  EXPECT_FALSE(ParseResourceList("cpu").ok());
  EXPECT_FALSE(ParseResourceList("memory=lots").ok());
}

}  // namespace
}  // namespace herd
