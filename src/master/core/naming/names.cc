#include "master/core/naming/names.h"

#include <set>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace herd::master {
namespace {

// "alice/hello" -> {"alice", "hello"}.
std::pair<absl::string_view, absl::string_view> SplitJobId(absl::string_view id) {
  const size_t slash = id.find('/');
  if (slash == absl::string_view::npos) return {"", id};
  return {id.substr(0, slash), id.substr(slash + 1)};
}

// A task index as written in a name: decimal digits, no sign, no leading
// zero (so one task has one name).
bool ParseIndex(absl::string_view text, int32_t* index) {
  if (text.empty() || text.size() > 9 || (text.size() > 1 && text[0] == '0')) return false;
  for (char c : text) {
    if (!absl::ascii_isdigit(c)) return false;
  }
  return absl::SimpleAtoi(text, index);
}

// The job whose DNS stem ("JOB.USER", both of which may hold dots) is
// these labels.
const cell::Job* FindJobByLabels(const cell::CellState& s, const std::vector<absl::string_view>& labels,
                                 size_t first) {
  for (size_t k = first + 1; k < labels.size(); ++k) {
    std::vector<absl::string_view> job(labels.begin() + first, labels.begin() + k);
    std::vector<absl::string_view> user(labels.begin() + k, labels.end());
    if (const cell::Job* j = s.FindJob(absl::StrCat(absl::StrJoin(user, "."), "/", absl::StrJoin(job, ".")))) {
      return j;
    }
  }
  return nullptr;
}

// What "[INDEX.]JOB.USER" names (index -1: the job); job null if nothing.
NameTarget FindStem(const cell::CellState& s, const std::vector<absl::string_view>& labels) {
  NameTarget t;
  if (labels.size() < 2) return t;
  int32_t index;
  if (labels.size() >= 3 && ParseIndex(labels[0], &index)) {
    t.job = FindJobByLabels(s, labels, 1);
    if (t.job != nullptr && index >= static_cast<int32_t>(t.job->tasks.size())) t.job = nullptr;
    t.index = index;
    return t;
  }
  t.job = FindJobByLabels(s, labels, 0);
  return t;
}

bool Ready(const cell::Task& t) {
  if (t.state() != v1::Task::RUNNING || t.machine() == nullptr) return false;
  if (!t.job()->spec.task().has_health_check()) return true;
  return t.agent_info() != nullptr && t.agent_info()->health == "healthy";
}

// The SOA record of the zone: in answers to SOA and in negative answers,
// whose TTL it bounds (RFC 2308).
dns::Record Soa(absl::string_view zone, int64_t revision) {
  return {std::string(zone), dns::kTypeSoa, kDnsTtl,
          dns::RdataSoa(zone, absl::StrCat("hostmaster.", zone), static_cast<uint32_t>(revision), 60, 10, 3600,
                        kDnsTtl)};
}

// The address records of a running task for `type` (A or AAAA); a CNAME to
// its host when that is a name rather than an address.
void AddressRecords(const cell::Task& t, const std::string& owner, uint16_t type, std::vector<dns::Record>* out) {
  if (t.state() != v1::Task::RUNNING || t.machine() == nullptr) return;
  const std::string host = HostOf(t.machine()->address());
  if (host.empty()) return;
  std::string rdata = type == dns::kTypeAaaa ? dns::RdataAaaa(host) : dns::RdataA(host);
  if (!rdata.empty()) {
    out->push_back({owner, type, kDnsTtl, std::move(rdata)});
  } else if (dns::RdataA(host).empty() && dns::RdataAaaa(host).empty()) {
    std::string target = dns::RdataName(absl::AsciiStrToLower(host));
    if (!target.empty()) out->push_back({owner, dns::kTypeCname, kDnsTtl, std::move(target)});
  }
}

}  // namespace

std::string TaskPath(absl::string_view cell, absl::string_view job_id, int32_t index) {
  auto [user, job] = SplitJobId(job_id);
  return absl::StrCat("/", cell, "/", user, "/", job, "/", index);
}

std::string JobDnsName(absl::string_view cell, absl::string_view job_id, absl::string_view domain) {
  auto [user, job] = SplitJobId(job_id);
  return absl::StrCat(job, ".", user, ".", cell, ".", domain);
}

std::string HostOf(absl::string_view address) {
  if (absl::StartsWith(address, "[")) {
    const size_t close = address.find(']');
    return close == absl::string_view::npos ? "" : std::string(address.substr(1, close - 1));
  }
  const size_t colon = address.rfind(':');
  return std::string(colon == absl::string_view::npos ? address : address.substr(0, colon));
}

