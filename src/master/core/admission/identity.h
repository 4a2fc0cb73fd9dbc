// From a verified credential to a Principal: who the caller is, what it may
// do beyond its own jobs, and on whose behalf it acts.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "master/core/admission/authorizer.h"
#include "herd/v1/objects.pb.h"
#include "pki/pki.h"

namespace herd::master {

// What the cell records of a user (granted capabilities, revocation), or
// nullopt.
using UserRecords = std::function<std::optional<v1::User>(const std::string& name)>;

// `cert` is what the TLS handshake verified (signed by the cell's CA, in its
// validity period). `acting_as` is the user named by the client's --user
// ("" or the caller's own name: nobody else); acting as another user needs
// the run-as capability and then carries only that user's rights.
// PERMISSION_DENIED naming run-as if it is missing; UNAUTHENTICATED if the
// user's credentials issued before the certificate's were revoked. A
// user's capabilities are the certificate's (admin) and those granted in
// `users`.
absl::StatusOr<Principal> Identify(const pki::CertInfo& cert, absl::string_view acting_as,
                                   const UserRecords& users = nullptr);

}  // namespace herd::master
