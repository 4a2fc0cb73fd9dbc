#include "spec/validate.h"

#include <algorithm>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/ids.h"
#include "absl/time/time.h"
#include "base/units.h"
#include "cell/batch.h"
#include "cell/task_template.h"
#include "spec/constraint_text.h"
#include "spec/limits.h"

namespace herd::spec {
namespace {

class Issues {
 public:
  void Add(std::string path, std::string message) { list_.push_back({std::move(path), std::move(message)}); }
  void AddStatus(std::string path, const absl::Status& st) {
    if (!st.ok()) Add(std::move(path), std::string(st.message()));
  }
  std::vector<Issue> Take() { return std::move(list_); }

 private:
  std::vector<Issue> list_;
};

std::string Join(absl::string_view a, absl::string_view b) {
  if (a.empty()) return std::string(b);
  return absl::StrCat(a, ".", b);
}
std::string Index(absl::string_view a, int i) { return absl::StrCat(a, "[", i, "]"); }

void CheckStrings(const google::protobuf::RepeatedPtrField<std::string>& list, absl::string_view path,
                  const v1::JobSpec& spec, Issues* out) {
  if (list.size() > kMaxArgs) {
    out->Add(std::string(path), absl::StrCat("has ", list.size(), " items; at most ", kMaxArgs));
    return;
  }
  for (int i = 0; i < list.size(); ++i) {
    if (static_cast<int64_t>(list[i].size()) > kMaxArgBytes) {
      out->Add(Index(path, i), absl::StrCat("is ", list[i].size(), " bytes long; at most ", kMaxArgBytes));
      continue;
    }
    out->AddStatus(Index(path, i), cell::CheckVariables(list[i], spec));
  }
}

// argv and env together, as the kernel will see them.
void CheckCommandSize(const v1::TaskTemplate& t, Issues* out) {
  int64_t total = 0;
  for (const std::string& a : t.command()) total += a.size() + 1;
  for (const std::string& a : t.args()) total += a.size() + 1;
  for (const auto& [k, v] : t.env()) total += k.size() + v.size() + 2;
  if (total > kMaxCommandBytes) {
    out->Add("command", absl::StrCat("command, args and env come to ", total, " bytes; at most ", kMaxCommandBytes));
  }
}

void CheckEnv(const google::protobuf::Map<std::string, std::string>& env, absl::string_view path,
              const v1::JobSpec& spec, Issues* out) {
  // Sorted, so messages come out in a stable order.
  if (static_cast<int64_t>(env.size()) > kMaxEnvVars) {
    out->Add(std::string(path), absl::StrCat("has ", env.size(), " variables; at most ", kMaxEnvVars));
    return;
  }
  std::set<std::string> keys;
  for (const auto& [k, v] : env) keys.insert(k);
  for (const std::string& k : keys) {
    if (static_cast<int64_t>(k.size()) > kMaxEnvNameBytes) {
      out->Add(std::string(path), absl::StrCat("variable '", Quote(k), "' has a name longer than ", kMaxEnvNameBytes, " bytes"));
      continue;
    }
    std::string p = Join(path, k);
    if (!IsValidEnvName(k)) {
      out->Add(p, absl::StrCat("'", Quote(k), "' is not a valid environment variable name (use letters, digits and "
                                              "'_', not starting with a digit)"));
      continue;
    }
    const std::string& v = env.at(k);
    if (static_cast<int64_t>(v.size()) > kMaxEnvValueBytes) {
      out->Add(p, absl::StrCat("is ", v.size(), " bytes long; at most ", kMaxEnvValueBytes));
      continue;
    }
    out->AddStatus(p, cell::CheckVariables(v, spec));
  }
}

// cpu/memory/disk/extended checks shared by the job and its overrides.
// `required` is true for the job's own cpu and memory.
void CheckCpu(int64_t cpu, absl::string_view path, bool required, Issues* out) {
  if (cpu < 0) {
    out->Add(Join(path, "cpu"), absl::StrCat("must not be negative, got ", cpu, "m"));
  } else if (cpu == 0 && required) {
    out->Add(Join(path, "cpu"), "missing: every task needs a CPU limit, e.g. cpu: 500m");
  } else if (cpu > kMaxCpuMillis) {
    out->Add(Join(path, "cpu"), absl::StrCat(FormatCpu(cpu), " cores is more than the limit of ",
                                             FormatCpu(kMaxCpuMillis), " cores per task"));
  }
}

void CheckBytes(int64_t v, absl::string_view path, absl::string_view field, int64_t limit, bool required,
                Issues* out) {
  if (v < 0) {
    out->Add(Join(path, field), absl::StrCat("must not be negative, got ", v));
  } else if (v == 0 && required) {
    out->Add(Join(path, field), absl::StrCat("missing: every task needs a ", field, " limit, e.g. ", field,
                                             ": 64Mi"));
  } else if (v > limit) {
    out->Add(Join(path, field), absl::StrCat(FormatBytes(v), " is more than the limit of ", FormatBytes(limit),
                                             " per task"));
  }
}

void CheckExtended(const google::protobuf::Map<std::string, int64_t>& ext, absl::string_view path, Issues* out) {
  std::set<std::string> keys;
  for (const auto& [k, v] : ext) keys.insert(k);
  for (const std::string& k : keys) {
    std::string p = absl::StrCat(path, ".extended.", k);
    int64_t v = ext.at(k);
    if (k == "cpu" || k == "memory" || k == "disk" || k == "ports") {
      out->Add(p, absl::StrCat("'", k, "' is not an extended resource; set resources.", k, " instead"));
      continue;
    }
    out->AddStatus(p, ValidateResourceName(k));
    if (v < 0) {
      out->Add(p, absl::StrCat("must not be negative, got ", v));
    } else if (v > kMaxExtended) {
      out->Add(p, absl::StrCat(v, " is more than the limit of ", kMaxExtended, " per task"));
    }
  }
}

void CheckPortNames(const v1::TaskTemplate& t, Issues* out) {
  std::set<std::string> seen;
  for (int i = 0; i < t.port_names_size(); ++i) {
    const std::string& n = t.port_names(i);
    std::string p = Index("resources.ports", i);
    bool ok = !n.empty() && n.size() <= kMaxNameLength && absl::ascii_islower(n[0]);
    for (char c : n) ok = ok && (absl::ascii_islower(c) || absl::ascii_isdigit(c) || c == '-' || c == '_');
    if (!ok) {
      out->Add(p, absl::StrCat("'", n, "' is not a valid port name (1-", kMaxNameLength,
                               " characters of a-z, 0-9, '-' and '_', starting with a letter)"));
    }
    if (!seen.insert(n).second) out->Add(p, absl::StrCat("port '", n, "' is named twice"));
  }
}

void CheckResources(const v1::TaskTemplate& t, Issues* out) {
  const v1::Resources& r = t.resources();
  CheckCpu(r.cpu_millis(), "resources", /*required=*/true, out);
  CheckBytes(r.memory_bytes(), "resources", "memory", kMaxMemoryBytes, /*required=*/true, out);
  CheckBytes(r.disk_bytes(), "resources", "disk", kMaxDiskBytes, /*required=*/false, out);
  if (r.ports() < 0) {
    out->Add("resources.ports", absl::StrCat("must not be negative, got ", r.ports()));
  } else if (r.ports() > kMaxPorts) {
    out->Add("resources.ports", absl::StrCat(r.ports(), " ports is more than the limit of ", kMaxPorts,
                                             " per task"));
  } else if (t.port_names_size() > 0 && r.ports() != t.port_names_size()) {
    out->Add("resources.ports", absl::StrCat("asks for ", r.ports(), " ports but names ", t.port_names_size()));
  }
  CheckPortNames(t, out);
  CheckExtended(r.extended(), "resources", out);
}

bool IsHex(absl::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return absl::ascii_isdigit(c) || (c >= 'a' && c <= 'f'); });
}

