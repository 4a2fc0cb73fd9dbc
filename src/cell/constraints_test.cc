#include "cell/constraints.h"

#include <gtest/gtest.h>

namespace herd::cell {
namespace {

v1::Constraint C(const std::string& attr, v1::Constraint::Op op, std::vector<std::string> values = {}) {
  v1::Constraint c;
  c.set_attribute(attr);
  c.set_op(op);
  for (auto& v : values) c.add_values(v);
  return c;
}

TEST(Constraints, CompareValues) {
  EXPECT_LT(CompareValues("5.9", "5.10"), 0);
  EXPECT_GT(CompareValues("10", "9"), 0);
  EXPECT_EQ(CompareValues("1.2.3", "1.2.3"), 0);
  EXPECT_LT(CompareValues("1.2", "1.2.1"), 0);
  EXPECT_LT(CompareValues("9", "10"), 0);  // numeric, not lexicographic
  EXPECT_LT(CompareValues("2.5", "10"), 0);
  EXPECT_LT(CompareValues("1.2.3-rc1", "1.2.3-rc2"), 0);
  EXPECT_LT(CompareValues("abc", "abd"), 0);
}

TEST(Constraints, Table) {
  Attributes a;
  a["arch"] = "amd64";
  a["kernel"] = "5.10.0";
  a["cores"] = "16";
  struct Case {
    v1::Constraint c;
    bool want;
  } cases[] = {
      {C("arch", v1::Constraint::EQ, {"amd64"}), true},
      {C("arch", v1::Constraint::EQ, {"arm64"}), false},
      {C("arch", v1::Constraint::NE, {"arm64"}), true},
      {C("missing", v1::Constraint::NE, {"x"}), true},
      {C("missing", v1::Constraint::EQ, {"x"}), false},
      {C("arch", v1::Constraint::IN, {"arm64", "amd64"}), true},
      {C("arch", v1::Constraint::NOT_IN, {"arm64", "amd64"}), false},
      {C("missing", v1::Constraint::NOT_IN, {"a"}), true},
      {C("arch", v1::Constraint::EXISTS), true},
      {C("ssd", v1::Constraint::EXISTS), false},
      {C("ssd", v1::Constraint::NOT_EXISTS), true},
      {C("kernel", v1::Constraint::GE, {"5.9"}), true},
      {C("kernel", v1::Constraint::LT, {"5.9"}), false},
      {C("cores", v1::Constraint::GT, {"8"}), true},
      {C("cores", v1::Constraint::LE, {"16"}), true},
      {C("missing", v1::Constraint::GT, {"1"}), false},
  };
  for (const Case& c : cases) EXPECT_EQ(Matches(c.c, a), c.want) << Describe(c.c);
  EXPECT_EQ(Describe(C("zone", v1::Constraint::IN, {"a", "b"})), "zone in [a, b]");
}

}  // namespace
}  // namespace herd::cell
