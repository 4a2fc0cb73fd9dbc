// From a verified credential to a Principal: who the caller is, what it may
// do beyond its own jobs, and on whose behalf it acts.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "master/core/admission/authorizer.h"
#include "pki/pki.h"

namespace herd::master {

// `cert` is what the TLS handshake verified (signed by the cell's CA, in its
// validity period). `acting_as` is the user named by the client's --user
// ("" or the caller's own name: nobody else); acting as another user needs
// the run-as capability and then carries only that user's rights.
// PERMISSION_DENIED naming run-as if it is missing.
absl::StatusOr<Principal> Identify(const pki::CertInfo& cert, absl::string_view acting_as);

}  // namespace herd::master
