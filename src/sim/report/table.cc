#include "sim/report/table.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/check.h"

namespace herd::sim::report {
namespace {

// Code points in a UTF-8 string (continuation bytes are not counted).
size_t DisplayWidth(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

// A cell as the text table shows it: "-" for a non-finite number, line breaks
// as visible escapes (a raw one would break the alignment).
std::string TextField(const Cell& cell) {
  if (cell.kind() == Cell::Kind::kNumber && !cell.finite_number()) return "-";
  std::string s = cell.text();
  for (size_t p; (p = s.find_first_of("\r\n")) != std::string::npos;) s.replace(p, 1, s[p] == '\n' ? "\\n" : "\\r");
  return s;
}

bool NeedsCsvQuotes(const std::string& s) { return s.find_first_of(",\"\r\n") != std::string::npos; }

std::string CsvField(const std::string& s) {
  if (!NeedsCsvQuotes(s)) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  out += '"';
  return out;
}

std::string JsonValue(const Cell& c) {
  switch (c.kind()) {
    case Cell::Kind::kEmpty:
      return "null";
    case Cell::Kind::kString:
      return JsonQuote(c.text());
    case Cell::Kind::kNumber:
      return c.finite_number() ? c.text() : "null";
  }
  return "null";
}

}  // namespace

Cell::Cell(double v, int precision)
    : kind_(Kind::kNumber), number_(v), precision_(std::clamp(precision, 0, 12)) {
  if (std::isnan(v)) {
    text_ = "nan";
  } else if (std::isinf(v)) {
    text_ = v > 0 ? "inf" : "-inf";
  } else {
    text_ = absl::StrFormat("%.*f", precision_, v);
    // -0.00 reads as a sign error; print it as 0.00.
    if (text_[0] == '-' && text_.find_first_not_of("-0.") == std::string::npos) text_.erase(0, 1);
  }
}

bool Cell::finite_number() const { return kind_ == Kind::kNumber && std::isfinite(number_); }

Table::Table(std::vector<std::string> columns) : columns_(std::move(columns)) {}

Table& Table::AddRow(std::vector<Cell> cells) {
  HERD_CHECK_MSG(cells.size() == columns_.size(), "Table::AddRow: one cell per column");
  rows_.push_back(std::move(cells));
  return *this;
}

std::string Table::ToText() const {
  const size_t n = columns_.size();
  std::vector<size_t> width(n);
  std::vector<bool> right(n, true);
  for (size_t c = 0; c < n; ++c) {
    width[c] = DisplayWidth(columns_[c]);
    bool any_number = false;
    for (const auto& row : rows_) {
      const Cell& cell = row[c];
      if (cell.kind() == Cell::Kind::kString) right[c] = false;
      any_number |= cell.kind() == Cell::Kind::kNumber;
      width[c] = std::max(width[c], DisplayWidth(TextField(cell)));
    }
    if (!any_number) right[c] = false;
  }
  std::string out;
  auto emit_line = [&](const std::vector<std::string>& fields) {
    std::string line;
    for (size_t c = 0; c < n; ++c) {
      if (c > 0) line += "  ";
      const std::string pad(width[c] - DisplayWidth(fields[c]), ' ');
      line += right[c] ? pad + fields[c] : fields[c] + pad;
    }
    line.erase(line.find_last_not_of(' ') + 1);
    out += line;
    out += '\n';
  };
  emit_line(columns_);
  std::vector<std::string> rule(n);
  for (size_t c = 0; c < n; ++c) rule[c] = std::string(width[c], '-');
  emit_line(rule);
  for (const auto& row : rows_) {
    std::vector<std::string> fields(n);
    for (size_t c = 0; c < n; ++c) {
      const Cell& cell = row[c];
      fields[c] = TextField(cell);
    }
    emit_line(fields);
  }
  return out;
}

std::string Table::ToCsv() const {
  std::string out;
  auto emit = [&](const std::vector<std::string>& fields) {
    for (size_t c = 0; c < fields.size(); ++c) {
      if (c > 0) out += ',';
      out += CsvField(fields[c]);
    }
    out += '\n';
  };
  emit(columns_);
  for (const auto& row : rows_) {
    std::vector<std::string> fields;
    fields.reserve(row.size());
    for (const Cell& cell : row) {
      fields.push_back(cell.kind() == Cell::Kind::kNumber && !cell.finite_number() ? "" : cell.text());
    }
    emit(fields);
  }
  return out;
}

std::string Table::ToJson() const {
  if (rows_.empty()) return "[]\n";
  std::string out = "[\n";
  for (size_t r = 0; r < rows_.size(); ++r) {
    out += "  {";
    for (size_t c = 0; c < columns_.size(); ++c) {
      if (c > 0) out += ", ";
      absl::StrAppend(&out, JsonQuote(columns_[c]), ": ", JsonValue(rows_[r][c]));
    }
    out += r + 1 < rows_.size() ? "},\n" : "}\n";
  }
  out += "]\n";
  return out;
}

std::string JsonQuote(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          out += absl::StrFormat("\\u%04x", c);
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += '"';
  return out;
}

absl::Status WriteTextFile(const std::string& path, const std::string& contents) {
  const std::filesystem::path p(path);
  if (p.has_parent_path()) {
    std::error_code ec;
    std::filesystem::create_directories(p.parent_path(), ec);
    if (ec) return absl::InternalError(absl::StrCat("create ", p.parent_path().string(), ": ", ec.message()));
  }
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  if (!f) return absl::InternalError(absl::StrCat("open ", path, " for writing"));
  f << contents;
  f.close();
  if (!f) return absl::InternalError(absl::StrCat("write ", path));
  return absl::OkStatus();
}

absl::Status WriteFiles(const Table& table, const std::string& dir, const std::string& basename) {
  if (basename.empty()) return absl::InvalidArgumentError("WriteFiles: empty basename");
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return absl::InternalError(absl::StrCat("create ", dir, ": ", ec.message()));
  const std::filesystem::path base = std::filesystem::path(dir) / basename;
  if (auto s = WriteTextFile(base.string() + ".txt", table.ToText()); !s.ok()) return s;
  if (auto s = WriteTextFile(base.string() + ".csv", table.ToCsv()); !s.ok()) return s;
  return WriteTextFile(base.string() + ".json", table.ToJson());
}

}  // namespace herd::sim::report
