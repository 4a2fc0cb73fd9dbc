#include "master/core/admission/identity.h"

#include "absl/strings/str_cat.h"

namespace herd::master {

namespace {

// The capabilities the cell granted `name`.
uint32_t Granted(const std::optional<v1::User>& rec) {
  uint32_t caps = 0;
  if (!rec) return caps;
  for (const std::string& c : rec->capabilities()) {
    if (absl::StatusOr<Capability> cap = ParseCapability(c); cap.ok()) caps |= static_cast<uint32_t>(*cap);
  }
  return caps;
}

}  // namespace

absl::StatusOr<Principal> Identify(const pki::CertInfo& cert, absl::string_view acting_as,
                                   const UserRecords& users) {
  Principal p;
  p.name = cert.subject.name;
  p.credential = cert.serial;
  p.credential_issued_s = cert.issued_s();
  switch (cert.subject.role) {
    case pki::Role::kMachine:
      p.kind = Principal::Kind::kMachine;
      return p;
    case pki::Role::kScheduler:
      p.kind = Principal::Kind::kScheduler;
      return p;
    case pki::Role::kMaster:
      p.kind = Principal::Kind::kInternal;
      p.name = "master";
      return p;
    case pki::Role::kUser:
      break;
  }
  p.kind = Principal::Kind::kUser;
  if (cert.subject.admin) p.capabilities |= static_cast<uint32_t>(Capability::kAdmin);
  if (users) {
    std::optional<v1::User> rec = users(p.name);
    if (rec && cert.issued_s() < rec->revoked_before_s()) {
      return absl::UnauthenticatedError(absl::StrCat("the credential of user ", p.name, " (serial ", cert.serial,
                                                     ") was revoked; ask an admin for a new one"));
    }
    p.capabilities |= Granted(rec);
  }
  if (acting_as.empty() || acting_as == p.name) return p;
  if (!p.Has(Capability::kRunAs)) {
    return absl::PermissionDeniedError(absl::StrCat("user ", p.name, " may not act as user ", acting_as,
                                                    ": it needs the permission 'run-as'"));
  }
  Principal as = Principal::User(std::string(acting_as));
  if (users) as.capabilities = Granted(users(as.name));
  as.acting_user = p.name;
  as.credential = p.credential;
  as.credential_issued_s = p.credential_issued_s;
  return as;
}

}  // namespace herd::master
