#include "sim/trace/openb.h"

#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/ids.h"
#include "sim/trace/google2011.h"

namespace herd::sim {
namespace {

// Splits one CSV row; double-quoted fields may hold commas and "" escapes.
std::vector<std::string> SplitCsv(absl::string_view line) {
  std::vector<std::string> out(1);
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        out.back() += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        out.back() += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      out.emplace_back();
    } else {
      out.back() += c;
    }
  }
  for (std::string& f : out) f = std::string(absl::StripAsciiWhitespace(f));
  return out;
}

// Reads a CSV file with a header; calls fn(row, where) for every data row,
// with fields in header order. `required` columns must be in the header.
class CsvTable {
 public:
  absl::Status Read(const std::string& path, const std::vector<std::string>& required,
                    const std::function<absl::Status(const CsvTable&, absl::string_view where)>& fn) {
    absl::Status bad;
    absl::Status st = ReadGzipLines(path, [&](absl::string_view line, int64_t n) {
      if (absl::StripAsciiWhitespace(line).empty()) return true;
      where_ = absl::StrCat(path, ":", n);
      row_ = SplitCsv(line);
      if (columns_.empty()) {
        for (size_t i = 0; i < row_.size(); ++i) columns_[absl::AsciiStrToLower(row_[i])] = i;
        for (const std::string& c : required) {
          if (!columns_.count(c)) {
            bad = absl::InvalidArgumentError(absl::StrCat(where_, ": missing column '", c, "' (the header has: ",
                                                          absl::StrJoin(row_, ", "), "; required: ",
                                                          absl::StrJoin(required, ", "), ")"));
            return false;
          }
        }
        width_ = row_.size();
        return true;
      }
      if (row_.size() != width_) {
        bad = absl::InvalidArgumentError(
            absl::StrCat(where_, ": ", row_.size(), " fields, but the header has ", width_, " columns"));
        return false;
      }
      bad = fn(*this, where_);
      return bad.ok();
    });
    if (!bad.ok()) return bad;
    if (!st.ok()) return st;
    if (columns_.empty()) return absl::InvalidArgumentError(absl::StrCat(path, ": empty file (no header)"));
    return absl::OkStatus();
  }

  bool Has(const std::string& col) const { return columns_.count(col) > 0; }
  // The field of `col`; empty when the header lacks it.
  const std::string& Get(const std::string& col) const {
    static const std::string kEmpty;
    auto it = columns_.find(col);
    return it == columns_.end() ? kEmpty : row_[it->second];
  }
  // A non-negative integer; `absent` when the field is empty and allowed to be.
  absl::Status Int(const std::string& col, bool required, int64_t absent, int64_t* out) const {
    const std::string& v = Get(col);
    if (v.empty()) {
      if (!required) {
        *out = absent;
        return absl::OkStatus();
      }
      return absl::InvalidArgumentError(absl::StrCat(where_, ": column '", col, "' is empty"));
    }
    double d = 0;
    if (absl::SimpleAtoi(v, out)) {
      if (*out >= 0) return absl::OkStatus();
    } else if (absl::SimpleAtod(v, &d) && d >= 0 && d < 9e18 && d == static_cast<double>(static_cast<int64_t>(d))) {
      *out = static_cast<int64_t>(d);  // "12000.0"
      return absl::OkStatus();
    }
    return absl::InvalidArgumentError(
        absl::StrCat(where_, ": column '", col, "': '", v.substr(0, 40), "' is not a non-negative integer"));
  }

 private:
  std::map<std::string, size_t> columns_;
  size_t width_ = 0;
  std::vector<std::string> row_;
  std::string where_;
};

}  // namespace

