#include "master/core/admission/authorizer.h"

#include "absl/strings/str_cat.h"

namespace herd::master {

std::string Principal::ToString() const {
  switch (kind) {
    case Kind::kUser:
      return name.empty() ? "an anonymous user" : absl::StrCat("user ", name);
    case Kind::kMachine:
      return absl::StrCat("machine ", name);
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

absl::Status Denied(const Principal& who, Action action, const Resource& on, absl::string_view permission) {
  return absl::PermissionDeniedError(absl::StrCat(who.ToString(), " may not ", ActionName(action), " on ",
                                                  on.ToString(), ": it needs the permission '", permission, "'"));
}

}  // namespace herd::master
