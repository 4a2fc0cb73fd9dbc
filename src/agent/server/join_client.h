// herd agent --join: a new machine gets its credential with a join token
// (master/core/api/join.h), as `kubeadm join` does. The master is trusted
// only once the CA it presents has the public key hash the operator gave
// (--ca-hash, printed by herd token create): the CA is asked for over a
// connection that trusts nothing yet, checked against the hash, and the
// token is sent only over a connection that trusts that CA alone and
// expects the master's identity. The machine's private key is made here
// and never leaves it.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "pki/pki.h"

namespace herd::agent {

struct JoinOptions {
  std::string masters;  // HOST:PORT, or a comma-separated list (the leader answers)
  std::string token;    // "ID.SECRET", or "@FILE" to read it from FILE
  std::string ca_hash;  // "sha256:HEX"
  std::string machine;  // the name to join as
  int64_t timeout_ms = 30'000;
};

// The machine's new credential (not saved).
absl::StatusOr<pki::Credential> JoinCell(const JoinOptions& options);

}  // namespace herd::agent
