#include "spec/spec.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/ids.h"
#include "base/status.h"
#include "spec/jsonnet/evaluate.h"
#include "spec/limits.h"
#include "spec/source_map.h"
#include "spec/validate.h"
#include "spec/yaml/job_reader.h"
#include "spec/yaml/node_reader.h"

namespace herd::spec {
namespace {

using yaml::LocationOf;

absl::string_view FormatName(Format f) { return f == Format::kYaml ? "YAML" : "JSON"; }

// True if the map `node` has the key `key`.
bool HasKey(const YAML::Node& node, absl::string_view key) {
  for (auto it = node.begin(); it != node.end(); ++it) {
    if (it->first.IsScalar() && it->first.Scalar() == key) return true;
  }
  return false;
}

std::string FormatDiagnostic(absl::string_view source, bool has_lines, const Diagnostic& d) {
  std::string out(source);
  if (has_lines && d.loc.known()) absl::StrAppend(&out, ":", d.loc.line + 1, ":", d.loc.column + 1);
  absl::StrAppend(&out, ": ");
  if (!d.path.empty()) absl::StrAppend(&out, d.path, ": ");
  absl::StrAppend(&out, d.message);
  return out;
}

// Reads the jobs of one file, already loaded as YAML documents.
class FileReader {
 public:
  FileReader(std::string source, bool has_lines, const ParseOptions& opts)
      : source_(std::move(source)), has_lines_(has_lines), opts_(opts) {}

  absl::StatusOr<std::vector<v1::JobSpec>> Read(const std::vector<YAML::Node>& docs);

 private:
  // The job maps of the file, in order; `bare` if the file is one job map.
  std::vector<YAML::Node> CollectJobs(const std::vector<YAML::Node>& docs, bool* bare);
  void CheckDuplicate(const v1::JobSpec& spec, int index, const JobSourceMap& map);