absl::StatusOr<NameTarget> FindName(const cell::CellState& s, absl::string_view name, absl::string_view domain) {
  if (name.empty() || name.size() > kMaxNameLength) {
    return absl::InvalidArgumentError(absl::StrCat("a name has 1-", kMaxNameLength, " characters"));
  }
  const std::string cell = s.cell_name();
  NameTarget t;
  if (absl::StrContains(name, '/')) {
    std::vector<absl::string_view> parts = absl::StrSplit(name, '/');
    if (parts[0].empty()) {  // "/CELL/USER/JOB[/INDEX]"
      if (parts.size() < 4 || parts.size() > 5) {
        return absl::InvalidArgumentError(absl::StrCat("'", name, "' is not /CELL/USER/JOB or /CELL/USER/JOB/INDEX"));
      }
      if (parts[1] != cell) {
        return absl::NotFoundError(absl::StrCat("'", name, "' is in cell '", parts[1], "'; this is cell '", cell, "'"));
      }
      parts.erase(parts.begin(), parts.begin() + 2);
    }
    if (parts.size() < 2 || parts.size() > 3) {
      return absl::InvalidArgumentError(absl::StrCat("'", name, "' is not USER/JOB or USER/JOB/INDEX"));
    }
    t.job = s.FindJob(absl::StrCat(parts[0], "/", parts[1]));
    if (t.job == nullptr) return absl::NotFoundError(absl::StrCat("no job ", parts[0], "/", parts[1]));
    if (parts.size() == 3 && !ParseIndex(parts[2], &t.index)) {
      return absl::InvalidArgumentError(absl::StrCat("'", parts[2], "' is not a task index"));
    }
  } else {
    std::string lower = absl::AsciiStrToLower(absl::StripSuffix(name, "."));
    absl::string_view rest = lower;
    if (!absl::ConsumeSuffix(&rest, absl::StrCat(".", domain)) || !absl::EndsWith(rest, absl::StrCat(".", cell))) {
      rest = lower;  // the domain may be left out
    }
    if (!absl::ConsumeSuffix(&rest, absl::StrCat(".", cell))) {
      return absl::NotFoundError(absl::StrCat("'", name, "' is not a name in cell '", cell, "' (JOB.USER.", cell,
                                              ".", domain, ")"));
    }
    std::vector<absl::string_view> labels = absl::StrSplit(rest, '.');
    t = FindStem(s, labels);
    if (t.job == nullptr) return absl::NotFoundError(absl::StrCat("no job or task is named '", name, "'"));
  }
  if (t.index >= static_cast<int32_t>(t.job->tasks.size())) {
    return absl::NotFoundError(absl::StrCat("job ", t.job->id, " has no task ", t.index, " (it has ",
                                            t.job->tasks.size(), ")"));
  }
  return t;
}

v1::NameRecord NameRecordOf(const cell::CellState& s, const cell::Task& task, absl::string_view domain) {
  v1::NameRecord r;
  const std::string& job = task.job()->id;
  r.set_name(TaskPath(s.cell_name(), job, task.index()));
  r.set_dns(absl::StrCat(task.index(), ".", JobDnsName(s.cell_name(), job, domain)));
  r.set_job(job);
  r.set_index(task.index());
  r.set_state(task.state());
  if (task.state() == v1::Task::RUNNING && task.machine() != nullptr) {
    r.set_machine(task.machine()->name());
    r.set_address(HostOf(task.machine()->address()));
  }
  if (const cell::Task::AgentInfo* info = task.agent_info()) {
    r.mutable_ports()->insert(info->ports.begin(), info->ports.end());
    r.set_health(info->health);
  }
  r.set_ready(Ready(task));
  r.set_state_revision(task.state_revision());
  return r;
}

bool NameRecords(const cell::CellState& s, const NameTarget& target, absl::string_view domain,
                 google::protobuf::RepeatedPtrField<v1::NameRecord>* out) {
  if (target.index >= 0) {
    *out->Add() = NameRecordOf(s, target.job->tasks[target.index], domain);
    return false;
  }
  for (const cell::Task& t : target.job->tasks) {
    if (out->size() >= kMaxNameRecords) return true;
    *out->Add() = NameRecordOf(s, t, domain);
  }
  return false;
}

bool SameNameRecord(const v1::NameRecord& a, const v1::NameRecord& b) {
  if (a.state() != b.state() || a.machine() != b.machine() || a.address() != b.address() ||
      a.health() != b.health() || a.ready() != b.ready() || a.ports_size() != b.ports_size()) {
    return false;
  }
  for (const auto& [name, port] : a.ports()) {
    auto it = b.ports().find(name);
    if (it == b.ports().end() || it->second != port) return false;
  }
  return true;
}

