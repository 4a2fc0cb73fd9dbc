// Google 2011 trace tasks -> Herd JobSpecs; task_constraints -> v1::Constraint.
#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "sim/trace/google2011.h"
#include "sim/trace/google2011_tasks.h"

namespace herd::sim {

int32_t HerdPriority(int p) {
  // Trace 0-11 -> Herd bands (docs/design.md §1): free, batch, mid, production, monitoring.
  static constexpr int32_t kMap[12] = {0, 25, 100, 103, 106, 109, 112, 115, 116, 200, 360, 250};
  return kMap[std::clamp(p, 0, 11)];
}

std::string HerdUserName(absl::string_view trace_user) {
  uint64_t h = 14695981039346656037ULL;  // FNV-1a 64
  for (unsigned char c : trace_user) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return absl::StrCat("u", absl::StrFormat("%016x", h).substr(0, 10));
}

std::string HerdAttributeKey(absl::string_view trace_attribute) {
  std::string key(trace_attribute);
  for (char& c : key) {
    if (c == '+') c = '-';
    if (c == '=') c = '_';
  }
  return key;
}

namespace {

struct Req {
  int64_t cpu = 0, memory = 0, disk = 0;
  auto Tie() const { return std::tie(cpu, memory, disk); }
  bool operator<(const Req& o) const { return Tie() < o.Tie(); }
  bool operator==(const Req& o) const { return Tie() == o.Tie(); }
};

Req ToReq(const TraceTask& t, const ScaleOptions& s) {
  Req r;
  r.cpu = std::max<int64_t>(1, std::llround(t.cpu * static_cast<double>(s.cpu_millis_per_unit)));
  r.memory = std::max<int64_t>(1LL << 20, std::llround(t.memory * static_cast<double>(s.memory_bytes_per_unit)));
  r.disk = std::max<int64_t>(0, std::llround(t.disk * static_cast<double>(s.disk_bytes_per_unit)));
  return r;
}

// The most common key; ties go to the largest key when `prefer_large`, else
// the smallest.
template <typename K>
K Mode(const std::map<K, int>& counts, bool prefer_large) {
  K best{};
  int n = -1;
  for (const auto& [k, c] : counts) {
    if (c > n || (c == n && prefer_large)) {
      best = k;
      n = c;
    }
  }
  return best;
}

}  // namespace

std::vector<v1::JobSpec> JobsFromTasks(const std::vector<TraceTask>& tasks, const ScaleOptions& scale,
                                       std::vector<TraceJobIndex>* index, const TraceConstraints* constraints) {
  std::map<int64_t, std::vector<const TraceTask*>> by_job;
  for (const TraceTask& t : tasks) by_job[t.job_id].push_back(&t);
  std::vector<v1::JobSpec> out;
  out.reserve(by_job.size());
  if (index != nullptr) index->clear();
  for (auto& [job_id, list] : by_job) {
    std::stable_sort(list.begin(), list.end(),
                     [](const TraceTask* a, const TraceTask* b) { return a->index < b->index; });
    std::vector<Req> reqs;
    std::map<Req, int> req_count;
    std::map<int, int> prio_count, class_count;
    bool different = false;
    for (const TraceTask* t : list) {
      reqs.push_back(ToReq(*t, scale));
      ++req_count[reqs.back()];
      ++prio_count[t->priority];
      ++class_count[t->scheduling_class];
      different = different || t->different_machines;
    }
    const Req base = Mode(req_count, /*prefer_large=*/false);
    const int prio = Mode(prio_count, /*prefer_large=*/true);
    const int klass = Mode(class_count, /*prefer_large=*/true);

    v1::JobSpec s;
    s.set_name(absl::StrCat("g", job_id));
    s.set_user(HerdUserName(list.front()->user));
    s.set_priority(HerdPriority(prio));
    s.set_task_count(static_cast<int32_t>(list.size()));
    s.mutable_task()->add_command("/bin/true");
    v1::Resources* r = s.mutable_task()->mutable_resources();
    r->set_cpu_millis(base.cpu);
    r->set_memory_bytes(base.memory);
    r->set_disk_bytes(base.disk);
    s.set_appclass(klass >= 2 ? v1::LATENCY_SENSITIVE : v1::BATCH);
    s.set_different_machines(different);
    s.mutable_restart()->set_mode(v1::RestartPolicy::ON_FAILURE);
    s.set_grace_period_ms(10'000);
    s.set_source("google-2011/task_events");
    auto& labels = *s.mutable_labels();
    labels["trace"] = "google-2011";
    labels["trace-job-id"] = absl::StrCat(job_id);
    labels["trace-user"] = list.front()->user;
    labels["trace-priority"] = absl::StrCat(prio);
    labels["trace-scheduling-class"] = absl::StrCat(klass);

    // One override per distinct request that differs from the job's.
    std::map<Req, std::vector<int32_t>> differing;
    for (size_t i = 0; i < reqs.size(); ++i) {
      if (!(reqs[i] == base)) differing[reqs[i]].push_back(static_cast<int32_t>(i));
    }
    for (const auto& [req, idx] : differing) {
      v1::TaskOverride* o = s.add_overrides();
      for (int32_t i : idx) o->add_indexes(i);
      if (req.cpu != base.cpu) o->set_cpu_millis(req.cpu);
      if (req.memory != base.memory) o->set_memory_bytes(req.memory);
      if (req.disk != base.disk) o->set_disk_bytes(req.disk);
    }

    if (constraints != nullptr) {
      for (const TraceTask* t : list) {
        auto it = constraints->find({job_id, t->index});
        if (it == constraints->end() || it->second.empty()) continue;
        for (const v1::Constraint& c : it->second) *s.add_constraints() = c;
        break;
      }
    }
    if (index != nullptr) {
      TraceJobIndex m;
      m.job_id = job_id;
      m.job = absl::StrCat(s.user(), "/", s.name());
      for (const TraceTask* t : list) {
        m.trace_index.push_back(t->index);
        m.machine_id.push_back(t->running ? t->machine_id : -1);
      }
      index->push_back(std::move(m));
    }
    out.push_back(std::move(s));
  }
  return out;
}

absl::StatusOr<TraceConstraints> LoadTaskConstraints(const std::string& dir_or_file, int64_t at_us) {
  absl::StatusOr<std::vector<std::string>> files = TracePartFiles(dir_or_file);
  if (!files.ok()) return files.status();
  TraceConstraints out;
  for (const std::string& path : *files) {
    absl::Status bad;
    absl::Status st = ReadGzipLines(path, [&](absl::string_view line, int64_t n) {
      if (line.empty()) return true;
      std::vector<absl::string_view> f = absl::StrSplit(line, ',');
      int64_t ts = 0, job = 0, idx = 0, op = 0;
      if (f.size() != 6 || !absl::SimpleAtoi(f[0], &ts) || !absl::SimpleAtoi(f[1], &job) ||
          !absl::SimpleAtoi(f[2], &idx) || idx < 0 || idx > INT32_MAX || !absl::SimpleAtoi(f[3], &op) || op < 0 ||
          op > 3 || f[4].empty() || (op >= 2 && f[5].empty())) {
        bad = absl::InvalidArgumentError(
            absl::StrCat(path, ":", n, ": not a task_constraints row (timestamp, job_id, task_index, "
                                       "comparison_operator 0-3, attribute_name, attribute_value): '",
                         line.substr(0, 120), "'"));
        return false;
      }
      if (ts > at_us) return true;
      v1::Constraint c;
      c.set_attribute(HerdAttributeKey(f[4]));
      static constexpr v1::Constraint::Op kOps[4] = {v1::Constraint::EQ, v1::Constraint::NE, v1::Constraint::LT,
                                                     v1::Constraint::GT};
      c.set_op(kOps[op]);
      if (f[5].empty()) {
        c.set_op(op == 0 ? v1::Constraint::NOT_EXISTS : v1::Constraint::EXISTS);
      } else {
        c.add_values(std::string(f[5]));
      }
      auto& list = out[{job, static_cast<int32_t>(idx)}];
      bool dup = std::any_of(list.begin(), list.end(), [&](const v1::Constraint& x) {
        return x.attribute() == c.attribute() && x.op() == c.op() && x.values_size() == c.values_size() &&
               (c.values_size() == 0 || x.values(0) == c.values(0));
      });
      if (!dup) list.push_back(std::move(c));
      return true;
    });
    if (!bad.ok()) return bad;
    if (!st.ok()) return st;
  }
  return out;
}

}  // namespace herd::sim