  std::string source_;
  bool has_lines_;
  const ParseOptions& opts_;
  std::vector<Diagnostic> diags_;
  struct First {
    int index;
    Location loc;
  };
  absl::flat_hash_map<std::string, First> seen_;
};

std::vector<YAML::Node> FileReader::CollectJobs(const std::vector<YAML::Node>& docs, bool* bare) {
  JobSourceMap file_map("", {}, has_lines_, &diags_);
  yaml::NodeReader top(&file_map);
  std::vector<YAML::Node> jobs;
  int nonempty = 0;
  int bare_maps = 0;
  for (const YAML::Node& doc : docs) {
    if (!doc.IsDefined() || doc.IsNull()) continue;
    ++nonempty;
    yaml::Value v{doc, FieldPath{}, LocationOf(doc)};
    if (doc.IsMap() && HasKey(doc, "jobs")) {
      std::optional<yaml::Fields> f = top.Map(v, {"jobs"}, "");
      const yaml::Entry* e = f ? f->Get("jobs") : nullptr;
      if (e == nullptr) continue;
      yaml::Value jv = top.ValueOf(*e, FieldPath{});
      if (!e->value.IsSequence()) {
        top.TypeError(jv, "a list of jobs");
        continue;
      }
      for (const YAML::Node& job : e->value) jobs.push_back(job);
    } else if (doc.IsMap()) {
      jobs.push_back(doc);
      ++bare_maps;
    } else if (doc.IsSequence()) {
      for (const YAML::Node& job : doc) jobs.push_back(job);
    } else {
      top.TypeError(v, "a job (a map with name:, command:, resources: ...), a list of jobs, or jobs: [...]");
    }
  }
  *bare = nonempty == 1 && bare_maps == 1;
  return jobs;
}

void FileReader::CheckDuplicate(const v1::JobSpec& spec, int index, const JobSourceMap& map) {
  if (spec.name().empty() || spec.user().empty()) return;
  std::string id = JobId(spec.user(), spec.name());
  Diagnostic d = map.Locate("name");
  auto [it, inserted] = seen_.try_emplace(id, First{index, d.loc});
  if (inserted) return;
  std::string where = absl::StrCat("jobs[", it->second.index, "]");
  if (has_lines_ && it->second.loc.known()) absl::StrAppend(&where, ", line ", it->second.loc.line + 1);
  d.message = absl::StrCat("job '", id, "' is defined twice in this file (first as ", where, ")");
  diags_.push_back(std::move(d));
}

absl::StatusOr<std::vector<v1::JobSpec>> FileReader::Read(const std::vector<YAML::Node>& docs) {
  bool bare = false;
  std::vector<YAML::Node> jobs = CollectJobs(docs, &bare);
  std::vector<v1::JobSpec> specs;
  for (size_t i = 0; i < jobs.size(); ++i) {
    std::string prefix = bare ? "" : absl::StrCat("jobs[", i, "]");
    JobSourceMap map(prefix, LocationOf(jobs[i]), has_lines_, &diags_);
    v1::JobSpec spec = yaml::ReadJob(jobs[i], &map);
    if (map.IsBad("")) continue;  // not a job at all; already reported
    if (spec.user().empty() && !opts_.default_user.empty() && !map.IsBad("user")) {
      spec.set_user(opts_.default_user);
    }
    spec.set_source(source_);
    NormalizeAfter(&spec);
    std::vector<Issue> issues = ValidateIssues(spec);
    if (opts_.check_after && issues.empty()) {
      for (int a = 0; a < spec.after_size(); ++a) {
        std::string problem = opts_.check_after(spec.after(a));
        if (!problem.empty()) issues.push_back({absl::StrCat("after[", a, "]"), std::move(problem)});
      }
    }
    for (const Issue& issue : issues) map.ReportIssue(issue);
    CheckDuplicate(spec, static_cast<int>(i), map);
    specs.push_back(std::move(spec));
  }
  if (diags_.empty() && specs.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("no jobs in ", source_));
  }
  if (diags_.empty()) return specs;
  if (has_lines_) {
    std::stable_sort(diags_.begin(), diags_.end(), [](const Diagnostic& a, const Diagnostic& b) {
      return std::make_pair(a.loc.line, a.loc.column) < std::make_pair(b.loc.line, b.loc.column);
    });
  }
  std::vector<std::string> lines;
  lines.reserve(diags_.size());
  for (const Diagnostic& d : diags_) lines.push_back(FormatDiagnostic(source_, has_lines_, d));
  return absl::InvalidArgumentError(absl::StrJoin(lines, "\n"));
}

// A hint for the commonest YAML mistake in specs: ${...} unquoted inside a
// flow list, where '{' and '}' are syntax.
std::string SyntaxHint(absl::string_view text, const YAML::Mark& mark) {
  if (mark.line < 0) return "";
  std::vector<absl::string_view> lines = absl::StrSplit(text, '\n');
  // The error is often reported on the line after the culprit.
  for (int i = std::max(0, mark.line - 1); i <= mark.line && i < static_cast<int>(lines.size()); ++i) {
    absl::string_view line = lines[i];
    size_t bracket = line.find('[');
    size_t var = line.find("${");
    if (bracket != absl::string_view::npos && var != absl::string_view::npos && bracket < var) {
      return " (inside [...], quote items that contain ${...}, e.g. \"--port=${port.http}\")";
    }
  }
  return "";
}

// A job spec is a few levels deep; the YAML reader recurses once per level
// and gives up past its own limit with only "bad file". Flow collections
// ([ and {, outside quotes) and indentation past these are refused first,
// saying where.
constexpr int kMaxNesting = 64;
constexpr size_t kMaxIndent = 256;

absl::Status CheckNesting(absl::string_view text, absl::string_view source, bool has_lines) {
  int depth = 0, line = 1, col = 0;
  char quote = 0;
  bool line_start = true;
  size_t indent = 0;
  auto fail = [&](absl::string_view what) {
    std::string where(source);
    if (has_lines) absl::StrAppend(&where, ":", line, ":", col);
    return absl::InvalidArgumentError(absl::StrCat(where, ": ", what));
  };
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    ++col;
    if (c == '\n') {
      ++line;
      col = 0;
      line_start = true;
      indent = 0;
      if (quote == '#') quote = 0;
      continue;
    }
    if (line_start) {
      if (c == ' ') {
        if (++indent > kMaxIndent) return fail(absl::StrCat("indented more than ", kMaxIndent, " columns"));
        continue;
      }
      line_start = false;
    }
    if (quote != 0) {
      if (quote == '"' && c == '\\') {
        ++i;
        ++col;
      } else if (c == quote && quote != '#') {
        quote = 0;
      }
      continue;
    }
    if (c == '"' || c == '\'') {
      quote = c;
    } else if (c == '#') {
      quote = '#';  // a comment, to the end of the line
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxNesting) return fail(absl::StrCat("nested more than ", kMaxNesting, " levels deep"));
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return absl::OkStatus();
}

// yaml-cpp 0.7's LoadAll never returns on some invalid streams (a ',' where
// a document should start: ",", "a: b\n---\n,"), allocating until the
// machine runs out of memory (found by fuzz/spec_yaml; fixed upstream in
// yaml-cpp PR #1319, not in Debian 12's). This pass reads the events only
// and throws where a document would begin without the parser having moved,
// so LoadAll runs only on streams it finishes.
class StuckDocumentGuard final : public YAML::EventHandler {
 public:
  static void Check(const std::string& text) {
    std::istringstream in(text);
    YAML::Parser parser(in);
    StuckDocumentGuard guard;
    int64_t last = -1;
    while (parser.HandleNextDocument(guard)) {
      if (guard.start_.pos == last) {
        std::string what = guard.start_.pos >= 0 && guard.start_.pos < static_cast<int>(text.size())
                               ? absl::StrCat("unexpected '", text.substr(guard.start_.pos, 1), "'")
                               : "unexpected text";
        throw YAML::ParserException(guard.start_, what + " where a document should start");
      }
      last = guard.start_.pos;
    }
  }

  void OnDocumentStart(const YAML::Mark& mark) override { first_ = true; start_ = mark; }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark& mark, YAML::anchor_t) override { First(mark); }
  void OnAlias(const YAML::Mark& mark, YAML::anchor_t) override { First(mark); }
  void OnScalar(const YAML::Mark& mark, const std::string&, YAML::anchor_t, const std::string&) override {
    First(mark);
  }
  void OnSequenceStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {
    First(mark);
  }
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {
    First(mark);
  }
  void OnMapEnd() override {}

