#include "cli/render/render.h"

#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <chrono>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/resources.h"
#include "base/units.h"

namespace herd::cli {

std::string Table::ToString() const {
  std::vector<size_t> w;
  for (const auto& row : rows_) {
    if (w.size() < row.size()) w.resize(row.size(), 0);
    for (size_t i = 0; i < row.size(); ++i) w[i] = std::max(w[i], row[i].size());
  }
  std::string out;
  for (const auto& row : rows_) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      line += row[i];
      if (i + 1 < row.size()) line += std::string(w[i] - row[i].size() + 2, ' ');
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  return out;
}

namespace {
std::string Json(const google::protobuf::Message& m, bool indent) {
  google::protobuf::util::JsonPrintOptions o;
  o.add_whitespace = indent;
  o.always_print_primitive_fields = true;
  std::string out;
  (void)google::protobuf::util::MessageToJsonString(m, &out, o);
  return out;
}
}  // namespace

std::string ToJson(const google::protobuf::Message& m) { return Json(m, true); }
std::string ToJsonLine(const google::protobuf::Message& m) { return Json(m, false); }

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string Age(int64_t ms, int64_t now_ms) {
  if (ms <= 0) return "-";
  int64_t s = std::max<int64_t>(0, (now_ms - ms) / 1000);
  if (s < 120) return absl::StrCat(s, "s");
  if (s < 2 * 3600) return absl::StrCat(s / 60, "m");
  if (s < 2 * 86400) return absl::StrCat(s / 3600, "h");
  return absl::StrCat(s / 86400, "d");
}

std::string StateName(v1::Task::State s) { return v1::Task::State_Name(s); }

std::string PhaseName(v1::Task::Phase p) {
  if (p == v1::Task::PHASE_UNSPECIFIED) return "-";
  return absl::AsciiStrToLower(v1::Task::Phase_Name(p));
}

std::string TransitionName(v1::Event::Transition t) {
  if (t == v1::Event::TRANSITION_UNSPECIFIED) return "-";
  return absl::AsciiStrToLower(v1::Event::Transition_Name(t));
}

std::string ShortResources(const v1::Resources& r) {
  std::string s = absl::StrCat("cpu ", FormatCpu(r.cpu_millis()), ", mem ", FormatBytes(r.memory_bytes()));
  if (r.ports()) absl::StrAppend(&s, ", ports ", r.ports());
  for (const auto& [k, v] : r.extended()) absl::StrAppend(&s, ", ", k, " ", v);
  return s;
}

std::string IndexRanges(std::vector<int32_t> idx) {
  std::sort(idx.begin(), idx.end());
  std::vector<std::string> parts;
  for (size_t i = 0; i < idx.size();) {
    size_t j = i;
    while (j + 1 < idx.size() && idx[j + 1] == idx[j] + 1) ++j;
    parts.push_back(j == i ? absl::StrCat(idx[i]) : absl::StrCat(idx[i], "-", idx[j]));
    i = j + 1;
  }
  return absl::StrJoin(parts, ", ");
}

}  // namespace herd::cli
