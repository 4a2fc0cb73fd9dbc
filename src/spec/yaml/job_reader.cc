#include "spec/yaml/job_reader.h"

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "base/priority.h"
#include "base/units.h"
#include "spec/constraint_text.h"
#include "spec/limits.h"
#include "spec/suggest.h"
#include "spec/yaml/node_reader.h"

namespace herd::spec::yaml {
namespace {

constexpr absl::string_view kJobFields[] = {
    "name",        "user",      "priority",  "tasks",         "command",          "args",
    "env",         "workdir",   "resources", "constraints",   "soft_constraints", "restart",
    "grace_period", "appclass", "labels",    "overrides",     "different_machines", "max_per_domain",
    "packages",    "health_check", "isolation", "at_most_once", "disruption_budget",
    "update",      "after",        "schedule",  "time_zone",    "concurrency", "alloc_set", "alloc"};
constexpr absl::string_view kUpdateFields[] = {"max_unavailable", "min_healthy_time", "canary", "auto_rollback",
                                               "progress_deadline"};
// A rolling update's defaults when `update:` is given (Nomad's): one task
// at a time, healthy for 10s, a 10m deadline per task, no canary, no
// automatic rollback.
constexpr int64_t kDefaultMinHealthyMs = 10'000;
constexpr int64_t kDefaultProgressDeadlineMs = 600'000;
constexpr absl::string_view kPackageFields[] = {"name", "sha256", "url", "size"};
constexpr absl::string_view kHealthFields[] = {"http", "tcp", "command", "interval", "timeout", "failure_threshold",
                                               "initial_delay", "latency_bound"};
constexpr absl::string_view kHttpCheckFields[] = {"port", "path"};
constexpr absl::string_view kTcpCheckFields[] = {"port"};
constexpr absl::string_view kIsolationFields[] = {"namespaces", "root_from_packages", "user", "seccomp"};
constexpr absl::string_view kJobResourceFields[] = {"cpu", "memory", "disk", "ports", "gpu", "extended"};
constexpr absl::string_view kOverrideResourceFields[] = {"cpu", "memory", "disk", "gpu", "extended"};
constexpr absl::string_view kConstraintFields[] = {"attribute", "op", "value", "values", "soft", "weight"};
constexpr absl::string_view kRestartFields[] = {"policy", "max_restarts", "backoff", "max_backoff"};
constexpr absl::string_view kOverrideFields[] = {"index", "indexes", "range", "command", "args", "env", "resources"};
constexpr absl::string_view kKeyedOverrideFields[] = {"command", "args", "env", "resources"};
constexpr absl::string_view kBandNames[] = {"free",       "batch", "best-effort", "mid",
                                            "production", "prod",  "monitoring"};
constexpr absl::string_view kRestartPolicies[] = {"always", "on-failure", "never"};
constexpr absl::string_view kAppClasses[] = {"ls", "latency-sensitive", "batch"};
constexpr absl::string_view kConcurrency[] = {"forbid", "allow", "replace"};

// "On_Failure" -> "on-failure".
std::string Normalize(absl::string_view s) {
  return absl::StrReplaceAll(absl::AsciiStrToLower(absl::StripAsciiWhitespace(s)), {{"_", "-"}});
}

// Resources as written, before they are applied to a template or override.
struct ResourceFields {
  std::optional<int64_t> cpu, memory, disk, ports;
  std::vector<std::string> port_names;
  std::map<std::string, int64_t> extended;
};

class JobReader : public NodeReader {
 public:
  using NodeReader::NodeReader;

  v1::JobSpec Read(const YAML::Node& node);