 private:
  // A document's position: where its first node is (its start mark may not
  // move for documents without "---").
  void First(const YAML::Mark& mark) {
    if (first_) start_ = mark;
    first_ = false;
  }
  bool first_ = true;
  YAML::Mark start_ = YAML::Mark::null_mark();
};

// Parses YAML or JSON text (or Jsonnet's JSON output, `has_lines` false).
absl::StatusOr<std::vector<v1::JobSpec>> ReadDocuments(absl::string_view text, absl::string_view source,
                                                       Format format, bool has_lines, const ParseOptions& opts) {
  HERD_RETURN_IF_ERROR(CheckNesting(text, source, has_lines));
  // yaml-cpp throws; nothing escapes this function.
  try {
    std::string owned(text);
    StuckDocumentGuard::Check(owned);
    std::vector<YAML::Node> docs = YAML::LoadAll(owned);
    return FileReader(std::string(source), has_lines, opts).Read(docs);
  } catch (const YAML::Exception& e) {
    std::string where(source);
    if (has_lines && e.mark.line >= 0) absl::StrAppend(&where, ":", e.mark.line + 1, ":", e.mark.column + 1);
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": ", FormatName(format), " syntax error: ", e.msg, SyntaxHint(text, e.mark)));
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": ", e.what()));
  }
}

}  // namespace

Format FormatForPath(absl::string_view path) {
  std::string p = absl::AsciiStrToLower(path);
  if (absl::EndsWith(p, ".json")) return Format::kJson;
  if (absl::EndsWith(p, ".jsonnet") || absl::EndsWith(p, ".libsonnet")) return Format::kJsonnet;
  return Format::kYaml;
}

namespace {

// A spec past kMaxSpecFileBytes is refused before any parser sees it.
absl::Status CheckSize(size_t bytes, absl::string_view source) {
  if (static_cast<int64_t>(bytes) <= kMaxSpecFileBytes) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(source, ": ", bytes, " bytes; a spec file may hold at most ", kMaxSpecFileBytes));
}

// JSON is read by the YAML reader (JSON is YAML), which would also take
// trailing commas, comments and single quotes: a .json file must be JSON.
absl::Status CheckStrictJson(absl::string_view text, absl::string_view source) {
  try {
    (void)nlohmann::json::parse(text.begin(), text.end());
    return absl::OkStatus();
  } catch (const nlohmann::json::parse_error& e) {
    // e.byte is 1-based: the line and column of the offending character.
    size_t at = std::min<size_t>(e.byte == 0 ? 0 : e.byte - 1, text.size());
    size_t line = 1 + std::count(text.begin(), text.begin() + at, '\n');
    size_t line_start = text.rfind('\n', at == 0 ? 0 : at - 1);
    size_t col = at - (line_start == absl::string_view::npos || at == 0 ? 0 : line_start + 1) + 1;
    return absl::InvalidArgumentError(absl::StrCat(source, ":", line, ":", col,
                                                   ": not valid JSON (a trailing comma, a comment or single "
                                                   "quotes?)"));
  } catch (const std::exception&) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": not valid JSON"));
  }
}

}  // namespace

absl::StatusOr<std::vector<v1::JobSpec>> ParseText(absl::string_view text, absl::string_view source_name,
                                                   Format format, const ParseOptions& opts) {
  HERD_RETURN_IF_ERROR(CheckSize(text.size(), source_name));
  if (format == Format::kAuto) format = FormatForPath(source_name);

  if (format == Format::kJsonnet) {
    absl::StatusOr<std::string> json = jsonnet::EvaluateSnippet(text, source_name);
    if (!json.ok()) return json.status();
    return ReadDocuments(*json, source_name, Format::kJson, /*has_lines=*/false, opts);
  }
  auto specs = ReadDocuments(text, source_name, format, /*has_lines=*/true, opts);
  if (specs.ok() && format == Format::kJson) HERD_RETURN_IF_ERROR(CheckStrictJson(text, source_name));
  return specs;
}

absl::StatusOr<std::vector<v1::JobSpec>> ParseFile(const std::string& path, const ParseOptions& opts,
                                                   Format format) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path, ": ", std::strerror(errno)));
  std::stringstream buf;
  buf << in.rdbuf();
  HERD_RETURN_IF_ERROR(CheckSize(buf.str().size(), path));
  if (format == Format::kAuto) format = FormatForPath(path);

  if (format == Format::kJsonnet) {
    absl::StatusOr<std::string> json = jsonnet::EvaluateFile(path);
    if (!json.ok()) return json.status();
    return ReadDocuments(*json, path, Format::kJson, /*has_lines=*/false, opts);
  }
  auto specs = ReadDocuments(buf.str(), path, format, /*has_lines=*/true, opts);
  if (specs.ok() && format == Format::kJson) HERD_RETURN_IF_ERROR(CheckStrictJson(buf.str(), path));
  return specs;
}

}  // namespace herd::spec