dns::Response AnswerDns(const cell::CellState& s, const dns::Question& q, absl::string_view domain,
                        int64_t revision) {
  dns::Response r;
  const std::string zone = absl::AsciiStrToLower(domain);
  absl::string_view rel = q.name;
  const bool apex = rel == zone;
  if ((!apex && !absl::ConsumeSuffix(&rel, absl::StrCat(".", zone))) ||
      (q.klass != dns::kClassIn && q.klass != dns::kClassAny)) {
    r.rcode = dns::kRefused;  // not ours: no recursion, no other zones
    r.authoritative = false;
    return r;
  }
  const bool any = q.type == dns::kTypeAny;
  auto nodata = [&] { r.authority.push_back(Soa(zone, revision)); };
  auto nxdomain = [&] {
    r.rcode = dns::kNxDomain;
    r.authority.push_back(Soa(zone, revision));
  };
  if (apex) {
    if (q.type == dns::kTypeSoa || any) {
      r.answer.push_back(Soa(zone, revision));
    } else {
      nodata();
    }
    return r;
  }
  const std::string cell = s.cell_name();
  if (rel == cell) {
    nodata();  // an empty non-terminal: names exist below it
    return r;
  }
  if (!absl::ConsumeSuffix(&rel, absl::StrCat(".", cell))) {
    nxdomain();
    return r;
  }
  std::vector<absl::string_view> labels = absl::StrSplit(rel, '.');
  // _PORT._tcp.JOB.USER: the job's ready tasks that have that named port.
  if (labels.size() >= 2 && absl::StartsWith(labels[0], "_") && (labels[1] == "_tcp" || labels[1] == "_udp")) {
    const cell::Job* job = labels.size() >= 4 ? FindJobByLabels(s, labels, 2) : nullptr;
    const std::string port(labels[0].substr(1));
    bool declared = false;
    if (job != nullptr) {
      for (const std::string& p : job->spec.task().port_names()) declared = declared || p == port;
    }
    if (!declared) {
      nxdomain();
      return r;
    }
    if (q.type != dns::kTypeSrv && !any) {
      nodata();
      return r;
    }
    const std::string job_dns = JobDnsName(cell, job->id, zone);
    for (const cell::Task& t : job->tasks) {
      if (r.answer.size() >= kMaxDnsAnswers) break;
      if (!Ready(t) || t.agent_info() == nullptr) continue;
      auto it = t.agent_info()->ports.find(port);
      if (it == t.agent_info()->ports.end() || it->second <= 0 || it->second > 0xFFFF) continue;
      const std::string target = absl::StrCat(t.index(), ".", job_dns);
      r.answer.push_back({q.name, dns::kTypeSrv, kDnsTtl,
                          dns::RdataSrv(0, 1, static_cast<uint16_t>(it->second), target)});
      AddressRecords(t, target, dns::kTypeA, &r.additional);
      AddressRecords(t, target, dns::kTypeAaaa, &r.additional);
    }
    if (r.answer.empty()) nodata();
    return r;
  }
  if (labels.size() >= 2 && labels[0] == "_tcp") {
    if (FindJobByLabels(s, labels, 1) != nullptr) {
      nodata();
    } else {
      nxdomain();
    }
    return r;
  }
  NameTarget t = FindStem(s, labels);
  if (t.job == nullptr) {
    // USER: an empty non-terminal if the user has a job here.
    const std::string prefix = absl::StrCat(rel, "/");
    auto it = s.jobs().lower_bound(prefix);
    if (it != s.jobs().end() && absl::StartsWith(it->first, prefix)) {
      nodata();
    } else {
      nxdomain();
    }
    return r;
  }
  const uint16_t type = any ? uint16_t{dns::kTypeA} : q.type;
  if (type == dns::kTypeA || type == dns::kTypeAaaa || type == dns::kTypeCname) {
    if (t.index >= 0) {
      AddressRecords(t.job->tasks[t.index], q.name, type == dns::kTypeCname ? uint16_t{dns::kTypeA} : type, &r.answer);
      if (type == dns::kTypeCname) {
        std::erase_if(r.answer, [](const dns::Record& x) { return x.type != dns::kTypeCname; });
      }
    } else if (type != dns::kTypeCname) {
      // The job: one record per address of its ready tasks (an RRset is a
      // set: tasks on one machine share it); host names cannot be joined
      // into one RRset with addresses, so they are left out here.
      std::set<std::string> seen;
      for (const cell::Task& task : t.job->tasks) {
        if (r.answer.size() >= kMaxDnsAnswers) break;
        if (!Ready(task)) continue;
        std::vector<dns::Record> recs;
        AddressRecords(task, q.name, type, &recs);
        for (dns::Record& rec : recs) {
          if (rec.type == type && seen.insert(rec.rdata).second) r.answer.push_back(std::move(rec));
        }
      }
    }
  }
  if (r.answer.empty()) nodata();
  return r;
}

}  // namespace herd::master