 private:
  void ReadPriority(const Value& v, v1::JobSpec* spec);
  void ReadCommand(const Value& v, google::protobuf::RepeatedPtrField<std::string>* out);
  void ReadArgs(const Value& v, google::protobuf::RepeatedPtrField<std::string>* out);
  void ReadResources(const Value& v, bool job_level, ResourceFields* out);
  void ReadConstraints(const Value& v, bool soft, v1::JobSpec* spec);
  void ReadConstraint(const Value& v, bool soft_list, v1::Constraint* c);
  void ReadRestart(const Value& v, v1::RestartPolicy* r);
  void ReadPackages(const Value& v, v1::TaskTemplate* t);
  void ReadHealthCheck(const Value& v, v1::HealthCheck* h);
  void ReadIsolation(const Value& v, v1::Isolation* iso);
  void ReadUpdate(const Value& v, v1::UpdateStrategy* u);
  // "3" or "25%" into a count or a percentage (disruption budgets, updates).
  void ReadMaxUnavailable(const Value& v, absl::string_view zero_means, int32_t* count, int32_t* percent);
  void ReadAppClass(const Value& v, v1::JobSpec* spec);
  void ReadOverrides(const Value& v, v1::JobSpec* spec);
  void ReadOverride(const Value& v, bool keyed, v1::TaskOverride* o);
  // "3", "0-4", "1,3,5-7" -> indexes.
  bool ParseIndexes(absl::string_view text, const Value& v, v1::TaskOverride* o);
};

v1::JobSpec JobReader::Read(const YAML::Node& node) {
  v1::JobSpec spec;
  spec.set_priority(BandDefaultPriority(Band::kBatch));
  spec.set_task_count(1);
  spec.set_grace_period_ms(kDefaultGraceMs);
  v1::RestartPolicy* restart = spec.mutable_restart();
  restart->set_mode(v1::RestartPolicy::ON_FAILURE);
  restart->set_backoff_initial_ms(kDefaultBackoffMs);
  restart->set_backoff_max_ms(kDefaultMaxBackoffMs);

  FieldPath root;
  std::optional<Fields> f =
      Map({node, root, LocationOf(node)}, kJobFields, "a job (a map with name:, command:, resources: ...)");
  if (!f) return spec;
  auto get = [&](absl::string_view key) -> std::optional<Value> {
    const Entry* e = f->Get(key);
    if (e == nullptr) return std::nullopt;
    return ValueOf(*e, root);
  };
  v1::TaskTemplate* task = spec.mutable_task();

  if (auto v = get("name")) {
    if (auto s = String(*v)) spec.set_name(*s);
  }
  if (auto v = get("user")) {
    if (auto s = String(*v)) spec.set_user(*s);
  }
  if (auto v = get("priority")) ReadPriority(*v, &spec);
  if (auto v = get("tasks")) {
    if (auto n = Int(*v, kMaxTasks)) spec.set_task_count(static_cast<int32_t>(*n));
  }
  if (auto v = get("command")) ReadCommand(*v, task->mutable_command());
  if (auto v = get("args")) ReadArgs(*v, task->mutable_args());
  if (auto v = get("env")) StringMap(*v, task->mutable_env());
  if (auto v = get("workdir")) {
    if (auto s = String(*v)) task->set_workdir(*s);
  }
  if (auto v = get("resources")) {
    ResourceFields r;
    ReadResources(*v, /*job_level=*/true, &r);
    v1::Resources* out = task->mutable_resources();
    if (r.cpu) out->set_cpu_millis(*r.cpu);
    if (r.memory) out->set_memory_bytes(*r.memory);
    if (r.disk) out->set_disk_bytes(*r.disk);
    if (r.ports) out->set_ports(*r.ports);
    for (const std::string& n : r.port_names) task->add_port_names(n);
    for (const auto& [k, n] : r.extended) (*out->mutable_extended())[k] = n;
  }
  if (auto v = get("constraints")) ReadConstraints(*v, /*soft=*/false, &spec);
  if (auto v = get("soft_constraints")) ReadConstraints(*v, /*soft=*/true, &spec);
  if (auto v = get("restart")) ReadRestart(*v, restart);
  if (auto v = get("grace_period")) {
    if (auto ms = Quantity(*v, &ParseDurationMs)) spec.set_grace_period_ms(*ms);
  }
  if (auto v = get("appclass")) ReadAppClass(*v, &spec);
  if (spec.appclass() == v1::APPCLASS_UNSPECIFIED && !map()->IsBad("appclass")) {
    spec.set_appclass(IsProd(spec.priority()) ? v1::LATENCY_SENSITIVE : v1::BATCH);
  }
  if (auto v = get("labels")) StringMap(*v, spec.mutable_labels());
  if (auto v = get("packages")) ReadPackages(*v, task);
  if (auto v = get("health_check")) ReadHealthCheck(*v, task->mutable_health_check());
  if (auto v = get("isolation")) ReadIsolation(*v, task->mutable_isolation());
  if (auto v = get("overrides")) ReadOverrides(*v, &spec);
  if (auto v = get("different_machines")) {
    if (auto b = Bool(*v)) spec.set_different_machines(*b);
  }
  if (auto v = get("at_most_once")) {
    if (auto b = Bool(*v)) spec.set_at_most_once(*b);
  }
  if (auto v = get("disruption_budget")) {
    static constexpr absl::string_view kBudgetFields[] = {"max_unavailable"};
    if (std::optional<Fields> f =
            Map(*v, kBudgetFields, "a disruption budget, e.g. {max_unavailable: 1} or {max_unavailable: 25%}")) {
      if (const Entry* e = f->Get("max_unavailable")) {
        int32_t count = 0, percent = 0;
        ReadMaxUnavailable(ValueOf(*e, v->path), "a budget of 0 would stop every drain", &count, &percent);
        if (count > 0) spec.mutable_disruption_budget()->set_max_unavailable(count);
        if (percent > 0) spec.mutable_disruption_budget()->set_max_unavailable_percent(percent);
      }
    }
  }
  if (auto v = get("update")) ReadUpdate(*v, spec.mutable_update());
  if (auto v = get("after")) {
    if (!v->node.IsSequence()) {
      TypeError(*v, "a list of jobs to wait for, e.g. [build, alice/fetch]");
    } else if (auto list = StringList(*v)) {
      for (std::string& j : *list) spec.add_after(std::move(j));
    }
  }
  if (auto v = get("schedule")) {
    if (auto s = String(*v)) spec.set_schedule(*s);
  }
  if (auto v = get("alloc_set")) {
    if (auto b = Bool(*v)) spec.set_alloc_set(*b);
  }
  if (auto v = get("alloc")) {
    if (auto s = String(*v)) spec.set_alloc(*s);
  }
  if (auto v = get("time_zone")) {
    if (auto s = String(*v)) spec.set_time_zone(*s);
  }
  if (auto v = get("concurrency")) {
    if (auto s = String(*v)) {
      std::string c = Normalize(*s);
      if (c == "forbid") {
        spec.set_concurrency(v1::FORBID);
      } else if (c == "allow") {
        spec.set_concurrency(v1::ALLOW);
      } else if (c == "replace") {
        spec.set_concurrency(v1::REPLACE);
      } else {
        Error(*v, absl::StrCat("unknown policy '", *s, "'", DidYouMean(c, kConcurrency),
                               "; use forbid (skip a run while the last is live), allow or replace"));
      }
    }
  }
  if (auto v = get("max_per_domain")) {
    if (std::optional<Fields> df = Map(*v, {}, "a map of machine attributes to task counts, e.g. {rack: 2}")) {
      for (const Entry& item : df->entries()) {
        Value iv = ValueOf(item, v->path);
        if (item.value.IsNull()) {
          Error(iv, "expected a count, got nothing");
        } else if (auto n = Int(iv, kMaxTasks)) {
          (*spec.mutable_max_per_domain())[item.key] = static_cast<int32_t>(*n);
        }
      }
    }
  }
  return spec;
}

void JobReader::ReadPriority(const Value& v, v1::JobSpec* spec) {
  if (!v.node.IsScalar()) {
    TypeError(v, absl::StrCat("a priority (a number 0-", kMaxPriorityValue, " or a band name)"));
    return;
  }
  std::optional<std::string> s = String(v);
  int64_t n = 0;
  double d = 0;
  if (absl::SimpleAtoi(*s, &n) || absl::SimpleAtod(*s, &d)) {
    if (auto p = Int(v, kMaxPriorityValue)) spec->set_priority(static_cast<int32_t>(*p));
    return;
  }
  std::string name = Normalize(*s);
  if (std::optional<Band> band = ParseBand(name)) {
    spec->set_priority(BandDefaultPriority(*band));
    return;
  }
  Error(v, absl::StrCat("unknown priority band '", *s, "'", DidYouMean(name, kBandNames),
                        "; use a number 0-", kMaxPriorityValue,
                        " or free, batch, best-effort, mid, production, prod, monitoring"));
}

void JobReader::ReadCommand(const Value& v, google::protobuf::RepeatedPtrField<std::string>* out) {
  if (v.node.IsScalar()) {
    // A single string is a shell command line.
    Record(v);
    if (absl::StripAsciiWhitespace(v.node.Scalar()).empty()) {
      Error(v, "must not be empty");
      return;
    }
    out->Add("/bin/sh");
    out->Add("-c");
    out->Add(std::string(v.node.Scalar()));
    map()->Record(FieldPath{v.path.Item(2).canonical, v.path.display}, v.loc);
    return;
  }
  if (!v.node.IsSequence()) {
    TypeError(v, "a list of strings or a shell command line");
    return;
  }
  ReadArgs(v, out);
}

void JobReader::ReadArgs(const Value& v, google::protobuf::RepeatedPtrField<std::string>* out) {
  if (auto list = StringList(v)) {
    for (std::string& s : *list) out->Add(std::move(s));
  }
}

void JobReader::ReadResources(const Value& v, bool job_level, ResourceFields* out) {
  std::optional<Fields> f =
      job_level ? Map(v, kJobResourceFields, "a map of resources (cpu:, memory:, ...)")
                : Map(v, kOverrideResourceFields, "a map of resources (cpu:, memory:, disk:, gpu:, extended:)");
  if (!f) return;
  if (const Entry* e = f->Get("cpu")) out->cpu = Quantity(ValueOf(*e, v.path), &ParseCpuMillis);
  if (const Entry* e = f->Get("memory")) out->memory = Quantity(ValueOf(*e, v.path), &ParseBytes);
  if (const Entry* e = f->Get("disk")) out->disk = Quantity(ValueOf(*e, v.path), &ParseBytes);
  if (const Entry* e = f->Get("ports")) {
    Value pv = ValueOf(*e, v.path);
    if (pv.node.IsSequence()) {
      if (auto names = StringList(pv)) {
        out->port_names = *names;
        out->ports = static_cast<int64_t>(names->size());
      }
    } else if (pv.node.IsScalar()) {
      out->ports = Int(pv);
    } else {
      TypeError(pv, "a list of port names or a number of ports");
    }
  }
  FieldPath ext = v.path.Child("extended");
  if (const Entry* e = f->Get("extended")) {
    Value ev = ValueOf(*e, v.path);
    if (std::optional<Fields> ef = Map(ev, {}, "a map of resource names to counts")) {
      for (const Entry& item : ef->entries()) {
        Value iv = ValueOf(item, ev.path);
        if (item.value.IsNull()) {
          Error(iv, "expected a count, got nothing");
        } else if (auto n = Int(iv)) {
          out->extended[item.key] = *n;
        }
      }
    }
  }
  if (const Entry* e = f->Get("gpu")) {
    Value gv = ValueAt(*e, FieldPath{JoinPath(ext.canonical, "gpu"), JoinPath(v.path.display, "gpu")});
    if (out->extended.contains("gpu")) {
      Error(gv, "gpu is given twice (as gpu: and in extended:)");
    } else if (auto n = Int(gv)) {
      out->extended["gpu"] = *n;
    }
  }
}

void JobReader::ReadConstraints(const Value& v, bool soft, v1::JobSpec* spec) {
  Record(v);
  if (!v.node.IsSequence()) {
    TypeError(v, "a list of constraints");
    return;
  }
  int i = 0;
  for (const YAML::Node& item : v.node) {
    // Items are always added, so proto indexes match what was recorded.
    int k = spec->constraints_size();
    Location loc = LocationOf(item);
    Value iv{item, v.path.Item(i)};
    iv.path.canonical = absl::StrCat("constraints[", k, "]");
    iv.loc = loc.known() ? loc : v.loc;
    ReadConstraint(iv, soft, spec->add_constraints());
    ++i;
  }
}

void JobReader::ReadConstraint(const Value& v, bool soft_list, v1::Constraint* c) {
  Record(v);
  if (v.node.IsScalar()) {
    absl::StatusOr<v1::Constraint> parsed = ParseConstraint(v.node.Scalar());
    if (!parsed.ok()) {
      Error(v, std::string(parsed.status().message()));
      return;
    }
    *c = *parsed;
    if (soft_list) {
      c->set_soft(true);
      c->set_weight(1);
    }
    return;
  }
  std::optional<Fields> f =
      Map(v, kConstraintFields, "a constraint (\"zone in [a, b]\" or a map with attribute:, op:, values:)");
  if (!f) return;
  if (const Entry* e = f->Get("attribute")) {
    if (auto s = String(ValueOf(*e, v.path))) c->set_attribute(*s);
  }
  if (const Entry* e = f->Get("op")) {
    Value ov = ValueOf(*e, v.path);
    if (auto s = String(ov)) {
      if (std::optional<v1::Constraint::Op> op = ParseConstraintOp(*s)) {
        c->set_op(*op);
      } else {
        Error(ov, absl::StrCat("unknown operator '", *s, "'", *s == "=" ? " (did you mean '=='?)" : "",
                               "; use ==, !=, in, not in, exists, not exists, <, <=, > or >="));
      }
    }
  }
  const Entry* value = f->Get("value");
  const Entry* values = f->Get("values");
  if (value != nullptr && values != nullptr) {
    Error(ValueOf(*values, v.path), "give value: or values:, not both");
  } else if (value != nullptr) {
    if (auto s = String(ValueAt(*value, v.path.Child("values", "value")))) c->add_values(*s);
  } else if (values != nullptr) {
    Value vv = ValueOf(*values, v.path);
    if (vv.node.IsScalar()) {
      c->add_values(vv.node.Scalar());  // one value without brackets
      Record(vv);
    } else if (auto list = StringList(vv)) {
      for (const std::string& s : *list) c->add_values(s);
    }
  }
  bool soft = soft_list;
  if (const Entry* e = f->Get("soft")) {
    Value sv = ValueOf(*e, v.path);
    if (std::optional<bool> b = Bool(sv)) {
      if (!*b && soft_list) {
        Error(sv, "every constraint in soft_constraints is soft; move it to constraints");
      }
      soft = soft || *b;
    }
  }
  c->set_soft(soft);
  if (const Entry* e = f->Get("weight")) {
    Value wv = ValueOf(*e, v.path);
    if (auto w = Int(wv, kMaxConstraintWeight)) {
      if (*w < 1) {
        Error(wv, "must be at least 1");
      } else {
        c->set_weight(static_cast<int32_t>(*w));
      }
    }
  } else if (soft) {
    c->set_weight(1);
  }
}

void JobReader::ReadPackages(const Value& v, v1::TaskTemplate* t) {
  Record(v);
  if (!v.node.IsSequence()) {
    TypeError(v, "a list of packages, each {name:, sha256:, url:}");
    return;
  }
  int i = 0;
  for (const YAML::Node& item : v.node) {
    Location loc = LocationOf(item);
    Value iv{item, v.path.Item(i)};
    iv.loc = loc.known() ? loc : v.loc;
    ++i;
    v1::Package* p = t->add_packages();  // always added, so indexes match the file
    Record(iv);
    std::optional<Fields> f = Map(iv, kPackageFields, "a package (a map with name:, sha256:, url:)");
    if (!f) continue;
    if (const Entry* e = f->Get("name")) {
      if (auto s = String(ValueOf(*e, iv.path))) p->set_name(*s);
    }
    if (const Entry* e = f->Get("sha256")) {
      if (auto s = String(ValueOf(*e, iv.path))) p->set_sha256(absl::AsciiStrToLower(*s));
    }
    if (const Entry* e = f->Get("url")) {
      if (auto s = String(ValueOf(*e, iv.path))) p->set_url(*s);
    }
    if (const Entry* e = f->Get("size")) {
      if (auto n = Quantity(ValueOf(*e, iv.path), &ParseBytes)) p->set_size_bytes(*n);
    }
  }
}

void JobReader::ReadMaxUnavailable(const Value& mv, absl::string_view zero_means, int32_t* count,
                                   int32_t* percent) {
  const std::string text = mv.node.IsScalar() ? mv.node.Scalar() : "";
  if (absl::EndsWith(text, "%")) {
    int pct = 0;
    if (absl::SimpleAtoi(text.substr(0, text.size() - 1), &pct) && pct >= 1 && pct <= 100) {
      *percent = pct;
    } else {
      Error(mv, absl::StrCat("expected a count or a percentage from 1% to 100%, got '", text, "'"));
    }
  } else if (auto n = Int(mv, kMaxTasks)) {
    if (*n < 1) {
      Error(mv, absl::StrCat("expected at least 1 (", zero_means, ")"));
    } else {
      *count = static_cast<int32_t>(*n);
    }
  }
}

void JobReader::ReadUpdate(const Value& v, v1::UpdateStrategy* u) {
  u->set_max_unavailable(1);
  u->set_min_healthy_time_ms(kDefaultMinHealthyMs);
  u->set_progress_deadline_ms(kDefaultProgressDeadlineMs);
  if (v.node.IsNull()) return;  // `update:` alone: the defaults
  std::optional<Fields> f = Map(v, kUpdateFields,
                                "a rolling update, e.g. {max_unavailable: 1, min_healthy_time: 10s, canary: 1, "
                                "auto_rollback: true, progress_deadline: 5m}");
  if (!f) return;
  if (const Entry* e = f->Get("max_unavailable")) {
    int32_t count = 0, percent = 0;
    ReadMaxUnavailable(ValueOf(*e, v.path), "an update that may take no task down could never start", &count,
                       &percent);
    u->set_max_unavailable(count);
    u->set_max_unavailable_percent(percent);
  }
  if (const Entry* e = f->Get("min_healthy_time")) {
    if (auto ms = Quantity(ValueOf(*e, v.path), &ParseDurationMs)) u->set_min_healthy_time_ms(*ms);
  }
  if (const Entry* e = f->Get("canary")) {
    if (auto n = Int(ValueOf(*e, v.path), kMaxTasks)) u->set_canary(static_cast<int32_t>(*n));
  }
  if (const Entry* e = f->Get("auto_rollback")) {
    if (auto b = Bool(ValueOf(*e, v.path))) u->set_auto_rollback(*b);
  }
  if (const Entry* e = f->Get("progress_deadline")) {
    Value dv = ValueOf(*e, v.path);
    if (auto ms = Quantity(dv, &ParseDurationMs)) {
      if (*ms > kMaxUpdateWaitMs) {
        Error(dv, absl::StrCat("at most ", FormatDurationMs(kMaxUpdateWaitMs), " (0: no deadline)"));
      } else {
        u->set_progress_deadline_ms(*ms);
      }
    }
  }
}

void JobReader::ReadHealthCheck(const Value& v, v1::HealthCheck* h) {
  std::optional<Fields> f =
      Map(v, kHealthFields, "a health check (a map with one of http:, tcp:, command:, and interval:, timeout:, ...)");
  if (!f) return;
  auto port_of = [&](const Entry& e, absl::Span<const absl::string_view> known, absl::string_view what,
                     std::string* port, std::string* path) {
    Value cv = ValueOf(e, v.path);
    if (cv.node.IsScalar()) {  // "http: web" is short for {port: web}
      if (auto s = String(cv)) *port = *s;
      return;
    }
    std::optional<Fields> cf = Map(cv, known, what);
    if (!cf) return;
    if (const Entry* pe = cf->Get("port")) {
      if (auto s = String(ValueOf(*pe, cv.path))) *port = *s;
    }
    if (path != nullptr) {
      if (const Entry* pe = cf->Get("path")) {
        if (auto s = String(ValueOf(*pe, cv.path))) *path = *s;
      }
    }
  };
  int kinds = 0;
  if (const Entry* e = f->Get("http")) {
    ++kinds;
    v1::HealthCheck::Http* http = h->mutable_http();
    port_of(*e, kHttpCheckFields, "an HTTP check (a map with port: and path:)", http->mutable_port(),
            http->mutable_path());
  }
  if (const Entry* e = f->Get("tcp")) {
    ++kinds;
    port_of(*e, kTcpCheckFields, "a TCP check (a map with port:)", h->mutable_tcp()->mutable_port(), nullptr);
  }
  if (const Entry* e = f->Get("command")) {
    ++kinds;
    ReadCommand(ValueOf(*e, v.path), h->mutable_command()->mutable_argv());
  }
  if (kinds != 1) {
    Error(v, kinds == 0 ? "say how to check: one of http:, tcp: or command:"
                        : "give only one of http:, tcp: and command:");
  }
  if (const Entry* e = f->Get("interval")) {
    if (auto ms = Quantity(ValueOf(*e, v.path), &ParseDurationMs)) h->set_interval_ms(*ms);
  }
  if (const Entry* e = f->Get("timeout")) {
    if (auto ms = Quantity(ValueOf(*e, v.path), &ParseDurationMs)) h->set_timeout_ms(*ms);
  }
  if (const Entry* e = f->Get("initial_delay")) {
    if (auto ms = Quantity(ValueOf(*e, v.path), &ParseDurationMs)) h->set_initial_delay_ms(*ms);
  }
  if (const Entry* e = f->Get("failure_threshold")) {
    if (auto n = Int(ValueOf(*e, v.path), 1000)) h->set_failure_threshold(static_cast<int32_t>(*n));
  }
  if (const Entry* e = f->Get("latency_bound")) {
    if (auto ms = Quantity(ValueOf(*e, v.path), &ParseDurationMs)) h->set_latency_bound_ms(*ms);
  }
}

void JobReader::ReadIsolation(const Value& v, v1::Isolation* iso) {
  std::optional<Fields> f = Map(v, kIsolationFields, "isolation (a map with namespaces:, root_from_packages:, user:, seccomp:)");
  if (!f) return;
  if (const Entry* e = f->Get("namespaces")) {
    if (auto b = Bool(ValueOf(*e, v.path))) iso->set_namespaces(*b);
  }
  if (const Entry* e = f->Get("root_from_packages")) {
    if (auto b = Bool(ValueOf(*e, v.path))) iso->set_root_from_packages(*b);
  }
  if (const Entry* e = f->Get("user")) {
    if (auto s = String(ValueOf(*e, v.path))) iso->set_user(*s);
  }
  if (const Entry* e = f->Get("seccomp")) {
    if (auto s = String(ValueOf(*e, v.path))) iso->set_seccomp(*s);
  }
}

void JobReader::ReadRestart(const Value& v, v1::RestartPolicy* r) {
  auto policy = [&](const Value& pv) {
    std::optional<std::string> s = String(pv);
    if (!s) return;
    std::string p = Normalize(*s);
    if (p == "always") {
      r->set_mode(v1::RestartPolicy::ALWAYS);
    } else if (p == "on-failure" || p == "onfailure") {
      r->set_mode(v1::RestartPolicy::ON_FAILURE);
    } else if (p == "never") {
      r->set_mode(v1::RestartPolicy::NEVER);
    } else {
      Error(pv, absl::StrCat("unknown restart policy '", *s, "'", DidYouMean(p, kRestartPolicies),
                             "; use always, on-failure or never"));
    }
  };
  if (v.node.IsScalar()) {
    Value pv = v;
    pv.path.canonical = JoinPath(v.path.canonical, "policy");
    policy(pv);
    return;
  }
  std::optional<Fields> f = Map(v, kRestartFields, "a restart policy (always, on-failure, never) or a map");
  if (!f) return;
  if (const Entry* e = f->Get("policy")) policy(ValueOf(*e, v.path));
  if (const Entry* e = f->Get("max_restarts")) {
    if (auto n = Int(ValueOf(*e, v.path), kMaxRestarts)) r->set_max_restarts(static_cast<int32_t>(*n));
  }
  if (const Entry* e = f->Get("backoff")) {
    if (auto ms = Quantity(ValueOf(*e, v.path), &ParseDurationMs)) r->set_backoff_initial_ms(*ms);
  }
  if (const Entry* e = f->Get("max_backoff")) {
    if (auto ms = Quantity(ValueOf(*e, v.path), &ParseDurationMs)) r->set_backoff_max_ms(*ms);
  }
}

void JobReader::ReadAppClass(const Value& v, v1::JobSpec* spec) {
  std::optional<std::string> s = String(v);
  if (!s) return;
  std::string a = Normalize(*s);
  if (a == "ls" || a == "latency-sensitive") {
    spec->set_appclass(v1::LATENCY_SENSITIVE);
  } else if (a == "batch") {
    spec->set_appclass(v1::BATCH);
  } else {
    Error(v, absl::StrCat("unknown appclass '", *s, "'", DidYouMean(a, kAppClasses),
                          "; use ls (latency-sensitive) or batch"));
  }
}

void JobReader::ReadOverrides(const Value& v, v1::JobSpec* spec) {
  Record(v);
  if (v.node.IsSequence()) {
    int i = 0;
    for (const YAML::Node& item : v.node) {
      Location loc = LocationOf(item);
      ReadOverride({item, v.path.Item(i), loc.known() ? loc : v.loc}, /*keyed=*/false, spec->add_overrides());
      ++i;
    }
    return;
  }
  if (!v.node.IsMap()) {
    TypeError(v, "a list of overrides or a map from task indexes to overrides");
    return;
  }
  std::optional<Fields> f = Map(v, {}, "");
  if (!f) return;
  for (const Entry& e : f->entries()) {
    int k = spec->overrides_size();
    v1::TaskOverride* o = spec->add_overrides();
    FieldPath p{absl::StrCat(v.path.canonical, "[", k, "]"), absl::StrCat(v.path.display, "[", e.key, "]")};
    Value key{YAML::Node(), p.Child("indexes", ""), e.key_loc};
    Record(key);
    ParseIndexes(e.key, key, o);
    if (e.value.IsNull()) {
      Error({e.value, p, e.key_loc}, "changes nothing: give command, args, env or resources");
      continue;
    }
    ReadOverride({e.value, p, e.loc()}, /*keyed=*/true, o);
  }
}

bool JobReader::ParseIndexes(absl::string_view text, const Value& v, v1::TaskOverride* o) {
  auto bad = [&](absl::string_view why) {
    Error(v, absl::StrCat("bad task indexes '", text, "': ", why, " (write 3, 0-4 or 1,3,5-7)"));
    return false;
  };
  std::vector<int32_t> out;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    part = absl::StripAsciiWhitespace(part);
    std::vector<absl::string_view> ends = absl::StrSplit(part, absl::MaxSplits('-', 1));
    int64_t lo = 0, hi = 0;
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(ends[0]), &lo) || lo < 0) return bad("not an index");
    hi = lo;
    if (ends.size() == 2 && (!absl::SimpleAtoi(absl::StripAsciiWhitespace(ends[1]), &hi) || hi < 0)) {
      return bad("not a range");
    }
    if (hi < lo) return bad(absl::StrCat("the range ", lo, "-", hi, " is backwards"));
    if (hi >= kMaxTasks) return bad(absl::StrCat("a job has at most ", kMaxTasks, " tasks"));
    for (int64_t i = lo; i <= hi; ++i) out.push_back(static_cast<int32_t>(i));
  }
  for (int32_t i : out) o->add_indexes(i);
  return true;
}