void CheckPackages(const v1::TaskTemplate& t, Issues* out) {
  if (t.packages_size() > kMaxPackages) {
    out->Add("packages", absl::StrCat("has ", t.packages_size(), " packages; at most ", kMaxPackages));
    return;
  }
  std::set<std::string> names;
  for (int i = 0; i < t.packages_size(); ++i) {
    const v1::Package& p = t.packages(i);
    std::string path = Index("packages", i);
    bool ok = !p.name().empty() && p.name().size() <= kMaxNameLength && absl::ascii_isalnum(p.name()[0]);
    for (char c : p.name()) ok = ok && (absl::ascii_isalnum(c) || c == '-' || c == '_' || c == '.');
    if (p.name().empty()) {
      out->Add(Join(path, "name"), "missing: every package needs a name (it is installed as packages/NAME)");
    } else if (!ok) {
      out->Add(Join(path, "name"), absl::StrCat("'", p.name(), "' is not a valid package name (1-", kMaxNameLength,
                                                " characters of letters, digits, '.', '-' and '_')"));
    } else if (!names.insert(p.name()).second) {
      out->Add(Join(path, "name"), absl::StrCat("package '", p.name(), "' is listed twice"));
    }
    if (p.sha256().empty()) {
      out->Add(Join(path, "sha256"), "missing: the archive's SHA-256 (64 hex digits), e.g. from `sha256sum FILE`");
    } else if (p.sha256().size() != 64 || !IsHex(p.sha256())) {
      out->Add(Join(path, "sha256"),
               absl::StrCat("'", p.sha256(), "' is not a SHA-256 digest (64 hex digits, got ", p.sha256().size(), ")"));
    }
    if (p.url().empty()) {
      out->Add(Join(path, "url"), "missing: where the agent fetches the archive (a path, file://, http:// or https:// URL)");
    } else if (!absl::StartsWith(p.url(), "/") && !absl::StartsWith(p.url(), "file://") &&
               !absl::StartsWith(p.url(), "http://") && !absl::StartsWith(p.url(), "https://")) {
      out->Add(Join(path, "url"),
               absl::StrCat("'", p.url(), "' is not an absolute path, a file://, an http:// or an https:// URL"));
    }
    if (p.size_bytes() < 0) out->Add(Join(path, "size"), "must not be negative");
  }
}

