// A small typed table for simulator results, rendered three ways: aligned
// text for a terminal, CSV (RFC 4180 quoting) for spreadsheets, and JSON (an
// array of objects keyed by column name) for scripts.
//
//   Table t({"cell", "machines", "overhead"});
//   t.AddRow({"a", 12500, Num(0.2312, 3)});
//   std::cout << t.ToText();
//   HERD_RETURN_IF_ERROR(WriteFiles(t, "out/fig5", "segregation"));
//
// A cell is empty, a string, or a number printed with a fixed number of
// decimals (the same digits in all three renderings). NaN and infinities are
// "-" in text, empty in CSV and null in JSON. Rendering is deterministic.
#pragma once

#include <concepts>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace herd::sim::report {

class Cell {
 public:
  enum class Kind { kEmpty, kString, kNumber };

  Cell() = default;
  Cell(std::string s) : kind_(Kind::kString), text_(std::move(s)) {}  // NOLINT: implicit by design
  Cell(const char* s) : Cell(std::string(s)) {}                       // NOLINT
  // Integers print without decimals; doubles with 2 unless given (see Num).
  template <std::integral T>
  Cell(T v) : Cell(static_cast<double>(v), 0) {}  // NOLINT
  Cell(double v, int precision = 2);              // NOLINT

  Kind kind() const { return kind_; }
  double number() const { return number_; }
  int precision() const { return precision_; }
  // The string, or the number with `precision` decimals ("" when empty,
  // "nan"/"inf"/"-inf" for non-finite numbers).
  const std::string& text() const { return text_; }
  bool finite_number() const;

 private:
  Kind kind_ = Kind::kEmpty;
  std::string text_;
  double number_ = 0;
  int precision_ = 0;
};

// A number cell with `precision` decimals (0..12).
inline Cell Num(double v, int precision) { return Cell(v, precision); }

class Table {
 public:
  explicit Table(std::vector<std::string> columns);

  // Appends a row; it must have exactly one cell per column (HERD_CHECK).
  Table& AddRow(std::vector<Cell> cells);

  const std::vector<std::string>& columns() const { return columns_; }
  const std::vector<std::vector<Cell>>& rows() const { return rows_; }

  // Columns separated by two spaces, a dashed rule under the header; a column
  // whose cells are all numbers (or empty) is right-aligned, others left.
  // Widths count UTF-8 code points. No trailing spaces; ends with '\n'.
  std::string ToText() const;
  // Header then rows, '\n'-terminated; a field holding a comma, a quote, CR
  // or LF is quoted and its quotes doubled (RFC 4180).
  std::string ToCsv() const;
  // [\n  {"col": value, ...},\n  ...\n]\n with keys in column order.
  std::string ToJson() const;

 private:
  std::vector<std::string> columns_;
  std::vector<std::vector<Cell>> rows_;
};

// Writes dir/basename.txt, .csv and .json, creating `dir` if needed.
absl::Status WriteFiles(const Table& table, const std::string& dir, const std::string& basename);

// Writes `contents` to `path` (creating its parent directory); the one file
// seam of this module, shared with the SVG writer.
absl::Status WriteTextFile(const std::string& path, const std::string& contents);

// JSON string literal for `s` (quotes included; control characters, quote and
// backslash escaped).
std::string JsonQuote(const std::string& s);

}  // namespace herd::sim::report
