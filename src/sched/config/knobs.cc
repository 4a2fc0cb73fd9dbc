#include "sched/config/knobs.h"

#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "sched/framework/profile.h"

namespace herd::sched {
namespace {

constexpr size_t kMaxFileBytes = 1 << 20;
constexpr size_t kMaxProfiles = 64;

absl::StatusOr<double> Number(absl::string_view v, double min, double max) {
  double d;
  if (!absl::SimpleAtod(v, &d) || !(d >= min) || !(d <= max)) {
    return absl::InvalidArgumentError(absl::StrCat("'", v, "' is not a number from ", min, " to ", max));
  }
  return d;
}

absl::StatusOr<int32_t> Count(absl::string_view v, int32_t max) {
  int32_t n;
  if (!absl::SimpleAtoi(v, &n) || n < 0 || n > max) {
    return absl::InvalidArgumentError(absl::StrCat("'", v, "' is not a whole number from 0 to ", max));
  }
  return n;
}

// A knob that sets a number field of Options.
template <typename T>
Knob NumberKnob(std::string flag, std::string help, std::string default_text, T Options::*field, double min,
                double max) {
  return {std::move(flag),
          {},
          std::move(help),
          std::move(default_text),
          true,
          [field, min, max](absl::string_view v, Options* o) -> absl::Status {
            absl::StatusOr<double> d = Number(v, min, max);
            if (!d.ok()) return d.status();
            o->*field = static_cast<T>(*d);
            return absl::OkStatus();
          }};
}

Knob Switch(std::string flag, std::string help, bool Options::*field) {
  return {std::move(flag), {}, std::move(help), "", false, [field](absl::string_view, Options* o) {
            o->*field = false;
            return absl::OkStatus();
          }};
}

// Names each earlier release took for a score's weight.
std::vector<std::string> WeightAliases(absl::string_view score) {
  if (score == "spread") return {"--spread", "--spread-weight"};
  if (score == "priority-mix") return {"--priority-mix", "--mix-weight"};
  if (score == "reserve") return {"--reserve"};
  return {};
}

std::string Where(const std::string& file, const YAML::Node& n) { return absl::StrCat(file, ":", n.Mark().line + 1); }

absl::Status Bad(const std::string& file, const YAML::Node& n, absl::string_view field, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(Where(file, n), ": ", field, ": ", what));
}

absl::StatusOr<ProfileSpec> ParseOne(const YAML::Node& p, const std::string& file, size_t index, const Registry& r) {
  const std::string at = absl::StrCat("profiles[", index, "]");
  if (!p.IsMap()) return Bad(file, p, at, "expected a map (name, policy, filters, scores)");
  ProfileSpec spec;
  spec.where = Where(file, p);
  for (const auto& kv : p) {
    const std::string key = kv.first.Scalar();
    const YAML::Node& v = kv.second;
    const std::string field = absl::StrCat(at, ".", key);
    if (key == "name") {
      if (!v.IsScalar() || v.Scalar().empty() || v.Scalar().size() > 64) {
        return Bad(file, v, field, "expected a name of 1-64 characters");
      }
      spec.name = v.Scalar();
    } else if (key == "policy") {
      absl::StatusOr<PackingPolicy> policy =
          v.IsScalar() ? ParsePackingPolicy(v.Scalar()) : absl::InvalidArgumentError("expected a policy name");
      if (!policy.ok()) return Bad(file, v, field, policy.status().message());
      spec.policy = *policy;
    } else if (key == "filters") {
      if (!v.IsSequence()) return Bad(file, v, field, "expected a list of filter plugins");
      for (const YAML::Node& f : v) {
        if (!f.IsScalar() || r.FindFilter(f.Scalar()) == nullptr) {
          return Bad(file, f, field,
                     absl::StrCat("unknown filter plugin '", f.IsScalar() ? f.Scalar() : "?",
                                  "' (registered: ", r.FilterNames(), ")"));
        }
        spec.filters.push_back(f.Scalar());
      }
    } else if (key == "scores") {
      if (!v.IsMap()) return Bad(file, v, field, "expected a map of score plugin: weight");
      for (const auto& s : v) {
        const std::string name = s.first.Scalar();
        if (r.FindScore(name) == nullptr) {
          return Bad(file, s.first, field,
                     absl::StrCat("unknown score plugin '", name, "' (registered: ", r.ScoreNames(), ")"));
        }
        absl::StatusOr<double> w =
            s.second.IsScalar() ? Number(s.second.Scalar(), 0, 1e6) : absl::InvalidArgumentError("expected a weight");
        if (!w.ok()) return Bad(file, s.second, absl::StrCat(field, ".", name), w.status().message());
        if (spec.weights.Find(name)) return Bad(file, s.first, field, absl::StrCat("'", name, "' is given twice"));
        spec.weights.Set(name, *w);
      }
    } else {
      return Bad(file, kv.first, field, "unknown key (a profile has name, policy, filters and scores)");
    }
  }
  if (spec.name.empty()) return Bad(file, p, at, "a profile needs a name");
  // What BuildProfile would refuse (a filter named twice, a required one
  // left out), said here with the line.
  Options probe;
  probe.registry = &r;
  ApplyProfile(spec, &probe);
  if (absl::StatusOr<Profile> built = BuildProfile(probe); !built.ok()) {
    return Bad(file, p, at, built.status().message());
  }
  return spec;
}

}  // namespace

