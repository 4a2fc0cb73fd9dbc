#include "spec/constraint_text.h"

#include <gtest/gtest.h>

#include "absl/strings/str_join.h"

namespace herd::spec {
namespace {

using C = v1::Constraint;

struct Good {
  const char* text;
  const char* attribute;
  C::Op op;
  std::vector<std::string> values;
  const char* formatted;
};

TEST(ConstraintTextTest, ParsesEveryOperator) {
  const Good cases[] = {
      {"arch == amd64", "arch", C::EQ, {"amd64"}, "arch == amd64"},
      {"rack != r1", "rack", C::NE, {"r1"}, "rack != r1"},
      {"zone in [a, b]", "zone", C::IN, {"a", "b"}, "zone in [a, b]"},
      {"zone not in [a,b]", "zone", C::NOT_IN, {"a", "b"}, "zone not in [a, b]"},
      {"zone   not   in a", "zone", C::NOT_IN, {"a"}, "zone not in [a]"},
      {"zone in ['us-east', \"eu\"]", "zone", C::IN, {"us-east", "eu"}, "zone in [us-east, eu]"},
      {"ssd exists", "ssd", C::EXISTS, {}, "ssd exists"},
      {"gpu not exists", "gpu", C::NOT_EXISTS, {}, "gpu not exists"},
      {"kernel >= 5.10", "kernel", C::GE, {"5.10"}, "kernel >= 5.10"},
      {"cores > 4", "cores", C::GT, {"4"}, "cores > 4"},
      {"cores>4", "cores", C::GT, {"4"}, "cores > 4"},
      {"mem < 64", "mem", C::LT, {"64"}, "mem < 64"},
      {"mem <= 64", "mem", C::LE, {"64"}, "mem <= 64"},
      {"topology.kubernetes.io/zone == z1", "topology.kubernetes.io/zone", C::EQ, {"z1"},
       "topology.kubernetes.io/zone == z1"},
      {"  os == 'debian 12'  ", "os", C::EQ, {"debian 12"}, "os == debian 12"},
  };
  for (const Good& g : cases) {
    SCOPED_TRACE(g.text);
    absl::StatusOr<C> c = ParseConstraint(g.text);
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_EQ(c->attribute(), g.attribute);
    EXPECT_EQ(c->op(), g.op);
    EXPECT_EQ(std::vector<std::string>(c->values().begin(), c->values().end()), g.values);
    EXPECT_FALSE(c->soft());
    EXPECT_EQ(FormatConstraint(*c), g.formatted);
  }
}

TEST(ConstraintTextTest, RejectsBadForms) {
  const struct {
    const char* text;
    const char* want;
  } cases[] = {
      {"arch = amd64", "unknown operator '=' in 'arch = amd64' (use ==)"},
      {"arch ~= amd64", "unknown operator '~='"},
      {"arch", "missing operator"},
      {"== amd64", "missing attribute name"},
      {"arch ==", "'==' needs a value"},
      {"zone in []", "'in' needs at least one value"},
      {"zone in [a, b", "missing ']'"},
      {"zone in [a,,b]", "empty value"},
      {"ssd exists yes", "'exists' takes no value"},
      {"cores > 4 5", "'>' takes one value"},
      {"zone notin [a]", "unknown operator 'notin'"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.text);
    absl::StatusOr<C> got = ParseConstraint(c.text);
    ASSERT_FALSE(got.ok());
    EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(got.status().message().find(c.want), absl::string_view::npos) << got.status().message();
  }
}

TEST(ConstraintTextTest, ParsesOpNames) {
  EXPECT_EQ(ParseConstraintOp("=="), C::EQ);
  EXPECT_EQ(ParseConstraintOp("not in"), C::NOT_IN);
  EXPECT_EQ(ParseConstraintOp("NOT_IN"), C::NOT_IN);
  EXPECT_EQ(ParseConstraintOp("not_exists"), C::NOT_EXISTS);
  EXPECT_EQ(ParseConstraintOp(">="), C::GE);
  EXPECT_EQ(ParseConstraintOp("ge"), C::GE);
  EXPECT_EQ(ParseConstraintOp("="), std::nullopt);
  EXPECT_EQ(ParseConstraintOp("like"), std::nullopt);
}

}  // namespace
}  // namespace herd::spec