void CheckHealth(const v1::TaskTemplate& t, Issues* out) {
  if (!t.has_health_check()) return;
  const v1::HealthCheck& h = t.health_check();
  auto named_port = [&](const std::string& port, const std::string& path) {
    if (port.empty()) {
      out->Add(path, "missing: which of the task's named ports to check");
    } else if (std::find(t.port_names().begin(), t.port_names().end(), port) == t.port_names().end()) {
      out->Add(path, absl::StrCat("'", port, "' is not one of the task's named ports (resources.ports: [",
                                  absl::StrJoin(t.port_names(), ", "), "])"));
    }
  };
  switch (h.kind_case()) {
    case v1::HealthCheck::kHttp:
      named_port(h.http().port(), "health_check.http.port");
      if (!h.http().path().empty() && h.http().path()[0] != '/') {
        out->Add("health_check.http.path", absl::StrCat("'", h.http().path(), "' must start with '/'"));
      }
      break;
    case v1::HealthCheck::kTcp:
      named_port(h.tcp().port(), "health_check.tcp.port");
      break;
    case v1::HealthCheck::kCommand:
      if (h.command().argv().empty() || h.command().argv(0).empty()) {
        out->Add("health_check.command", "missing: the command to run, e.g. [\"/bin/check\"]");
      }
      break;
    case v1::HealthCheck::KIND_NOT_SET:
      out->Add("health_check", "say how to check: one of http:, tcp: or command:");
      break;
  }
  constexpr int64_t kMinIntervalMs = 100, kMaxIntervalMs = 3'600'000;
  if (h.interval_ms() != 0 && (h.interval_ms() < kMinIntervalMs || h.interval_ms() > kMaxIntervalMs)) {
    out->Add("health_check.interval", absl::StrCat(FormatDurationMs(h.interval_ms()), " is outside ",
                                                   FormatDurationMs(kMinIntervalMs), "..",
                                                   FormatDurationMs(kMaxIntervalMs)));
  }
  int64_t interval = h.interval_ms() != 0 ? h.interval_ms() : 10'000;
  if (h.timeout_ms() < 0 || h.timeout_ms() > interval) {
    out->Add("health_check.timeout", absl::StrCat(FormatDurationMs(h.timeout_ms()),
                                                  " must be positive and no longer than the interval (",
                                                  FormatDurationMs(interval), ")"));
  }
  if (h.failure_threshold() < 0) out->Add("health_check.failure_threshold", "must not be negative");
  if (h.initial_delay_ms() < 0 || h.initial_delay_ms() > kMaxIntervalMs) {
    out->Add("health_check.initial_delay", "must be between 0 and 1h");
  }
  const int64_t timeout = h.timeout_ms() != 0 ? h.timeout_ms() : 1'000;
  if (h.latency_bound_ms() < 0 || h.latency_bound_ms() > timeout) {
    out->Add("health_check.latency_bound",
             absl::StrCat(FormatDurationMs(h.latency_bound_ms()), " must be positive and no longer than the timeout (",
                          FormatDurationMs(timeout), ")"));
  }
}

