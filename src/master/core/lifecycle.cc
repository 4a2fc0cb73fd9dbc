#include "master/core/lifecycle.h"

#include "absl/strings/str_cat.h"
#include "base/log.h"

namespace herd::master {

MasterLifecycle::MasterLifecycle(MasterCore* core, Mode mode) : core_(core), mode_(mode) {}

MasterLifecycle::~MasterLifecycle() { Stop(); }

void MasterLifecycle::AddPart(MasterPart part) { parts_.push_back(std::move(part)); }

void MasterLifecycle::AddLeaderPart(MasterPart part) { extra_leader_.push_back(std::move(part)); }

const char* MasterLifecycle::PhaseName(Phase p) {
  switch (p) {
    case Phase::kNew:
      return "new";
    case Phase::kFollowing:
      return "following";
    case Phase::kLeading:
      return "leading";
    case Phase::kDemoted:
      return "demoted";
    case Phase::kStopped:
      return "stopped";
  }
  return "?";
}

MasterLifecycle::Phase MasterLifecycle::phase() const {
  absl::MutexLock l(&mu_);
  return phase_;
}

absl::Status MasterLifecycle::StartAll(std::vector<MasterPart>& parts) {
  if (mode_ == Mode::kStepped) return absl::OkStatus();
  for (size_t i = 0; i < parts.size(); ++i) {
    if (!parts[i].start) continue;
    absl::Status st = parts[i].start();
    if (!st.ok()) {
      std::vector<MasterPart> started(std::make_move_iterator(parts.begin()),
                                      std::make_move_iterator(parts.begin() + static_cast<long>(i)));
      StopAll(started);
      parts.clear();
      return absl::Status(st.code(), absl::StrCat(parts[i].name, ": ", st.message()));
    }
  }
  return absl::OkStatus();
}

void MasterLifecycle::StopAll(std::vector<MasterPart>& parts) {
  for (auto it = parts.rbegin(); it != parts.rend(); ++it) {
    if (it->stop) it->stop();
  }
  parts.clear();
}

absl::Status MasterLifecycle::Start() {
  absl::MutexLock l(&mu_);
  if (phase_ != Phase::kNew) {
    return absl::FailedPreconditionError(absl::StrCat("Start: the master is ", PhaseName(phase_)));
  }
  absl::Status st = StartAll(parts_);
  if (!st.ok()) {
    phase_ = Phase::kStopped;
    return st;
  }
  phase_ = Phase::kFollowing;
  return absl::OkStatus();
}

absl::Status MasterLifecycle::Promote(store::LogStore* writer, AgentLink* link) {
  absl::MutexLock l(&mu_);
  if (phase_ != Phase::kFollowing) {
    return absl::FailedPreconditionError(
        absl::StrCat("Promote: the master is ", PhaseName(phase_),
                     phase_ == Phase::kDemoted ? " (a demoted master restarts as a follower)" : ""));
  }
  if (!core_->leading()) {
    if (writer == nullptr) return absl::InvalidArgumentError("Promote: a follower needs the leader's store");
    if (absl::Status st = core_->Promote(writer, link); !st.ok()) return st;
  }
  leader_ = core_->LeaderParts();
  for (MasterPart& p : extra_leader_) leader_.push_back(std::move(p));
  extra_leader_.clear();
  if (absl::Status st = StartAll(leader_); !st.ok()) {
    phase_ = Phase::kDemoted;
    return st;
  }
  phase_ = Phase::kLeading;
  return absl::OkStatus();
}

void MasterLifecycle::Demote() {
  absl::MutexLock l(&mu_);
  if (phase_ != Phase::kLeading) return;
  if (mode_ == Mode::kThreads) {
    StopAll(leader_);
  } else {
    leader_.clear();
  }
  phase_ = Phase::kDemoted;
}

void MasterLifecycle::Stop() {
  Demote();
  absl::MutexLock l(&mu_);
  if (phase_ == Phase::kStopped) return;
  if (mode_ == Mode::kThreads && phase_ != Phase::kNew) {
    StopAll(parts_);
  } else {
    parts_.clear();
  }
  phase_ = Phase::kStopped;
}

absl::Status MasterLifecycle::Step() {
  absl::MutexLock l(&mu_);
  if (mode_ != Mode::kStepped) return absl::FailedPreconditionError("Step: the parts run on their own threads");
  if (phase_ != Phase::kLeading) {
    return absl::FailedPreconditionError(absl::StrCat("Step: the master is ", PhaseName(phase_)));
  }
  for (MasterPart& p : leader_) {
    if (!p.step) continue;
    absl::Status st = p.step();
    if (!st.ok()) return absl::Status(st.code(), absl::StrCat(p.name, ": ", st.message()));
  }
  return absl::OkStatus();
}

std::vector<std::string> MasterLifecycle::LeaderPartNames() const {
  absl::MutexLock l(&mu_);
  std::vector<std::string> names;
  for (const MasterPart& p : leader_) names.push_back(p.name);
  return names;
}

}  // namespace herd::master
