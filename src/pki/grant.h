// Access grants: the master's signed word that a user may exec into, or
// read the logs of, one run on one machine for a short while (see
// master/core/api/access.h). The master signs them; agents check them.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "herd/v1/objects.pb.h"
#include "pki/pki.h"

namespace herd::pki {

// How long a grant may be used to start an exec or a log read (the stream
// then lasts as long as it lasts): it expires this long after the master
// signed it, so an agent takes expires_unix_ms - kGrantValidMs as the time
// it was issued (to refuse the grants of a user revoked since, #33).
inline constexpr int64_t kGrantValidMs = 60'000;

// A grant for `user` (the name of the certificate that will present it).
absl::StatusOr<v1::AccessGrant> SignGrant(const Credential& master, absl::string_view user, absl::string_view machine,
                                          absl::string_view run_id, v1::AccessAction action,
                                          int64_t expires_unix_ms);

// OK if `grant` was signed by a master of the cell whose CA is `ca_pem`,
// names `user`, `machine`, `run_id` and `action`, and has not expired at
// now_unix_ms; PERMISSION_DENIED saying which part failed otherwise.
absl::Status CheckGrant(const v1::AccessGrant& grant, absl::string_view ca_pem, absl::string_view user,
                        absl::string_view machine, absl::string_view run_id, v1::AccessAction action,
                        int64_t now_unix_ms);

// When the master issued `grant` (Unix ms): its expiry less kGrantValidMs;
// 0 if its body does not parse. Check it with CheckGrant first.
int64_t GrantIssuedMs(const v1::AccessGrant& grant);

}  // namespace herd::pki
