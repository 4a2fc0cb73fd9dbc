#include "master/core/api/machines.h"

#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "base/ids.h"
#include "base/priority.h"
#include "base/status.h"
#include "cell/constraints.h"
#include "master/core/admission/quota.h"

namespace herd::master {
namespace {

bool SameAttributes(const cell::Attributes& a, const cell::Attributes& b) {
  if (a.size() != b.size()) return false;
  for (const auto& [k, v] : b) {
    auto it = a.find(k);
    if (it == a.end() || it->second != v) return false;
  }
  return true;
}

}  // namespace

namespace {

// HOST:PORT with a host of letters, digits, '.', '-', ':' (IPv6 in
// brackets) and a port in 1..65535: what a scraper or a person may be sent
// to, nothing else (no paths, spaces or control characters).
bool IsHostPort(absl::string_view s) {
  const size_t colon = s.rfind(':');
  if (s.size() > 255 || colon == absl::string_view::npos || colon == 0) return false;
  int port = 0;
  if (!absl::SimpleAtoi(s.substr(colon + 1), &port) || port < 1 || port > 65535) return false;
  absl::string_view host = s.substr(0, colon);
  if (host.front() == '[') {
    if (host.size() < 3 || host.back() != ']') return false;
    host = host.substr(1, host.size() - 2);
  }
  for (char c : host) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-' && c != ':') return false;
  }
  return true;
}

}  // namespace

absl::StatusOr<v1::RegisterMachineResponse> MachinesApi::RegisterMachine(const Principal& who,
                                                                         const v1::RegisterMachineRequest& req) {
  const v1::Machine& in = req.machine();
  HERD_RETURN_IF_ERROR(ValidateMachineName(in.name()));
  HERD_RETURN_IF_ERROR(ctx_.Authorize(who, Action::kRegisterMachine, Resource{"", "", in.name()}));
  if (in.address().empty()) return absl::InvalidArgumentError("machine address is required");
  if (!in.http().empty() && !IsHostPort(in.http())) {
    return absl::InvalidArgumentError(
        absl::StrCat("machine http: '", absl::CHexEscape(in.http().substr(0, 64)), "' is not HOST:PORT"));
  }
  auto build = [&](const cell::CellState& s) -> absl::StatusOr<std::vector<v1::Mutation>> {
    const cell::Machine* m = s.FindMachine(in.name());
    if (m != nullptr && m->state() == v1::Machine::UP && m->address() == in.address() && m->http() == in.http() &&
        m->capacity() == ResourceVector::FromProto(in.capacity()) && SameAttributes(m->attributes(), in.attributes())) {
      return std::vector<v1::Mutation>{};  // nothing changed
    }
    v1::Mutation mut;
    v1::Machine* out = mut.mutable_machine_registered()->mutable_machine();
    out->set_name(in.name());
    out->set_address(in.address());
    out->set_http(in.http());
    *out->mutable_capacity() = in.capacity();
    *out->mutable_attributes() = in.attributes();
    return std::vector<v1::Mutation>{mut};
  };
  HERD_ASSIGN_OR_RETURN(int64_t rev, ctx_.committer->Commit(absl::StrCat("agent:", in.name()), build));
  if (LinkShard* link = ctx_.link.load(); link != nullptr) link->Kick(in.name());
  v1::RegisterMachineResponse r;
  r.set_revision(rev);
  r.set_poll_interval_ms(ctx_.options->link.poll_interval_ms);
  return r;
}

absl::StatusOr<v1::MachineChangedResponse> MachinesApi::MachineChanged(const Principal& who,
                                                                       const v1::MachineChangedRequest& req) {
  HERD_RETURN_IF_ERROR(ValidateMachineName(req.machine()));
  HERD_RETURN_IF_ERROR(ctx_.Authorize(who, Action::kNotifyMachine, Resource{"", "", req.machine()}));
  const bool known =
      ctx_.committer->Read([&](const cell::CellState& s) { return s.FindMachine(req.machine()) != nullptr; });
  if (!known) return absl::NotFoundError(absl::StrCat("machine ", Quote(req.machine()), " is not registered"));
  if (LinkShard* link = ctx_.link.load(); link != nullptr) link->Kick(req.machine());
  return v1::MachineChangedResponse();
}

absl::StatusOr<v1::ListMachinesResponse> MachinesApi::ListMachines(const Principal& who,
                                                                   const v1::ListMachinesRequest& req) {
  HERD_RETURN_IF_ERROR(ctx_.Authorize(who, Action::kListMachines, Resource{}));
  return ctx_.AtRevision<v1::ListMachinesResponse>(
      req.at_revision(), [&](const cell::CellState& s) -> absl::StatusOr<v1::ListMachinesResponse> {
        v1::ListMachinesResponse r;
        for (const cell::Machine* m : s.machines()) *r.add_machines() = m->ToProto();
        r.set_revision(s.revision());
        return r;
      });
}

absl::StatusOr<v1::SetQuotaResponse> MachinesApi::SetQuota(const Principal& who, const v1::SetQuotaRequest& req) {
  v1::Quota q = req.quota();
  HERD_RETURN_IF_ERROR(ctx_.Authorize(who, Action::kSetQuota, Resource{"", q.user(), ""}));
  if (q.limited().empty()) {
    for (const std::string& d : LimitedDimensions(q)) q.add_limited(d);
  }
  for (const std::string& d : q.limited()) {
    if (d != "cpu" && d != "memory" && d != "disk" && d != "ports") {
      HERD_RETURN_IF_ERROR(ValidateResourceName(d));
    }
  }
  auto build = [&](const cell::CellState&) -> absl::StatusOr<std::vector<v1::Mutation>> {
    v1::Mutation m;
    *m.mutable_quota_set()->mutable_quota() = q;
    return std::vector<v1::Mutation>{m};
  };
  HERD_ASSIGN_OR_RETURN(int64_t rev, ctx_.committer->Commit(who.name, build));
  v1::SetQuotaResponse r;
  r.set_revision(rev);
  return r;
}

