// TLS for an etcd cluster (docs/design.md §10): etcd gets a CA of its own, not the
// cell's (the cell's CA signs users' credentials, and users must not reach
// etcd). EnsureTls makes, once, every file a cluster of N members and its
// masters need; MemberTlsFlags gives member i the etcd flags that use them.
// Shared by `herd up --ha` and the test clusters (testing.h), so both run
// etcd the same way.
//
//   TLS_DIR/ca.crt              etcd's CA certificate
//   TLS_DIR/eI.crt, eI.key      member I's certificate (for clients and peers)
//   TLS_DIR/master.pem          the masters' client credential (--etcd-credentials)
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"

namespace herd::store::etcd {

// Makes etcd's CA in `ca_dir` if it is not there, and the files above in
// `tls_dir` that are not there yet (made once, kept). Member i's certificate
// carries member_sans[i] as subjectAltNames (OpenSSL syntax,
// "IP:10.0.0.1,DNS:localhost"): clients check a member by the address they
// dial.
absl::Status EnsureTls(const std::string& ca_dir, const std::string& tls_dir,
                       const std::vector<std::string>& member_sans);

// TLS on both of member i's ports with the files above; only holders of a
// certificate of etcd's CA get in.
std::vector<std::string> MemberTlsFlags(const std::string& tls_dir, int i);

// The masters' client credential in `tls_dir`.
std::string MasterCredentialPath(const std::string& tls_dir);

}  // namespace herd::store::etcd
