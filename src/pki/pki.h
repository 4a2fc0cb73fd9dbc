// The cell's public-key infrastructure: one certificate authority per cell,
// certificates that say who their holder is (a user, a machine, the master,
// a scheduler), credential files, and signatures for short-lived grants.
//
// Who a certificate names is in its subjectAltName, as a URI
// "herd:ROLE[+admin]/NAME" (ROLE is user, machine, master or scheduler;
// "+admin" marks an administrator); CN repeats the name for people. Servers
// also carry a DNS name derived from their identity (ServerName), which
// clients pin as the TLS target name: a connection to machine M's address
// succeeds only if the peer holds M's certificate, whatever the address.
//
// OpenSSL does the cryptography (EC P-256, ECDSA with SHA-256). Nothing here
// touches the network or gRPC, so the master core and tests can use it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace herd::pki {

// How far back a certificate's validity starts, for clocks that disagree.
inline constexpr int64_t kClockSkewSeconds = 60;

enum class Role { kUser, kMachine, kMaster, kScheduler };
absl::string_view RoleName(Role r);  // "user", "machine", ...
absl::StatusOr<Role> ParseRole(absl::string_view name);

struct Subject {
  Role role = Role::kUser;
  std::string name;
  bool admin = false;
  bool operator==(const Subject&) const = default;
};
// "user alice", "user alice (admin)", "machine m1", "master".
std::string Describe(const Subject& s);

// The DNS name a server with this identity presents and a client expects:
// "master.herd" for the master, "<hash>.machine.herd" for machine M (a hash,
// since machine names may hold characters DNS names cannot).
std::string ServerName(const Subject& s);

struct CertInfo {
  Subject subject;
  std::string serial;  // lower-case hex, no leading zeros
  int64_t not_before_s = 0;
  int64_t not_after_s = 0;  // Unix seconds
  // When it was issued (not_before_s + kClockSkewSeconds).
  int64_t issued_s() const { return not_before_s + kClockSkewSeconds; }
  bool is_ca = false;
};

struct KeyPair {
  std::string private_pem;  // PKCS#8
  std::string public_pem;   // SubjectPublicKeyInfo
};
absl::StatusOr<KeyPair> GenerateKey();

// The cell's CA: a self-signed certificate and its key.
struct Authority {
  std::string cert_pem;
  std::string key_pem;
};
absl::StatusOr<Authority> CreateAuthority(absl::string_view cell_name, int64_t now_s, int64_t valid_s);

// A certificate for `who`, binding `public_pem`, valid from now_s (less
// kClockSkewSeconds) for valid_s, with a fresh random serial.
absl::StatusOr<std::string> Issue(const Authority& ca, absl::string_view public_pem, const Subject& who,
                                  int64_t now_s, int64_t valid_s, const std::string& extra_sans = "");

// What a certificate says (no verification).
absl::StatusOr<CertInfo> Inspect(absl::string_view cert_pem);
// OK if `cert_pem` was signed by the CA in `ca_cert_pem` and is valid at
// now_s; UNAUTHENTICATED saying why otherwise.
absl::Status Verify(absl::string_view cert_pem, absl::string_view ca_cert_pem, int64_t now_s);

// A credential: a certificate, its private key and the cell CA's
// certificate, kept in one PEM file (mode 0600).
struct Credential {
  std::string cert_pem;
  std::string key_pem;
  std::string ca_pem;
  CertInfo info;  // of cert_pem
};
// Issues a fresh key and certificate for `who` (for herd up and tests; a
// user's key is made where it is used, see Issue).
// `extra_sans` adds subjectAltNames in OpenSSL's syntax ("IP:10.0.0.1,DNS:x"),
// for servers that are not Herd's (etcd members: clients check their address).
absl::StatusOr<Credential> IssueCredential(const Authority& ca, const Subject& who, int64_t now_s, int64_t valid_s,
                                           const std::string& extra_sans = "");
std::string FormatCredential(const Credential& c);
// Parses a credential file's text; errors name `where` and what is missing.
absl::StatusOr<Credential> ParseCredential(absl::string_view text, absl::string_view where);
absl::StatusOr<Credential> LoadCredential(const std::string& path);
// Writes atomically with mode 0600 (the directory is created 0700).
absl::Status SaveCredential(const std::string& path, const Credential& c);
absl::StatusOr<Authority> LoadAuthority(const std::string& dir);  // DIR/ca.crt, DIR/ca.key
absl::Status SaveAuthority(const std::string& dir, const Authority& ca);

// "sha256:HEX": SHA-256 of the DER SubjectPublicKeyInfo of the (CA)
// certificate, as kubeadm pins a cluster's CA (herd agent --ca-hash).
absl::StatusOr<std::string> PublicKeyHash(absl::string_view cert_pem);
// `n` characters of [a-z0-9] from the OS's random source (join tokens).
absl::StatusOr<std::string> RandomAlnum(int n);
// Lower-case hex SHA-256.
std::string Sha256Hex(absl::string_view data);

// ECDSA over SHA-256 with a PEM private key; Verify checks with the public
// key in a certificate.
absl::StatusOr<std::string> Sign(absl::string_view key_pem, absl::string_view data);
absl::Status VerifySignature(absl::string_view cert_pem, absl::string_view data, absl::string_view signature);

}  // namespace herd::pki