absl::StatusOr<v1::DrainMachinesResponse> MachinesApi::DrainMachines(const Principal& who,
                                                                     const v1::DrainMachinesRequest& req) {
  if (req.machines().empty()) return absl::InvalidArgumentError("drain: name at least one machine");
  if (req.machines_size() > 10000) return absl::InvalidArgumentError("drain: at most 10,000 machines at once");
  if (req.reason().size() > 1024) return absl::InvalidArgumentError("drain: the reason is over 1,024 bytes");
  for (const std::string& name : req.machines()) {
    HERD_RETURN_IF_ERROR(ctx_.Authorize(who, Action::kDrainMachine, Resource{"", "", name}));
  }
  std::vector<std::string> changed;
  auto build = [&](const cell::CellState& s) -> absl::StatusOr<std::vector<v1::Mutation>> {
    std::vector<v1::Mutation> out;
    changed.clear();
    for (const std::string& name : req.machines()) {
      const cell::Machine* m = s.FindMachine(name);
      if (m == nullptr) return absl::NotFoundError(absl::StrCat("no machine ", name, "; nothing was drained"));
      if (m->drained() == !req.undrain() && (req.undrain() || m->drain_reason() == req.reason())) continue;
      v1::Mutation mut;
      mut.mutable_machine_drained()->set_name(name);
      mut.mutable_machine_drained()->set_drained(!req.undrain());
      mut.mutable_machine_drained()->set_reason(req.reason());
      out.push_back(std::move(mut));
      changed.push_back(name);
    }
    return out;
  };
  HERD_ASSIGN_OR_RETURN(int64_t rev, ctx_.committer->Commit(who.name, build));
  v1::DrainMachinesResponse r;
  r.set_revision(rev);
  for (auto& c : changed) r.add_changed(std::move(c));
  return r;
}

absl::StatusOr<v1::ListQuotasResponse> MachinesApi::ListQuotas(const Principal& who,
                                                               const v1::ListQuotasRequest& req) {
  HERD_RETURN_IF_ERROR(ctx_.Authorize(who, Action::kListQuotas, Resource{"", req.user(), ""}));
  return ctx_.committer->Read([&](const cell::CellState& s) -> absl::StatusOr<v1::ListQuotasResponse> {
    v1::ListQuotasResponse r;
    for (const auto& [key, q] : s.quotas()) {
      if (!req.user().empty() && q.user() != req.user()) continue;
      v1::QuotaUsage* u = r.add_quotas();
      *u->mutable_quota() = q;
      s.Usage(q.user(), *ParseBand(q.band())).ToProto(u->mutable_used());
    }
    // Users with live work but no quota in a band are unlimited there.
    std::set<std::pair<std::string, std::string>> seen;
    for (const auto& [key, q] : s.quotas()) seen.insert(key);
    for (const auto& [id, j] : s.jobs()) {
      if (j->state == v1::Job::DEAD) continue;
      if (!req.user().empty() && j->spec.user() != req.user()) continue;
      std::string band(BandNameOf(j->spec.priority()));
      if (!seen.insert({j->spec.user(), band}).second) continue;
      v1::QuotaUsage* u = r.add_quotas();
      u->mutable_quota()->set_user(j->spec.user());
      u->mutable_quota()->set_band(band);
      u->set_unlimited(true);
      s.Usage(j->spec.user(), BandOf(j->spec.priority())).ToProto(u->mutable_used());
    }
    return r;
  });
}

absl::StatusOr<v1::CellInfo> MachinesApi::GetCell(const Principal& who) {
  HERD_RETURN_IF_ERROR(ctx_.Authorize(who, Action::kReadCell, Resource{}));
  v1::CellInfo info = ctx_.committer->Read([&](const cell::CellState& s) {
    v1::CellInfo i;
    i.set_cell(s.cell_name());
    i.set_revision(s.revision());
    i.set_machines(static_cast<int32_t>(s.machines().size()));
    int32_t up = 0;
    for (const cell::Machine* m : s.machines()) up += m->state() == v1::Machine::UP;
    i.set_machines_up(up);
    int32_t live = 0;
    for (const auto& [id, j] : s.jobs()) live += j->state != v1::Job::DEAD;
    i.set_jobs(live);
    i.set_tasks_pending(static_cast<int32_t>(s.task_count(v1::Task::PENDING)));
    i.set_tasks_running(static_cast<int32_t>(s.task_count(v1::Task::RUNNING)));
    i.set_tasks_dead(static_cast<int32_t>(s.task_count(v1::Task::DEAD)));
    return i;
  });
  info.set_durable_revision(ctx_.committer->durable_revision());
  info.set_version(ctx_.options->version);
  info.set_started_ms(ctx_.started_ms);
  if (LinkShard* link = ctx_.link.load(); link != nullptr) {
    const LinkShard::Stats st = link->GetStats();
    v1::LinkStats* l = info.mutable_link();
    l->set_polls(st.polls);
    l->set_full_polls(st.full_polls);
    l->set_failures(st.failures);
    l->set_in_flight(st.in_flight);
    l->set_machines_behind(st.machines_behind);
    l->set_latency_p50_ms(st.latency_p50_ms);
    l->set_latency_p99_ms(st.latency_p99_ms);
    l->set_latency_max_ms(st.latency_max_ms);
  }
  return info;
}

}  // namespace herd::master
