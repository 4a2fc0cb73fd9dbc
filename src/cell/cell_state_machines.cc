// CellState: machines and administration (MachineRegistered/Down/Up/Drained,
// MachineInterference, MachinePackages, ReservationsSet, UserSet, QuotaSet):
// their Check and Apply halves.
#include "cell/cell_state.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "base/ids.h"
#include "base/status.h"

namespace herd::cell {

using v1::Event;

absl::Status CellState::CheckMachineRegistered(const v1::MachineRegistered& m) const {
  HERD_RETURN_IF_ERROR(ValidateMachineName(m.machine().name()));
  if (ResourceVector::FromProto(m.machine().capacity()).AnyNegative()) {
    return absl::InvalidArgumentError(absl::StrCat("machine ", m.machine().name(), ": negative capacity"));
  }
  for (const auto& [k, v] : m.machine().attributes()) HERD_RETURN_IF_ERROR(ValidateAttributeKey(k));
  return absl::OkStatus();
}

absl::Status CellState::CheckQuota(const v1::QuotaSet& m) const {
  HERD_RETURN_IF_ERROR(ValidateUserName(m.quota().user()));
  if (!ParseBand(m.quota().band())) {
    return absl::InvalidArgumentError(absl::StrCat("unknown band '", m.quota().band(),
                                                   "' (free, batch, mid, production, monitoring)"));
  }
  if (ResourceVector::FromProto(m.quota().limit()).AnyNegative()) {
    return absl::InvalidArgumentError("quota must not be negative");
  }
  return absl::OkStatus();
}

absl::Status CellState::CheckUser(const v1::UserSet& m) const {
  HERD_RETURN_IF_ERROR(ValidateUserName(m.user().name()));
  for (const std::string& c : m.user().capabilities()) {
    if (c.empty() || c.size() > 32) return absl::InvalidArgumentError(absl::StrCat("bad capability '", Quote(c), "'"));
  }
  if (m.user().revoked_before_s() < 0) return absl::InvalidArgumentError("revoked_before_s must not be negative");
  return absl::OkStatus();
}

absl::Status CellState::CheckJoinToken(const v1::JoinTokenSet& m) const {
  const v1::JoinToken& t = m.token();
  if (t.id().size() != 6 || !std::all_of(t.id().begin(), t.id().end(), [](char c) {
        return absl::ascii_isdigit(c) || (c >= 'a' && c <= 'z');
      })) {
    return absl::InvalidArgumentError(absl::StrCat("join token id '", Quote(t.id()), "' is not 6 of [a-z0-9]"));
  }
  if (m.remove()) return absl::OkStatus();
  if (t.secret_sha256().size() != 64) return absl::InvalidArgumentError("join token: secret_sha256 is not 64 hex digits");
  if (t.max_uses() < 0) return absl::InvalidArgumentError("join token: max_uses must not be negative");
  if (t.description().size() > 256) return absl::InvalidArgumentError("join token: description over 256 bytes");
  if (t.machines_size() > 10'000) return absl::InvalidArgumentError("join token: over 10,000 machines");
  for (const std::string& name : t.machines()) HERD_RETURN_IF_ERROR(ValidateMachineName(name));
  return absl::OkStatus();
}

absl::Status CellState::CheckReservations(const v1::ReservationsSet& m) const {
  for (const auto& e : m.entries()) {
    const Task* t = FindTask(e.job(), e.index());
    if (t == nullptr) return absl::NotFoundError(absl::StrCat("no task ", TaskName(e.job(), e.index())));
    ResourceVector r = ResourceVector::FromProto(e.reservation());
    if (r.AnyNegative() || !r.FitsIn(t->resources_)) {
      return absl::InvalidArgumentError(absl::StrCat("reservation of ", TaskName(e.job(), e.index()), " (",
                                                     r.ToString(), ") exceeds its limit (", t->resources_.ToString(),
                                                     ")"));
    }
  }
  return absl::OkStatus();
}

void CellState::ApplyReservations(const v1::Mutation& m) {
  for (const auto& e : m.reservations_set().entries()) {
    Task* t = MutableTask(e.job(), e.index());
    if (e.incarnation() != 0 && (t->state_ != v1::Task::RUNNING || t->incarnation_ != e.incarnation())) continue;
    ResourceVector r = ResourceVector::FromProto(e.reservation());
    if (t->machine_ != nullptr && !t->in_alloc()) {
      t->machine_->reserved_ -= t->reservation();
      t->machine_->reserved_ += r;
      if (r.FitsIn(t->reservation()) && !(r == t->reservation())) freed_revision_ = revision_;
    }
    t->reservation_ = r;
    t->state_revision_ = revision_;
  }
}

void CellState::ApplyMachineRegistered(const v1::Mutation& m, Effects* fx) {
  const v1::Machine& in = m.machine_registered().machine();
  Machine* mach = MutableMachine(in.name());
  if (mach == nullptr) {
    auto owned = std::make_unique<Machine>();
    mach = owned.get();
    mach->name_ = in.name();
    mach->order_ = machine_seq_++;
    mach->registered_ms_ = m.time_ms();
    machines_.emplace(in.name(), std::move(owned));
    machine_list_.push_back(mach);
    mach->reason_ = "registered";
  } else {
    mach->reason_ = "re-registered";
  }
  mach->address_ = in.address();
  mach->http_ = in.http();
  mach->capacity_ = ResourceVector::FromProto(in.capacity());
  mach->attributes_ = in.attributes();
  mach->packages_.assign(in.packages().begin(), in.packages().end());
  std::sort(mach->packages_.begin(), mach->packages_.end());
  mach->packages_.erase(std::unique(mach->packages_.begin(), mach->packages_.end()), mach->packages_.end());
  mach->state_ = v1::Machine::UP;
  mach->state_revision_ = revision_;
  mach->state_ms_ = m.time_ms();
  freed_revision_ = revision_;
  machines_revision_ = revision_;
  fx->machines.push_back(mach->name_);
}

void CellState::ApplyMachineDown(const v1::Mutation& m, Effects* fx) {
  Machine* mach = MutableMachine(m.machine_down().name());
  mach->state_ = v1::Machine::DOWN;
  mach->reason_ = m.machine_down().reason();
  mach->state_revision_ = revision_;
  mach->state_ms_ = m.time_ms();
  std::string reason = absl::StrCat("machine ", mach->name_, " down");
  if (!m.machine_down().reason().empty()) absl::StrAppend(&reason, ": ", m.machine_down().reason());
  std::vector<Task*> lost(mach->tasks_.begin(), mach->tasks_.end());
  for (Task* t : lost) {
    Unplace(t, fx);
    t->phase_ = v1::Task::PHASE_UNSPECIFIED;
    t->pid_ = 0;
    Transition(t, v1::Task::PENDING, Event::LOST, reason, m, mach->name_);
    UpdateJobState(t->job_, m);
  }
  if (!lost.empty()) fx->pending_added = true;
  fx->machines.push_back(mach->name_);
}

void CellState::ApplyMachineUp(const v1::Mutation& m) {
  Machine* mach = MutableMachine(m.machine_up().name());
  mach->state_ = v1::Machine::UP;
  mach->reason_ = m.machine_up().reason();
  mach->state_revision_ = revision_;
  mach->state_ms_ = m.time_ms();
  freed_revision_ = revision_;
}

void CellState::ApplyMachineDrained(const v1::Mutation& m, Effects* fx) {
  Machine* mach = MutableMachine(m.machine_drained().name());
  mach->drained_ = m.machine_drained().drained();
  mach->drain_reason_ = mach->drained_ ? m.machine_drained().reason() : "";
  mach->state_revision_ = revision_;
  // Undrained: room to place into again.
  if (!mach->drained_) freed_revision_ = revision_;
  fx->machines.push_back(mach->name_);
}

void CellState::ApplyMachineInterference(const v1::Mutation& m) {
  const v1::MachineInterference& mi = m.machine_interference();
  Machine* mach = MutableMachine(mi.name());
  // Placement on it may change (non-production work avoids a marked machine).
  const bool marked = mi.level() == "mark";
  if (mach->interference_marked() != marked) machines_revision_ = revision_;
  if (mach->interference_marked() && !marked) freed_revision_ = revision_;  // room for non-production work again
  mach->interference_ = mi.level();
  mach->interference_reason_ = mi.level().empty() ? "" : mi.reason();
}

void CellState::ApplyMachinePackages(const v1::Mutation& m) {
  Machine* mach = MutableMachine(m.machine_packages().name());
  mach->packages_.assign(m.machine_packages().packages().begin(), m.machine_packages().packages().end());
  std::sort(mach->packages_.begin(), mach->packages_.end());
  mach->packages_.erase(std::unique(mach->packages_.begin(), mach->packages_.end()), mach->packages_.end());
  mach->state_revision_ = revision_;
  mach->state_ms_ = m.time_ms();
}

void CellState::ApplyUser(const v1::Mutation& m) {
  const v1::User& u = m.user_set().user();
  if (u.capabilities().empty() && u.revoked_before_s() == 0) {
    users_.erase(u.name());
  } else {
    users_[u.name()] = u;
  }
}

void CellState::ApplyJoinToken(const v1::Mutation& m) {
  const v1::JoinTokenSet& j = m.join_token_set();
  if (j.remove()) {
    join_tokens_.erase(j.token().id());
  } else {
    join_tokens_[j.token().id()] = j.token();
  }
}

void CellState::ApplyQuota(const v1::Mutation& m) {
  const v1::Quota& q = m.quota_set().quota();
  quotas_[std::make_pair(q.user(), q.band())] = q;
}

}  // namespace herd::cell