std::vector<ProfileSpec> BuiltinProfiles() {
  ProfileSpec def;
  def.name = "default";
  def.where = "built in";
  return {def};
}

void ApplyProfile(const ProfileSpec& spec, Options* o) {
  o->profile = spec.name;
  if (spec.policy) o->policy = *spec.policy;
  if (!spec.filters.empty()) o->filters = spec.filters;
  for (const auto& [name, w] : spec.weights.all()) o->weights.Set(name, w);
}

absl::StatusOr<std::vector<ProfileSpec>> ParseProfiles(const std::string& text, const std::string& file,
                                                       const Registry& r) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(file, ":", e.mark.line + 1, ": ", e.msg));
  }
  if (!root.IsMap()) return absl::InvalidArgumentError(absl::StrCat(file, ": expected a map with 'profiles'"));
  std::vector<ProfileSpec> out;
  for (const auto& kv : root) {
    if (kv.first.Scalar() != "profiles") {
      return Bad(file, kv.first, kv.first.Scalar(), "unknown key (a profile file has 'profiles')");
    }
    const YAML::Node& list = kv.second;
    if (!list.IsSequence() || list.size() == 0) return Bad(file, list, "profiles", "expected a list of profiles");
    if (list.size() > kMaxProfiles) {
      return Bad(file, list, "profiles", absl::StrCat(list.size(), " profiles; at most ", kMaxProfiles));
    }
    std::set<std::string> names;
    for (size_t i = 0; i < list.size(); ++i) {
      absl::StatusOr<ProfileSpec> spec = ParseOne(list[i], file, i, r);
      if (!spec.ok()) return spec.status();
      if (!names.insert(spec->name).second) {
        return Bad(file, list[i], absl::StrCat("profiles[", i, "].name"),
                   absl::StrCat("profile '", spec->name, "' is defined twice"));
      }
      out.push_back(std::move(*spec));
    }
  }
  if (out.empty()) return absl::InvalidArgumentError(absl::StrCat(file, ": no profiles"));
  return out;
}

absl::StatusOr<std::vector<ProfileSpec>> ReadProfileFile(const std::string& path, const Registry& r) {
  std::error_code ec;
  const std::uintmax_t size = std::filesystem::file_size(path, ec);
  if (ec) return absl::NotFoundError(absl::StrCat(path, ": ", ec.message()));
  if (size > kMaxFileBytes) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", size, " bytes; the limit is ", kMaxFileBytes));
  }
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot read"));
  return ParseProfiles(text.str(), path, r);
}

