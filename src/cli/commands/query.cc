// herd query SQL: read-only SQL on the master's history (docs/history.md).
#include <cstdio>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cli/commands/commands.h"
#include "cli/render/render.h"

namespace herd::cli {
namespace {

std::string Cell(const v1::QueryValue& v) {
  switch (v.value_case()) {
    case v1::QueryValue::kInteger:
      return absl::StrCat(v.integer());
    case v1::QueryValue::kReal:
      return absl::StrFormat("%.6g", v.real());
    case v1::QueryValue::kText:
      return v.text().empty() ? "\"\"" : v.text();
    case v1::QueryValue::kHex:
      return absl::StrCat("x'", v.hex(), "'");
    default:
      return "NULL";
  }
}

}  // namespace

void AddQuery(CLI::App& app, CommandContext& ctx) {
  auto* cmd = app.add_subcommand(
      "query", "Run read-only SQL on the cell's history: jobs, task_events, machine_events, usage, machine_usage");
  auto sql = std::make_shared<std::string>();
  auto file = std::make_shared<std::string>();
  auto max_rows = std::make_shared<int32_t>(0);
  cmd->add_option("sql", *sql, "One SELECT (SQLite's dialect); '-' reads it from stdin");
  cmd->add_option("-f,--file", *file, "Read the statement from this file");
  cmd->add_option("--max-rows", *max_rows, "At most this many rows (default 1000, at most 100000)");
  cmd->add_flag("--json", ctx.flags.json, "Print the QueryHistoryResponse as JSON");
  cmd->callback([&ctx, sql, file, max_rows] {
    std::string text = *sql;
    if (!file->empty() || text == "-") {
      std::ifstream in;
      std::istream* src = &std::cin;
      if (!file->empty()) {
        in.open(*file);
        if (!in) {
          ctx.exit_code = Fail(absl::NotFoundError(absl::StrCat("cannot read ", *file)));
          return;
        }
        src = &in;
      }
      std::ostringstream buf;
      buf << src->rdbuf();
      text = buf.str();
    }
    if (text.empty()) {
      ctx.exit_code = Fail(absl::InvalidArgumentError(
          "herd query: give a statement, e.g. herd query \"SELECT count(*) FROM task_events\""));
      return;
    }
    Client client(ctx.flags);
    v1::QueryHistoryRequest req;
    req.set_sql(text);
    req.set_max_rows(*max_rows);
    v1::QueryHistoryResponse resp;
    if (!CallMaster(ctx, client, &v1::Herd::Stub::QueryHistory, req, &resp)) return;
    Table table(std::vector<std::string>(resp.columns().begin(), resp.columns().end()));
    for (const v1::QueryRow& row : resp.rows()) {
      std::vector<std::string> cells;
      for (const v1::QueryValue& v : row.values()) cells.push_back(Cell(v));
      table.Add(std::move(cells));
    }
    std::printf("%s", table.ToString().c_str());
    std::printf("(%d row%s%s; history recorded up to revision %lld)\n", resp.rows_size(),
                resp.rows_size() == 1 ? "" : "s", resp.truncated() ? ", truncated: raise --max-rows or narrow it" : "",
                static_cast<long long>(resp.recorded_revision()));
  });
}

}  // namespace herd::cli