void CheckIsolation(const v1::TaskTemplate& t, Issues* out) {
  const v1::Isolation& iso = t.isolation();
  if (!iso.seccomp().empty() && iso.seccomp() != "runtime-default" && iso.seccomp() != "unconfined") {
    out->Add("isolation.seccomp", absl::StrCat("'", iso.seccomp(), "' is not a seccomp profile (runtime-default, "
                                               "unconfined)"));
  }
  if (iso.root_from_packages() && t.packages_size() == 0) {
    out->Add("isolation.root_from_packages", "the task has no packages to build its root from");
  }
  const std::string& u = iso.user();
  if (!u.empty()) {
    bool ok = u.size() <= 32 && (absl::ascii_islower(u[0]) || u[0] == '_');
    for (char c : u) ok = ok && (absl::ascii_islower(c) || absl::ascii_isdigit(c) || c == '_' || c == '-');
    if (!ok) {
      out->Add("isolation.user", absl::StrCat("'", u, "' is not a valid user name (1-32 characters of a-z, 0-9, "
                                              "'_' and '-', starting with a letter or '_')"));
    }
    // root is a valid name: the master lets only holders of run-as-root
    // ask for it (and of run-as for any other machine account).
  }
}

void CheckConstraint(const v1::Constraint& c, const std::string& path, Issues* out) {
  if (c.attribute().empty()) {
    out->Add(Join(path, "attribute"), "missing: say which machine attribute, e.g. attribute: zone");
  } else {
    out->AddStatus(Join(path, "attribute"), ValidateAttributeKey(c.attribute()));
  }
  int n = c.values_size();
  switch (c.op()) {
    case v1::Constraint::OP_UNSPECIFIED:
      out->Add(Join(path, "op"), "missing: use ==, !=, in, not in, exists, not exists, <, <=, > or >=");
      break;
    case v1::Constraint::EQ:
    case v1::Constraint::NE:
    case v1::Constraint::LT:
    case v1::Constraint::LE:
    case v1::Constraint::GT:
    case v1::Constraint::GE:
      if (n != 1) {
        out->Add(Join(path, "values"), absl::StrCat("'", ConstraintOpText(c.op()), "' needs exactly one value, got ",
                                                    n));
      }
      break;
    case v1::Constraint::IN:
    case v1::Constraint::NOT_IN:
      if (n < 1) {
        out->Add(Join(path, "values"), absl::StrCat("'", ConstraintOpText(c.op()), "' needs at least one value"));
      }
      break;
    case v1::Constraint::EXISTS:
    case v1::Constraint::NOT_EXISTS:
      if (n != 0) {
        out->Add(Join(path, "values"), absl::StrCat("'", ConstraintOpText(c.op()), "' takes no values, got ", n));
      }
      break;
    default:
      out->Add(Join(path, "op"), absl::StrCat("unknown operator number ", static_cast<int>(c.op())));
  }
  for (int i = 0; i < n; ++i) {
    if (c.values(i).empty()) out->Add(Index(Join(path, "values"), i), "must not be empty");
  }
  if (!c.soft() && c.weight() != 0) {
    out->Add(Join(path, "weight"), "only soft constraints have a weight (add soft: true)");
  } else if (c.weight() < 0) {
    out->Add(Join(path, "weight"), absl::StrCat("must be at least 1, got ", c.weight()));
  } else if (c.weight() > kMaxConstraintWeight) {
    out->Add(Join(path, "weight"), absl::StrCat(c.weight(), " is more than the limit of ", kMaxConstraintWeight));
  }
}