absl::StatusOr<std::vector<v1::Machine>> LoadOpenbNodes(const std::string& path) {
  std::vector<v1::Machine> out;
  std::set<std::string> names;
  CsvTable t;
  absl::Status st = t.Read(path, {"sn", "cpu_milli", "memory_mib", "gpu"}, [&](const CsvTable& r, absl::string_view where) {
    const std::string& sn = r.Get("sn");
    if (absl::Status s = ValidateMachineName(sn); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": column 'sn': ", s.message()));
    }
    if (!names.insert(sn).second) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": column 'sn': node '", sn, "' is listed twice"));
    }
    int64_t cpu = 0, mem = 0, gpu = 0;
    for (auto [col, v] : {std::pair<const char*, int64_t*>{"cpu_milli", &cpu}, {"memory_mib", &mem}, {"gpu", &gpu}}) {
      if (absl::Status s = r.Int(col, true, 0, v); !s.ok()) return s;
    }
    if (cpu == 0 || mem == 0) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": node '", sn, "' has no ",
                                                     cpu == 0 ? "CPU (column 'cpu_milli')" : "memory (column 'memory_mib')"));
    }
    v1::Machine m;
    m.set_name(sn);
    m.set_address(absl::StrCat("sim:", sn));
    m.mutable_capacity()->set_cpu_millis(cpu);
    m.mutable_capacity()->set_memory_bytes(mem << 20);
    m.mutable_capacity()->set_ports(1000);
    if (gpu > 0) (*m.mutable_capacity()->mutable_extended())[kGpuMilli] = gpu * 1000;
    auto& a = *m.mutable_attributes();
    a["gpu_count"] = absl::StrCat(gpu);
    if (!r.Get("model").empty()) a["gpu_model"] = r.Get("model");
    out.push_back(std::move(m));
    return absl::OkStatus();
  });
  if (!st.ok()) return st;
  if (out.empty()) return absl::InvalidArgumentError(absl::StrCat(path, ": no nodes"));
  return out;
}

absl::StatusOr<std::vector<OpenbPod>> LoadOpenbPods(const std::string& path) {
  std::vector<OpenbPod> out;
  CsvTable t;
  absl::Status st = t.Read(
      path, {"name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli"}, [&](const CsvTable& r, absl::string_view where) {
        OpenbPod p;
        p.name = r.Get("name");
        if (p.name.empty()) return absl::InvalidArgumentError(absl::StrCat(where, ": column 'name' is empty"));
        int64_t num_gpu = 0;
        struct Col {
          const char* name;
          bool required;
          int64_t* out;
        };
        for (const Col& c : {Col{"cpu_milli", true, &p.cpu_milli}, Col{"memory_mib", true, &p.memory_mib},
                             Col{"num_gpu", true, &num_gpu}, Col{"gpu_milli", false, &p.gpu_milli},
                             Col{"creation_time", false, &p.creation_time},
                             Col{"deletion_time", false, &p.deletion_time},
                             Col{"scheduled_time", false, &p.scheduled_time}}) {
          if (absl::Status s = r.Int(c.name, c.required, c.out == &p.gpu_milli ? 0 : -1, c.out); !s.ok()) return s;
        }
        if (num_gpu > 1'000) {
          return absl::InvalidArgumentError(absl::StrCat(where, ": column 'num_gpu': ", num_gpu, " is too many GPUs"));
        }
        p.num_gpu = static_cast<int32_t>(num_gpu);
        if (p.gpu_milli > 1000) {
          return absl::InvalidArgumentError(
              absl::StrCat(where, ": column 'gpu_milli': ", p.gpu_milli, " is more than one GPU (1000)"));
        }
        for (absl::string_view m : absl::StrSplit(r.Get("gpu_spec"), '|', absl::SkipWhitespace())) {
          std::string model(absl::StripAsciiWhitespace(m));
          if (std::find(p.gpu_spec.begin(), p.gpu_spec.end(), model) == p.gpu_spec.end()) p.gpu_spec.push_back(model);
        }
        p.qos = r.Get("qos");
        if (!p.qos.empty() && p.qos != "LS" && p.qos != "BE" && p.qos != "Burstable" && p.qos != "Guaranteed") {
          return absl::InvalidArgumentError(absl::StrCat(
              where, ": column 'qos': '", p.qos.substr(0, 40), "' is not one of LS, BE, Burstable, Guaranteed"));
        }
        p.pod_phase = r.Get("pod_phase");
        out.push_back(std::move(p));
        return absl::OkStatus();
      });
  if (!st.ok()) return st;
  return out;
}