void JobReader::ReadOverride(const Value& v, bool keyed, v1::TaskOverride* o) {
  std::optional<Fields> f = keyed ? Map(v, kKeyedOverrideFields, "an override (a map with command:, env:, ...)")
                                  : Map(v, kOverrideFields, "an override (a map with index:, command:, ...)");
  if (!f) return;
  if (!keyed) {
    const Entry* chosen = nullptr;
    for (absl::string_view key : {"index", "indexes", "range"}) {
      const Entry* e = f->Get(key);
      if (e == nullptr) continue;
      Value iv = ValueAt(*e, v.path.Child("indexes", key));
      if (chosen != nullptr) {
        Error(iv, absl::StrCat("give only one of index, indexes and range (", chosen->key, " is already given)"));
        continue;
      }
      chosen = e;
      if (key == "index") {
        if (auto n = Int(iv, kMaxTasks - 1)) o->add_indexes(static_cast<int32_t>(*n));
      } else if (key == "indexes") {
        Record(iv);
        if (!iv.node.IsSequence()) {
          TypeError(iv, "a list of task indexes");
          continue;
        }
        int i = 0;
        for (const YAML::Node& item : iv.node) {
          Location loc = LocationOf(item);
          if (auto n = Int({item, iv.path.Item(i), loc.known() ? loc : iv.loc}, kMaxTasks - 1)) {
            o->add_indexes(static_cast<int32_t>(*n));
          }
          ++i;
        }
      } else if (auto s = String(iv)) {
        ParseIndexes(*s, iv, o);
      }
    }
  }
  if (const Entry* e = f->Get("command")) ReadCommand(ValueOf(*e, v.path), o->mutable_command());
  if (const Entry* e = f->Get("args")) ReadArgs(ValueOf(*e, v.path), o->mutable_args());
  if (const Entry* e = f->Get("env")) StringMap(ValueOf(*e, v.path), o->mutable_env());
  if (const Entry* e = f->Get("resources")) {
    ResourceFields r;
    ReadResources(ValueOf(*e, v.path), /*job_level=*/false, &r);
    if (r.cpu) o->set_cpu_millis(*r.cpu);
    if (r.memory) o->set_memory_bytes(*r.memory);
    if (r.disk) o->set_disk_bytes(*r.disk);
    for (const auto& [k, n] : r.extended) (*o->mutable_extended())[k] = n;
  }
}

}  // namespace

v1::JobSpec ReadJob(const YAML::Node& node, JobSourceMap* map) { return JobReader(map).Read(node); }

}  // namespace herd::spec::yaml