void CheckRestart(const v1::RestartPolicy& r, Issues* out) {
  if (!v1::RestartPolicy::Mode_IsValid(r.mode())) {
    out->Add("restart.policy", absl::StrCat("unknown policy number ", static_cast<int>(r.mode())));
  }
  if (r.max_restarts() < 0) {
    out->Add("restart.max_restarts", absl::StrCat("must not be negative, got ", r.max_restarts()));
  } else if (r.max_restarts() > kMaxRestarts) {
    out->Add("restart.max_restarts",
             absl::StrCat(r.max_restarts(), " is more than the limit of ", kMaxRestarts, " (0 means no limit)"));
  }
  bool backoff_ok = true;
  for (auto [field, v] : {std::pair<absl::string_view, int64_t>{"backoff", r.backoff_initial_ms()},
                          {"max_backoff", r.backoff_max_ms()}}) {
    std::string p = absl::StrCat("restart.", field);
    if (v < 0) {
      out->Add(p, absl::StrCat("must not be negative, got ", v, "ms"));
      backoff_ok = false;
    } else if (v > kMaxBackoffMs) {
      out->Add(p, absl::StrCat(FormatDurationMs(v), " is more than the limit of ", FormatDurationMs(kMaxBackoffMs)));
      backoff_ok = false;
    }
  }
  if (backoff_ok && r.backoff_max_ms() != 0 && r.backoff_max_ms() < r.backoff_initial_ms()) {
    out->Add("restart.max_backoff", absl::StrCat(FormatDurationMs(r.backoff_max_ms()), " is less than backoff (",
                                                 FormatDurationMs(r.backoff_initial_ms()), ")"));
  }
}

