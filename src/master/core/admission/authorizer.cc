#include "master/core/admission/authorizer.h"

#include "absl/strings/str_cat.h"

namespace herd::master {

std::string Principal::ToString() const {
  switch (kind) {
    case Kind::kUser:
      return name.empty() ? "an anonymous user" : absl::StrCat("user ", name);
    case Kind::kMachine:
      return absl::StrCat("machine ", name);
    case Kind::kScheduler:
      return absl::StrCat("scheduler ", name);
    case Kind::kInternal:
      return absl::StrCat("the master's ", name);
  }
  return name;
}

absl::string_view ActionName(Action a) {
  switch (a) {
    case Action::kSubmitJob:
      return "submit-job";
    case Action::kKillJob:
      return "kill-job";
    case Action::kScaleJob:
      return "scale-job";
    case Action::kRollbackJob:
      return "rollback-job";
    case Action::kControlRollout:
      return "control-rollout";
    case Action::kReadJob:
      return "read-job";
    case Action::kListJobs:
      return "list-jobs";
    case Action::kPropose:
      return "propose";
    case Action::kRegisterMachine:
      return "register-machine";
    case Action::kListMachines:
      return "list-machines";
    case Action::kSetQuota:
      return "set-quota";
    case Action::kListQuotas:
      return "list-quotas";
    case Action::kReadCell:
      return "read-cell";
    case Action::kWatch:
      return "watch";
    case Action::kExportCheckpoint:
      return "export-checkpoint";
    case Action::kExecTask:
      return "exec";
    case Action::kReadLogs:
      return "read-logs";
    case Action::kReadSecrets:
      return "read-secrets";
    case Action::kManageUsers:
      return "manage-users";
    case Action::kRunTaskAs:
      return "run-task-as";
    case Action::kNotifyMachine:
      return "notify-machine";
    case Action::kDrainMachine:
      return "drain-machine";
    case Action::kReadMetrics:
      return "read-metrics";
    case Action::kQueryHistory:
      return "query-history";
    case Action::kListAlerts:
      return "list-alerts";
    case Action::kOpenWebUi:
      return "open-web-ui";
    case Action::kResolveName:
      return "resolve-name";
    case Action::kCount:
      break;
  }
  return "?";
}

std::string Resource::ToString() const {
  if (!job.empty()) return absl::StrCat("job ", job);
  if (!machine.empty()) return absl::StrCat("machine ", machine);
  if (!owner.empty()) return absl::StrCat("what ", owner, " owns");
  return "the cell";
}

absl::string_view CapabilityName(Capability c) {
  switch (c) {
    case Capability::kAdmin:
      return "admin";
    case Capability::kQuotaAdmin:
      return "quota-admin";
    case Capability::kRunAs:
      return "run-as";
    case Capability::kExecAny:
      return "exec-any";
    case Capability::kReadAll:
      return "read-all";
    case Capability::kRunAsRoot:
      return "run-as-root";
  }
  return "?";
}

absl::StatusOr<Capability> ParseCapability(absl::string_view name) {
  for (Capability c : kAllCapabilities) {
    if (CapabilityName(c) == name) return c;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown capability '", name, "' (admin, quota-admin, run-as, exec-any, read-all, run-as-root)"));
}

bool IsMutating(Action a) {
  switch (a) {
    case Action::kSubmitJob:
    case Action::kKillJob:
    case Action::kScaleJob:
    case Action::kRollbackJob:
    case Action::kControlRollout:
    case Action::kPropose:
    case Action::kRegisterMachine:
    case Action::kSetQuota:
    case Action::kDrainMachine:
    case Action::kExecTask:
    case Action::kManageUsers:
    case Action::kRunTaskAs:
      return true;
    default:
      return false;
  }
}

absl::Status CellPolicy::Authorize(const Principal& who, Action action, const Resource& on) const {
  auto need = [&](Capability c) -> absl::Status {
    if (who.Has(c)) return absl::OkStatus();
    return Denied(who, action, on, CapabilityName(c));
  };
  switch (who.kind) {
    case Principal::Kind::kInternal:
      return absl::OkStatus();
    case Principal::Kind::kMachine:
      if ((action == Action::kRegisterMachine || action == Action::kNotifyMachine) && on.machine == who.name &&
          !who.name.empty()) {
        return absl::OkStatus();
      }
      return Denied(who, action, on,
                    action == Action::kRegisterMachine || action == Action::kNotifyMachine
                        ? absl::StrCat("machine:", on.machine)
                        : std::string("a user's credential"));
    case Principal::Kind::kScheduler:
      switch (action) {
        case Action::kPropose:
        case Action::kWatch:
        case Action::kExportCheckpoint:
        case Action::kReadCell:
        case Action::kListMachines:
        case Action::kReadJob:
        case Action::kListJobs:
        case Action::kListQuotas:
        case Action::kResolveName:
          return absl::OkStatus();
        default:
          return Denied(who, action, on, "a user's credential");
      }
    case Principal::Kind::kUser:
      break;
  }
  if (who.name.empty()) return Denied(who, action, on, "a user's credential");
  const bool own = !on.owner.empty() && on.owner == who.name;
  switch (action) {
    case Action::kSubmitJob:
    case Action::kKillJob:
    case Action::kScaleJob:
    case Action::kRollbackJob:
    case Action::kControlRollout:
      return own ? absl::OkStatus() : need(Capability::kAdmin);
    case Action::kExecTask:
      return own ? absl::OkStatus() : need(Capability::kExecAny);
    case Action::kReadLogs:
    case Action::kReadSecrets:
      return own ? absl::OkStatus() : need(Capability::kReadAll);
    case Action::kReadJob:
    case Action::kListJobs:
    case Action::kListMachines:
    case Action::kListQuotas:
    case Action::kReadCell:
    case Action::kReadMetrics:
    case Action::kQueryHistory:
    case Action::kListAlerts:
    case Action::kOpenWebUi:
    case Action::kResolveName:
      return absl::OkStatus();
    case Action::kSetQuota:
      return need(Capability::kQuotaAdmin);
    case Action::kRunTaskAs:
      return on.account == "root" || on.account == "0" ? need(Capability::kRunAsRoot) : need(Capability::kRunAs);
    case Action::kWatch:
    case Action::kExportCheckpoint:
      return need(Capability::kReadAll);
    case Action::kRegisterMachine:
    case Action::kNotifyMachine:
      return Denied(who, action, on, absl::StrCat("machine:", on.machine));
    case Action::kPropose:
    case Action::kManageUsers:
    case Action::kDrainMachine:
    case Action::kCount:
      break;
  }
  return need(Capability::kAdmin);
}

absl::Status Denied(const Principal& who, Action action, const Resource& on, absl::string_view permission) {
  std::string asker = who.acting_user.empty()
                          ? who.ToString()
                          : absl::StrCat("user ", who.acting_user, ", acting as ", who.name, ",");
  return absl::PermissionDeniedError(absl::StrCat(asker, " may not ", ActionName(action), " on ",
                                                  on.ToString(), ": it needs the permission '", permission, "'"));
}

}  // namespace herd::master
