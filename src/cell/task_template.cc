#include "cell/task_template.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/match.h"

namespace herd::cell {
namespace {

bool Covers(const v1::TaskOverride& o, int32_t index) {
  return std::find(o.indexes().begin(), o.indexes().end(), index) != o.indexes().end();
}

// Calls fn(name) for each ${name}; returns the text with each replaced by
// fn's result (nullopt keeps the original).
template <typename Fn>
std::string Expand(absl::string_view text, Fn fn) {
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    if (text[i] == '$' && i + 2 < text.size() && text[i + 1] == '$' && text[i + 2] == '{') {
      out += "${";
      i += 3;
      continue;
    }
    if (text[i] == '$' && i + 1 < text.size() && text[i + 1] == '{') {
      size_t end = text.find('}', i + 2);
      if (end != absl::string_view::npos) {
        absl::string_view name = text.substr(i + 2, end - i - 2);
        std::optional<std::string> v = fn(name);
        if (v) {
          out += *v;
        } else {
          out.append(text.data() + i, end + 1 - i);
        }
        i = end + 1;
        continue;
      }
    }
    out += text[i++];
  }
  return out;
}

std::optional<std::string> Value(absl::string_view name, const v1::JobSpec& spec, int32_t index,
                                  absl::string_view cell_name) {
  if (name == "task.index") return absl::StrCat(index);
  if (name == "task.count") return absl::StrCat(spec.task_count());
  if (name == "job.name") return spec.name();
  if (name == "job.user") return spec.user();
  if (name == "job.priority") return absl::StrCat(spec.priority());
  if (name == "cell.name") return std::string(cell_name);
  return std::nullopt;
}

}  // namespace

std::string Substitute(absl::string_view text, const v1::JobSpec& spec, int32_t index,
                       absl::string_view cell_name) {
  if (text.find('$') == absl::string_view::npos) return std::string(text);
  return Expand(text, [&](absl::string_view n) { return Value(n, spec, index, cell_name); });
}

absl::Status CheckVariables(absl::string_view text, const v1::JobSpec& spec) {
  absl::Status st;
  Expand(text, [&](absl::string_view n) -> std::optional<std::string> {
    if (!st.ok()) return std::nullopt;
    if (Value(n, spec, 0, "").has_value()) return std::nullopt;
    if (absl::StartsWith(n, "port.")) {
      absl::string_view port = n.substr(5);
      const auto& names = spec.task().port_names();
      if (std::find(names.begin(), names.end(), port) == names.end()) {
        st = absl::InvalidArgumentError(absl::StrCat("${", n, "} names port '", port,
                                                     "', which the job does not ask for (ports: [",
                                                     absl::StrJoin(names, ", "), "])"));
      }
      return std::nullopt;
    }
    st = absl::InvalidArgumentError(absl::StrCat(
        "unknown variable ${", n,
        "} (known: ${task.index}, ${task.count}, ${job.name}, ${job.user}, ${job.priority}, ${cell.name}, "
        "${port.NAME}; write $${ for a literal ${)"));
    return std::nullopt;
  });
  return st;
}

ResourceVector TaskResources(const v1::JobSpec& spec, int32_t index) {
  ResourceVector r = ResourceVector::FromProto(spec.task().resources());
  for (const v1::TaskOverride& o : spec.overrides()) {
    if (!Covers(o, index)) continue;
    if (o.has_cpu_millis()) r.cpu_millis = o.cpu_millis();
    if (o.has_memory_bytes()) r.memory_bytes = o.memory_bytes();
    if (o.has_disk_bytes()) r.disk_bytes = o.disk_bytes();
    for (const auto& [k, v] : o.extended()) r.SetExtended(k, v);
  }
  return r;
}

v1::TaskTemplate ResolveTask(const v1::JobSpec& spec, int32_t index, absl::string_view cell_name) {
  v1::TaskTemplate t = spec.task();
  for (const v1::TaskOverride& o : spec.overrides()) {
    if (!Covers(o, index)) continue;
    if (!o.command().empty()) *t.mutable_command() = o.command();
    if (!o.args().empty()) *t.mutable_args() = o.args();
    for (const auto& [k, v] : o.env()) (*t.mutable_env())[k] = v;
  }
  TaskResources(spec, index).ToProto(t.mutable_resources());
  for (std::string& s : *t.mutable_command()) s = Substitute(s, spec, index, cell_name);
  for (std::string& s : *t.mutable_args()) s = Substitute(s, spec, index, cell_name);
  for (auto& [k, v] : *t.mutable_env()) v = Substitute(v, spec, index, cell_name);
  return t;
}

}  // namespace herd::cell