void CheckOverride(const v1::TaskOverride& o, const std::string& path, const v1::JobSpec& spec, Issues* out) {
  std::string ip = Join(path, "indexes");
  if (o.indexes().empty()) {
    out->Add(ip, "names no tasks: add index:, indexes: or range:");
  }
  std::vector<int32_t> bad, twice;
  std::set<int32_t> seen;
  for (int32_t i : o.indexes()) {
    if (i < 0 || i >= spec.task_count()) bad.push_back(i);
    if (!seen.insert(i).second) twice.push_back(i);
  }
  if (!bad.empty()) {
    std::string shown = absl::StrJoin(bad.begin(), bad.begin() + std::min<size_t>(bad.size(), 10), ", ");
    if (bad.size() > 10) absl::StrAppend(&shown, ", ... (", bad.size(), " in all)");
    out->Add(ip, absl::StrCat(bad.size() == 1 ? "index " : "indexes ", shown, bad.size() == 1 ? " is" : " are",
                              " out of range: the job has ", spec.task_count(),
                              spec.task_count() == 1 ? " task (0-" : " tasks (0-", spec.task_count() - 1, ")"));
  }
  if (!twice.empty()) out->Add(ip, absl::StrCat("index ", twice[0], " is listed twice"));
  bool changes = !o.command().empty() || !o.args().empty() || !o.env().empty() || o.has_cpu_millis() ||
                 o.has_memory_bytes() || o.has_disk_bytes() || !o.extended().empty();
  if (!changes) out->Add(path, "changes nothing: give command, args, env or resources");
  if (!o.command().empty() && o.command(0).empty()) out->Add(Index(Join(path, "command"), 0), "must not be empty");
  CheckStrings(o.command(), Join(path, "command"), spec, out);
  CheckStrings(o.args(), Join(path, "args"), spec, out);
  CheckEnv(o.env(), Join(path, "env"), spec, out);
  std::string rp = Join(path, "resources");
  if (o.has_cpu_millis()) {
    if (o.cpu_millis() == 0) out->Add(Join(rp, "cpu"), "must be more than 0");
    CheckCpu(o.cpu_millis(), rp, false, out);
  }
  if (o.has_memory_bytes()) {
    if (o.memory_bytes() == 0) out->Add(Join(rp, "memory"), "must be more than 0");
    CheckBytes(o.memory_bytes(), rp, "memory", kMaxMemoryBytes, false, out);
  }
  if (o.has_disk_bytes()) CheckBytes(o.disk_bytes(), rp, "disk", kMaxDiskBytes, false, out);
  CheckExtended(o.extended(), rp, out);
}

// after, schedule, time_zone, concurrency: the cell's own checks (one
// issue, its path first), then whether the time zone exists here.
void CheckBatch(const v1::JobSpec& spec, Issues* out) {
  if (absl::Status st = cell::CheckBatchFields(spec); !st.ok()) {
    absl::string_view msg = st.message();
    size_t colon = msg.find(": ");
    if (colon == absl::string_view::npos) {
      out->Add("", std::string(msg));
    } else {
      out->Add(std::string(msg.substr(0, colon)), std::string(msg.substr(colon + 2)));
    }
  }
  if (!spec.time_zone().empty()) {
    absl::TimeZone zone;
    if (!absl::LoadTimeZone(spec.time_zone(), &zone)) {
      out->Add("time_zone", absl::StrCat("unknown time zone '", spec.time_zone(),
                                         "' (an IANA name, e.g. Europe/Berlin, America/New_York or UTC)"));
    }
  }
}

}  // namespace

void NormalizeAfter(v1::JobSpec* spec) {
  for (std::string& dep : *spec->mutable_after()) {
    if (!dep.empty() && dep.find('/') == std::string::npos && !spec->user().empty()) {
      dep = JobId(spec->user(), dep);
    }
  }
  const std::string& alloc = spec->alloc();
  if (!alloc.empty() && alloc.find('/') == std::string::npos && !spec->user().empty()) {
    spec->set_alloc(JobId(spec->user(), alloc));
  }
}

bool IsValidEnvName(absl::string_view name) {
  if (name.empty() || absl::ascii_isdigit(name[0])) return false;
  for (char c : name) {
    if (!absl::ascii_isalnum(c) && c != '_') return false;
  }
  return true;
}