std::vector<Knob> SchedulerKnobs(const Registry& r) {
  std::vector<Knob> k;
  k.push_back(
      {"--profile-file", {}, "Scheduler profiles (YAML: docs/scheduler.md); --profile picks one", "", true, nullptr});
  k.push_back(
      {"--profile", {}, "Scheduler profile: built in (default) or from --profile-file", "default", true, nullptr});
  k.push_back({"--policy",
               {},
               "Packing policy: worst, best, hybrid, pack or k8s",
               "hybrid",
               true,
               [](absl::string_view v, Options* o) -> absl::Status {
                 absl::StatusOr<PackingPolicy> p = ParsePackingPolicy(v);
                 if (!p.ok()) return p.status();
                 o->policy = *p;
                 return absl::OkStatus();
               }});
  k.push_back({"--order",
               {},
               "Order of users' tasks within a priority: round-robin or drf",
               "round-robin",
               true,
               [](absl::string_view v, Options* o) -> absl::Status {
                 absl::StatusOr<QueueOrder> q = ParseQueueOrder(v);
                 if (!q.ok()) return q.status();
                 o->order = *q;
                 return absl::OkStatus();
               }});
  k.push_back({"--task-order",
               {},
               "Order of one user's tasks within a priority: fifo (as submitted) or largest (hardest first)",
               "fifo",
               true,
               [](absl::string_view v, Options* o) -> absl::Status {
                 absl::StatusOr<TaskOrder> t = ParseTaskOrder(v);
                 if (!t.ok()) return t.status();
                 o->task_order = *t;
                 return absl::OkStatus();
               }});
  k.push_back({"--filters",
               {},
               absl::StrCat("Filter plugins to run, in order, comma-separated (default: all of ", r.FilterNames(), ")"),
               "",
               true,
               [](absl::string_view v, Options* o) -> absl::Status {
                 o->filters.clear();
                 for (absl::string_view f : absl::StrSplit(v, ',', absl::SkipWhitespace())) {
                   o->filters.emplace_back(absl::StripAsciiWhitespace(f));
                 }
                 if (o->filters.empty()) return absl::InvalidArgumentError("names no filter plugin");
                 return absl::OkStatus();
               }});
  Options defaults;
  defaults.registry = &r;
  for (const ScoreEntry& s : r.scores()) {
    const std::string name = s.name;
    k.push_back({absl::StrCat("--weight-", name), WeightAliases(name),
                 absl::StrCat("Weight of the ", name, " score: ", s.help, " (0 = off)"),
                 absl::StrCat(s.default_weight(defaults)), true,
                 [name](absl::string_view v, Options* o) -> absl::Status {
                   absl::StatusOr<double> w = Number(v, 0, 1e6);
                   if (!w.ok()) return w.status();
                   o->weights.Set(name, *w);
                   return absl::OkStatus();
                 }});
  }
  k.push_back(Switch("--no-preemption", "Never evict lower-priority tasks to place a task", &Options::preemption));
  k.push_back(Switch("--no-equiv", "Schedule task by task (no equivalence classes)", &Options::equivalence_classes));
  k.push_back(Switch("--no-cache", "Recompute every score in every pass (no score cache)", &Options::score_cache));
  k.push_back(
      Switch("--no-random", "Examine every machine (no relaxed randomization)", &Options::relaxed_randomization));
  k.push_back({"--sample",
               {},
               "Relaxed randomization: feasible machines sought per class before picking; 0 scores every feasible "
               "machine",
               "48",
               true,
               [](absl::string_view v, Options* o) -> absl::Status {
                 absl::StatusOr<int32_t> n = Count(v, 1'000'000);
                 if (!n.ok()) return n.status();
                 if (*n == 0) {
                   o->relaxed_randomization = false;
                 } else {
                   o->enough_feasible = *n;
                 }
                 return absl::OkStatus();
               }});
  k.push_back(NumberKnob("--fullest",
                         "Each class also examines the cell's fullest machines until this many fit (0 = off)", "0",
                         &Options::fullest_candidates, 0, 1'000'000));
  k.push_back(NumberKnob(
      "--small-change", "Cached scores are kept while a machine's free CPU and memory moved less than this share of it",
      "0.02", &Options::small_change, 0, 1));
  k.push_back(NumberKnob("--hybrid-pack-below",
                         "Hybrid packs production while non-production work asks for less than this share of the "
                         "CPU (0 = never, above 1 = always)",
                         "0.1", &Options::hybrid_pack_below, 0, 1e6));
  k.push_back(NumberKnob("--hybrid-pack-sample",
                         "Feasible machines sought per class that hybrid packs, on a cell without devices (0 = every "
                         "feasible machine)",
                         "192", &Options::hybrid_pack_sample, 0, 1'000'000));
  k.push_back(NumberKnob("--shape",
                         "Hybrid's stranding term: the typical task's CPU per memory, as shares of capacity (0: the "
                         "workload's)",
                         "0", &Options::stranding_shape, 0, 1e6));
  return k;
}

