#include "store/etcd/etcd_tls.h"

#include <ctime>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "base/files.h"
#include "base/status.h"
#include "pki/pki.h"

namespace herd::store::etcd {
namespace fs = std::filesystem;

namespace {
constexpr int64_t kValidSeconds = 3650LL * 86400;
}  // namespace

absl::Status EnsureTls(const std::string& ca_dir, const std::string& tls_dir,
                       const std::vector<std::string>& member_sans) {
  absl::StatusOr<pki::Authority> ca = pki::LoadAuthority(ca_dir);
  if (!ca.ok()) {
    ca = pki::CreateAuthority("etcd", time(nullptr), kValidSeconds);
    if (!ca.ok()) return ca.status();
    HERD_RETURN_IF_ERROR(pki::SaveAuthority(ca_dir, *ca));
  }
  std::error_code ec;
  fs::create_directories(tls_dir, ec);
  fs::permissions(tls_dir, fs::perms::owner_all, ec);
  HERD_RETURN_IF_ERROR(WriteFileAtomic(tls_dir + "/ca.crt", ca->cert_pem, {.mode = 0644}));
  for (size_t i = 0; i < member_sans.size(); ++i) {
    const std::string crt = absl::StrCat(tls_dir, "/e", i, ".crt");
    if (fs::exists(crt)) continue;
    absl::StatusOr<pki::Credential> c =
        pki::IssueCredential(*ca, pki::Subject{pki::Role::kMachine, absl::StrCat("etcd-e", i)}, time(nullptr),
                             kValidSeconds, member_sans[i]);
    if (!c.ok()) return c.status();
    HERD_RETURN_IF_ERROR(WriteFileAtomic(absl::StrCat(tls_dir, "/e", i, ".key"), c->key_pem));
    HERD_RETURN_IF_ERROR(WriteFileAtomic(crt, c->cert_pem, {.mode = 0644}));
  }
  const std::string master = MasterCredentialPath(tls_dir);
  if (!fs::exists(master)) {
    absl::StatusOr<pki::Credential> c =
        pki::IssueCredential(*ca, pki::Subject{pki::Role::kMaster, ""}, time(nullptr), kValidSeconds);
    if (!c.ok()) return c.status();
    HERD_RETURN_IF_ERROR(pki::SaveCredential(master, *c));
  }
  return absl::OkStatus();
}

std::vector<std::string> MemberTlsFlags(const std::string& tls_dir, int i) {
  const std::string crt = absl::StrCat(tls_dir, "/e", i, ".crt"), key = absl::StrCat(tls_dir, "/e", i, ".key");
  const std::string ca = tls_dir + "/ca.crt";
  return {"--cert-file",      crt, "--key-file",      key, "--trusted-ca-file",      ca, "--client-cert-auth",
          "--peer-cert-file", crt, "--peer-key-file", key, "--peer-trusted-ca-file", ca, "--peer-client-cert-auth"};
}

std::string MasterCredentialPath(const std::string& tls_dir) { return tls_dir + "/master.pem"; }

}  // namespace herd::store::etcd