std::vector<Issue> ValidateIssues(const v1::JobSpec& spec) {
  Issues out;
  if (spec.name().empty()) {
    out.Add("name", "missing: every job needs a name");
  } else {
    out.AddStatus("name", ValidateJobName(spec.name()));
  }
  if (spec.user().empty()) {
    out.Add("user", "missing: say whose job this is with user:");
  } else {
    out.AddStatus("user", ValidateUserName(spec.user()));
  }
  if (spec.priority() < 0) {
    out.Add("priority", absl::StrCat("must not be negative, got ", spec.priority()));
  } else if (spec.priority() > kMaxPriorityValue) {
    out.Add("priority", absl::StrCat(spec.priority(), " is more than the limit of ", kMaxPriorityValue));
  }
  if (spec.task_count() < 1) {
    out.Add("tasks", absl::StrCat("must be at least 1, got ", spec.task_count()));
  } else if (spec.task_count() > kMaxTasks) {
    out.Add("tasks", absl::StrCat(spec.task_count(), " is more than the limit of ", kMaxTasks, " tasks per job"));
  }

  const v1::TaskTemplate& t = spec.task();
  if (spec.alloc_set()) {
    // Reserves resources; runs nothing of its own.
    const char* what = !t.command().empty()       ? "command"
                       : !t.args().empty()         ? "args"
                       : !t.env().empty()          ? "env"
                       : !t.packages().empty()     ? "packages"
                       : t.has_health_check()      ? "health_check"
                       : !t.port_names().empty()   ? "resources.ports"
                       : !spec.schedule().empty()  ? "schedule"
                       : !spec.alloc().empty()     ? "alloc"
                                                   : nullptr;
    if (what != nullptr) {
      out.Add(what, "an alloc set runs nothing of its own (it reserves resources for the jobs that name it in "
                    "alloc:); remove this field");
    }
  } else if (t.command().empty()) {
    out.Add("command", "missing: every job needs a command, e.g. command: [\"/bin/server\", \"--port=8080\"]");
  } else if (t.command(0).empty()) {
    out.Add("command[0]", "must not be empty (it is the program to run)");
  }
  CheckStrings(t.command(), "command", spec, &out);
  CheckStrings(t.args(), "args", spec, &out);
  CheckEnv(t.env(), "env", spec, &out);
  CheckCommandSize(t, &out);
  if (absl::StartsWith(t.workdir(), "/")) {
    out.Add("workdir", absl::StrCat("'", t.workdir(), "' must be relative to the task's sandbox"));
  } else {
    for (absl::string_view part : absl::StrSplit(t.workdir(), '/')) {
      if (part == "..") {
        out.Add("workdir", absl::StrCat("'", t.workdir(), "' must not leave the task's sandbox ('..')"));
        break;
      }
    }
  }
  CheckResources(t, &out);
  CheckPackages(t, &out);
  CheckHealth(t, &out);
  CheckIsolation(t, &out);

  if (spec.constraints_size() > kMaxConstraints) {
    out.Add("constraints", absl::StrCat("has ", spec.constraints_size(), " constraints; at most ", kMaxConstraints));
  } else {
    for (int i = 0; i < spec.constraints_size(); ++i) CheckConstraint(spec.constraints(i), Index("constraints", i), &out);
  }
  CheckRestart(spec.restart(), &out);
  if (spec.grace_period_ms() < 0) {
    out.Add("grace_period", absl::StrCat("must not be negative, got ", spec.grace_period_ms(), "ms"));
  } else if (spec.grace_period_ms() > kMaxGraceMs) {
    out.Add("grace_period", absl::StrCat(FormatDurationMs(spec.grace_period_ms()), " is more than the limit of ",
                                         FormatDurationMs(kMaxGraceMs)));
  }
  if (spec.has_update()) {
    const v1::UpdateStrategy& u = spec.update();
    if (u.max_unavailable() < 0 || u.max_unavailable() > kMaxTasks) {
      out.Add("update.max_unavailable", absl::StrCat("must be 1 to ", kMaxTasks, ", got ", u.max_unavailable()));
    }
    if (u.max_unavailable_percent() < 0 || u.max_unavailable_percent() > 100) {
      out.Add("update.max_unavailable", absl::StrCat("must be 1% to 100%, got ", u.max_unavailable_percent(), "%"));
    }
    if (u.canary() < 0 || u.canary() > kMaxTasks) {
      out.Add("update.canary", absl::StrCat("must be 0 to ", kMaxTasks, ", got ", u.canary()));
    }
    if (u.min_healthy_time_ms() < 0 || u.min_healthy_time_ms() > kMaxUpdateWaitMs) {
      out.Add("update.min_healthy_time",
              absl::StrCat("must be 0 to ", FormatDurationMs(kMaxUpdateWaitMs), ", got ", u.min_healthy_time_ms(), "ms"));
    }
    if (u.progress_deadline_ms() < 0 || u.progress_deadline_ms() > kMaxUpdateWaitMs) {
      out.Add("update.progress_deadline", absl::StrCat("must be 0 (none) to ", FormatDurationMs(kMaxUpdateWaitMs),
                                                       ", got ", u.progress_deadline_ms(), "ms"));
    }
  }
  if (!v1::AppClass_IsValid(spec.appclass())) {
    out.Add("appclass", absl::StrCat("unknown appclass number ", static_cast<int>(spec.appclass())));
  }
  std::set<std::string> label_keys;
  for (const auto& [attr, n] : spec.max_per_domain()) {
    std::string p = Join("max_per_domain", attr);
    if (absl::Status st = ValidateAttributeKey(attr); !st.ok() && attr != "machine") {
      out.Add(p, std::string(st.message()));
    }
    if (n < 1) out.Add(p, absl::StrCat("must be at least 1, got ", n));
  }
  if (static_cast<int64_t>(spec.max_per_domain_size()) > kMaxDomainLimits) {
    out.Add("max_per_domain", absl::StrCat("has ", spec.max_per_domain_size(), " entries; at most ", kMaxDomainLimits));
  }
  if (static_cast<int64_t>(spec.labels_size()) > kMaxLabels) {
    out.Add("labels", absl::StrCat("has ", spec.labels_size(), " labels; at most ", kMaxLabels));
  } else {
    for (const auto& [k, v] : spec.labels()) label_keys.insert(k);
  }
  for (const std::string& k : label_keys) {
    std::string p = Join("labels", k);
    if (absl::Status st = ValidateAttributeKey(k); !st.ok()) {
      out.Add(p, absl::StrCat("'", k, "' is not a valid label name (use letters, digits, '-', '_', '.' and '/')"));
    }
    if (spec.labels().at(k).size() > kMaxLabelValueLength) {
      out.Add(p, absl::StrCat("value is longer than the limit of ", kMaxLabelValueLength, " characters"));
    }
  }
  for (int i = 0; i < spec.overrides_size(); ++i) {
    CheckOverride(spec.overrides(i), Index("overrides", i), spec, &out);
  }
  CheckBatch(spec, &out);
  if (!spec.alloc().empty()) {
    size_t slash = spec.alloc().find('/');
    absl::Status st = slash == std::string::npos ? ValidateJobName(spec.alloc())
                                                 : ValidateJobName(spec.alloc().substr(slash + 1));
    if (st.ok() && slash != std::string::npos) st = ValidateUserName(spec.alloc().substr(0, slash));
    if (!st.ok()) out.Add("alloc", absl::StrCat("'", Quote(spec.alloc()), "' is not a job name: ", st.message()));
  }
  return out.Take();
}

absl::Status Validate(const v1::JobSpec& spec) {
  std::vector<Issue> issues = ValidateIssues(spec);
  if (issues.empty()) return absl::OkStatus();
  std::vector<std::string> lines;
  lines.reserve(issues.size());
  for (const Issue& i : issues) {
    lines.push_back(i.path.empty() ? i.message : absl::StrCat(i.path, ": ", i.message));
  }
  return absl::InvalidArgumentError(absl::StrJoin(lines, "\n"));
}

}  // namespace herd::spec