absl::Status ApplyKnobs(const std::vector<Knob>& knobs, const std::vector<std::optional<std::string>>& given,
                        Options* o) {
  std::optional<std::string> file, name;
  for (size_t i = 0; i < knobs.size() && i < given.size(); ++i) {
    if (knobs[i].flag == "--profile-file") file = given[i];
    if (knobs[i].flag == "--profile") name = given[i];
  }
  const Registry& r = o->registry != nullptr ? *o->registry : Registry::BuiltIn();
  std::vector<ProfileSpec> from_file;
  if (file) {
    absl::StatusOr<std::vector<ProfileSpec>> read = ReadProfileFile(*file, r);
    if (!read.ok())
      return absl::Status(read.status().code(), absl::StrCat("--profile-file: ", read.status().message()));
    from_file = std::move(*read);
  }
  std::vector<ProfileSpec> builtin = BuiltinProfiles();
  const ProfileSpec* chosen = nullptr;
  auto find = [&](const std::vector<ProfileSpec>& in, const std::string& n) -> const ProfileSpec* {
    for (const ProfileSpec& p : in) {
      if (p.name == n) return &p;
    }
    return nullptr;
  };
  auto names = [](const std::vector<ProfileSpec>& in) {
    return absl::StrJoin(in, ", ", [](std::string* out, const ProfileSpec& p) { out->append(p.name); });
  };
  if (name) {
    chosen = find(from_file, *name);  // a file's profile may shadow a built-in one
    if (chosen == nullptr) chosen = find(builtin, *name);
    if (chosen == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("--profile: unknown profile '", *name, "' (built in: ", names(builtin),
                       file ? absl::StrCat("; in ", *file, ": ", names(from_file)) : "", ")"));
    }
  } else if (!from_file.empty()) {
    if (from_file.size() > 1) {
      return absl::InvalidArgumentError(absl::StrCat("--profile-file ", *file, " defines ", from_file.size(),
                                                     " profiles (", names(from_file), "): choose one with --profile"));
    }
    chosen = &from_file.front();
  } else {
    chosen = &builtin.front();
  }
  ApplyProfile(*chosen, o);
  for (size_t i = 0; i < knobs.size() && i < given.size(); ++i) {
    if (!given[i] || !knobs[i].apply) continue;
    if (absl::Status st = knobs[i].apply(*given[i], o); !st.ok()) {
      return absl::Status(st.code(), absl::StrCat(knobs[i].flag, ": ", st.message()));
    }
  }
  if (absl::StatusOr<Profile> built = BuildProfile(*o); !built.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("scheduler profile '", o->profile, "': ", built.status().message()));
  }
  return absl::OkStatus();
}

}  // namespace herd::sched
