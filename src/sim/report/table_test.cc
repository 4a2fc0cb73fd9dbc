#include "sim/report/table.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace herd::sim::report {
namespace {

Table Small() {
  Table t({"cell", "machines", "overhead"});
  t.AddRow({"a", 12500, Num(0.2312, 3)});
  t.AddRow({"bigger cell", 800, Num(-1.5, 1)});
  return t;
}

TEST(Table, TextAlignsStringsLeftAndNumbersRight) {
  EXPECT_EQ(Small().ToText(),
            "cell         machines  overhead\n"
            "-----------  --------  --------\n"
            "a               12500     0.231\n"
            "bigger cell       800      -1.5\n");
}

TEST(Table, TextCountsCodePointsAndShowsNonFiniteAsDash) {
  Table t({"k", "v"});
  t.AddRow({"≥10 TiB", NAN});
  t.AddRow({"x\ny", Cell()});
  EXPECT_EQ(t.ToText(),
            "k        v\n"
            "-------  -\n"
            "≥10 TiB  -\n"
            "x\\ny\n");
}

TEST(Table, CsvQuotesCommasQuotesAndNewlines) {
  Table t({"name", "note", "v"});
  t.AddRow({"plain", "a,b", 1});
  t.AddRow({"say \"hi\"", "two\nlines", Num(2.5, 2)});
  t.AddRow({"cr\r", "", INFINITY});
  EXPECT_EQ(t.ToCsv(),
            "name,note,v\n"
            "plain,\"a,b\",1\n"
            "\"say \"\"hi\"\"\",\"two\nlines\",2.50\n"
            "\"cr\r\",,\n");
}

TEST(Table, JsonEscapesStringsAndWritesNumbers) {
  Table t({"name", "v", "empty"});
  t.AddRow({"q\"b\\s\n\t\x01", Num(0.125, 3), Cell()});
  t.AddRow({"ok", NAN, -0.0001});
  EXPECT_EQ(t.ToJson(),
            "[\n"
            "  {\"name\": \"q\\\"b\\\\s\\n\\t\\u0001\", \"v\": 0.125, \"empty\": null},\n"
            "  {\"name\": \"ok\", \"v\": null, \"empty\": 0.00}\n"
            "]\n");
  EXPECT_EQ(Table({"a"}).ToJson(), "[]\n");
}

TEST(Table, CellsKeepTheirPrecision) {
  EXPECT_EQ(Cell(3).text(), "3");
  EXPECT_EQ(Cell(int64_t{-7}).text(), "-7");
  EXPECT_EQ(Cell(1.0 / 3).text(), "0.33");
  EXPECT_EQ(Num(2.0 / 3, 4).text(), "0.6667");
  EXPECT_EQ(Num(-0.0, 1).text(), "0.0");
  EXPECT_EQ(Cell("s").kind(), Cell::Kind::kString);
}

std::string Slurp(const std::filesystem::path& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

TEST(Table, WriteFilesCreatesTheDirectoryAndAllThreeFiles) {
  const auto dir = std::filesystem::path(testing::TempDir()) / "herd_report_table" / "nested";
  std::filesystem::remove_all(dir);
  const Table t = Small();
  ASSERT_TRUE(WriteFiles(t, dir.string(), "fig5").ok());
  EXPECT_EQ(Slurp(dir / "fig5.txt"), t.ToText());
  EXPECT_EQ(Slurp(dir / "fig5.csv"), t.ToCsv());
  EXPECT_EQ(Slurp(dir / "fig5.json"), t.ToJson());
  EXPECT_FALSE(WriteFiles(t, dir.string(), "").ok());
  // A file where the directory should be.
  EXPECT_FALSE(WriteFiles(t, (dir / "fig5.txt").string(), "x").ok());
}

}  // namespace
}  // namespace herd::sim::report