int32_t OpenbPriority(absl::string_view qos) {
  if (qos == "Guaranteed") return 250;
  if (qos == "Burstable") return 116;
  if (qos == "BE") return 100;
  return 200;  // LS, and lists without qos
}

std::string OpenbJobName(absl::string_view pod_name) {
  std::string s = absl::AsciiStrToLower(pod_name);
  for (char& c : s) {
    if (!(absl::ascii_islower(c) || absl::ascii_isdigit(c) || c == '-' || c == '_' || c == '.')) c = '-';
  }
  if (s.empty() || !absl::ascii_islower(s[0])) s = "p" + s;
  if (s.size() > 63) {
    uint64_t h = 14695981039346656037ULL;  // FNV-1a 64 of the original name
    for (unsigned char c : pod_name) {
      h ^= c;
      h *= 1099511628211ULL;
    }
    s = absl::StrCat(s.substr(0, 54), "-", absl::StrFormat("%08x", h & 0xffffffffULL));
  }
  while (s.back() == '-' || s.back() == '.') s.pop_back();  // s[0] is a letter
  return s;
}

v1::JobSpec JobFromPod(const OpenbPod& p) {
  v1::JobSpec s;
  s.set_name(OpenbJobName(p.name));
  s.set_user("openb");
  s.set_priority(OpenbPriority(p.qos));
  s.set_task_count(1);
  s.mutable_task()->add_command("/bin/true");
  v1::Resources* r = s.mutable_task()->mutable_resources();
  r->set_cpu_millis(std::max<int64_t>(1, p.cpu_milli));
  r->set_memory_bytes(std::max<int64_t>(1, p.memory_mib) << 20);
  int64_t gpu = p.num_gpu > 1 ? int64_t{p.num_gpu} * 1000 : (p.num_gpu == 1 ? p.gpu_milli : 0);
  if (p.num_gpu == 1 && gpu == 0) gpu = 1000;  // a whole GPU when the share is not given
  if (gpu > 0) (*r->mutable_extended())[kGpuMilli] = gpu;
  if (!p.gpu_spec.empty()) {
    v1::Constraint* c = s.add_constraints();
    c->set_attribute("gpu_model");
    c->set_op(v1::Constraint::IN);
    for (const std::string& m : p.gpu_spec) c->add_values(m);
  }
  s.set_appclass(p.qos == "BE" || p.qos == "Burstable" ? v1::BATCH : v1::LATENCY_SENSITIVE);
  s.mutable_restart()->set_mode(v1::RestartPolicy::ON_FAILURE);
  s.set_grace_period_ms(10'000);
  s.set_source("alibaba-openb-2023");
  auto& labels = *s.mutable_labels();
  labels["trace"] = "openb-2023";
  labels["trace-pod"] = p.name;
  if (!p.qos.empty()) labels["qos"] = p.qos;
  if (!p.pod_phase.empty()) labels["pod-phase"] = p.pod_phase;
  return s;
}

std::vector<v1::JobSpec> JobsFromPods(const std::vector<OpenbPod>& pods) {
  std::vector<v1::JobSpec> out;
  out.reserve(pods.size());
  std::set<std::string> used;
  for (const OpenbPod& p : pods) {
    v1::JobSpec s = JobFromPod(p);
    if (!used.insert(s.name()).second) {
      std::string base = s.name().substr(0, 56);
      for (int k = 2;; ++k) {
        std::string n = absl::StrCat(base, "-", k);
        if (used.insert(n).second) {
          s.set_name(n);
          break;
        }
      }
    }
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace herd::sim
