#include "pki/pki.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/sha.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/files.h"

namespace herd::pki {
namespace {

// Owners of OpenSSL objects.
struct Free {
  void operator()(BIO* p) const { BIO_free_all(p); }
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
  void operator()(X509* p) const { X509_free(p); }
  void operator()(X509_NAME* p) const { X509_NAME_free(p); }
  void operator()(X509_EXTENSION* p) const { X509_EXTENSION_free(p); }
  void operator()(X509_STORE* p) const { X509_STORE_free(p); }
  void operator()(X509_STORE_CTX* p) const { X509_STORE_CTX_free(p); }
  void operator()(BIGNUM* p) const { BN_free(p); }
  void operator()(EVP_MD_CTX* p) const { EVP_MD_CTX_free(p); }
  void operator()(GENERAL_NAMES* p) const { GENERAL_NAMES_free(p); }
};
template <typename T>
using Owned = std::unique_ptr<T, Free>;

// OpenSSL keeps errors in a per-thread queue, and TLS code that later runs
// on the same thread (gRPC's handshakes run on the caller's thread too)
// reads a stale error there as its own failure. Every public function of
// this file leaves the queue empty, whatever happened.
struct ClearErrorsOnExit {
  ClearErrorsOnExit() = default;
  ClearErrorsOnExit(const ClearErrorsOnExit&) = delete;
  ~ClearErrorsOnExit() { ERR_clear_error(); }
};

// The newest OpenSSL error as text, and the queue cleared.
std::string SslError() {
  unsigned long e = ERR_get_error();
  ERR_clear_error();
  if (e == 0) return "unknown error";
  char buf[256];
  ERR_error_string_n(e, buf, sizeof(buf));
  return buf;
}

absl::Status Fail(absl::string_view what) { return absl::InternalError(absl::StrCat(what, ": ", SslError())); }

Owned<BIO> MemIn(absl::string_view text) {
  return Owned<BIO>(BIO_new_mem_buf(text.data(), static_cast<int>(text.size())));
}

std::string Drain(BIO* bio) {
  char* data = nullptr;
  long n = BIO_get_mem_data(bio, &data);
  return std::string(data, n > 0 ? static_cast<size_t>(n) : 0);
}

absl::StatusOr<Owned<X509>> ReadCert(absl::string_view pem) {
  auto bio = MemIn(pem);
  Owned<X509> x(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
  if (!x) {
    ERR_clear_error();
    return absl::InvalidArgumentError("not a PEM certificate");
  }
  return x;
}

absl::StatusOr<Owned<EVP_PKEY>> ReadPrivateKey(absl::string_view pem) {
  auto bio = MemIn(pem);
  Owned<EVP_PKEY> k(PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr));
  if (!k) {
    ERR_clear_error();
    return absl::InvalidArgumentError("not a PEM private key");
  }
  return k;
}

absl::StatusOr<Owned<EVP_PKEY>> ReadPublicKey(absl::string_view pem) {
  auto bio = MemIn(pem);
  Owned<EVP_PKEY> k(PEM_read_bio_PUBKEY(bio.get(), nullptr, nullptr, nullptr));
  if (!k) {
    ERR_clear_error();
    return absl::InvalidArgumentError("not a PEM public key");
  }
  return k;
}

absl::StatusOr<std::string> WriteCert(X509* x) {
  Owned<BIO> bio(BIO_new(BIO_s_mem()));
  if (PEM_write_bio_X509(bio.get(), x) != 1) return Fail("writing a certificate");
  return Drain(bio.get());
}

// The identity URI in a certificate's subjectAltName: herd:ROLE[+admin]/NAME.
constexpr absl::string_view kUriPrefix = "herd:";

std::string IdentityUri(const Subject& s) {
  return absl::StrCat(kUriPrefix, RoleName(s.role), s.admin ? "+admin" : "", "/", s.name);
}

absl::StatusOr<Subject> ParseIdentityUri(absl::string_view uri) {
  if (!absl::StartsWith(uri, kUriPrefix)) return absl::InvalidArgumentError("not a herd identity");
  uri.remove_prefix(kUriPrefix.size());
  size_t slash = uri.find('/');
  if (slash == absl::string_view::npos) return absl::InvalidArgumentError("herd identity without a name");
  absl::string_view role = uri.substr(0, slash);
  Subject s;
  s.name = std::string(uri.substr(slash + 1));
  if (absl::ConsumeSuffix(&role, "+admin")) s.admin = true;
  absl::StatusOr<Role> r = ParseRole(role);
  if (!r.ok()) return r.status();
  s.role = *r;
  if (s.name.empty() && s.role != Role::kMaster) return absl::InvalidArgumentError("herd identity without a name");
  return s;
}

absl::Status AddExtension(X509* cert, X509* issuer, int nid, const std::string& value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  Owned<X509_EXTENSION> ext(X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str()));
  if (!ext || X509_add_ext(cert, ext.get(), -1) != 1) return Fail(absl::StrCat("adding extension ", value));
  return absl::OkStatus();
}

absl::Status SetRandomSerial(X509* x) {
  Owned<BIGNUM> bn(BN_new());
  // 127 random bits: positive and unique in practice.
  if (!bn || BN_rand(bn.get(), 127, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY) != 1) return Fail("random serial");
  if (BN_to_ASN1_INTEGER(bn.get(), X509_get_serialNumber(x)) == nullptr) return Fail("serial");
  return absl::OkStatus();
}

absl::Status SetValidity(X509* x, int64_t now_s, int64_t valid_s) {
  constexpr int64_t kSkew = kClockSkewSeconds;
  if (ASN1_TIME_set(X509_getm_notBefore(x), static_cast<time_t>(now_s - kSkew)) == nullptr ||
      ASN1_TIME_set(X509_getm_notAfter(x), static_cast<time_t>(now_s + valid_s)) == nullptr) {
    return Fail("validity");
  }
  return absl::OkStatus();
}

int64_t ToUnix(const ASN1_TIME* t) {
  struct tm tm {};
  if (ASN1_TIME_to_tm(t, &tm) != 1) return 0;
  return static_cast<int64_t>(timegm(&tm));
}

absl::Status Build(X509* x, X509* issuer, EVP_PKEY* subject_key, const std::string& cn,
                   const std::vector<std::string>& ous) {
  if (X509_set_version(x, 2) != 1) return Fail("version");
  if (absl::Status st = SetRandomSerial(x); !st.ok()) return st;
  X509_NAME* name = X509_get_subject_name(x);
  auto add = [&](const char* field, const std::string& v) {
    return X509_NAME_add_entry_by_txt(name, field, MBSTRING_UTF8, reinterpret_cast<const unsigned char*>(v.data()),
                                      static_cast<int>(v.size()), -1, 0) == 1;
  };
  if (!add("O", "herd")) return Fail("subject");
  for (const std::string& ou : ous) {
    if (!add("OU", ou)) return Fail("subject");
  }
  // CN is for people (at most 64 characters); the identity is in the URI.
  if (!add("CN", cn.substr(0, 64))) return Fail("subject");
  if (X509_set_issuer_name(x, issuer != nullptr ? X509_get_subject_name(issuer) : name) != 1) return Fail("issuer");
  if (X509_set_pubkey(x, subject_key) != 1) return Fail("public key");
  return absl::OkStatus();
}

}  // namespace

absl::string_view RoleName(Role r) {
  switch (r) {
    case Role::kUser:
      return "user";
    case Role::kMachine:
      return "machine";
    case Role::kMaster:
      return "master";
    case Role::kScheduler:
      return "scheduler";
  }
  return "?";
}

absl::StatusOr<Role> ParseRole(absl::string_view name) {
  if (name == "user") return Role::kUser;
  if (name == "machine") return Role::kMachine;
  if (name == "master") return Role::kMaster;
  if (name == "scheduler") return Role::kScheduler;
  return absl::InvalidArgumentError(absl::StrCat("unknown role '", name, "' (user, machine, master, scheduler)"));
}

std::string Describe(const Subject& s) {
  if (s.role == Role::kMaster) return "master";
  return absl::StrCat(RoleName(s.role), " ", s.name, s.admin ? " (admin)" : "");
}

std::string ServerName(const Subject& s) {
  ClearErrorsOnExit clear_errors;
  if (s.role == Role::kMachine) {
    unsigned char digest[SHA256_DIGEST_LENGTH];
    SHA256(reinterpret_cast<const unsigned char*>(s.name.data()), s.name.size(), digest);
    return absl::StrCat(absl::BytesToHexString(absl::string_view(reinterpret_cast<char*>(digest), 10)),
                        ".machine.herd");
  }
  if (s.role == Role::kMaster) return "master.herd";
  return absl::StrCat(RoleName(s.role), ".herd");
}

absl::StatusOr<KeyPair> GenerateKey() {
  ClearErrorsOnExit clear_errors;
  Owned<EVP_PKEY> key(EVP_EC_gen("P-256"));
  if (!key) return Fail("generating a key");
  KeyPair kp;
  Owned<BIO> priv(BIO_new(BIO_s_mem())), pub(BIO_new(BIO_s_mem()));
  if (PEM_write_bio_PrivateKey(priv.get(), key.get(), nullptr, nullptr, 0, nullptr, nullptr) != 1 ||
      PEM_write_bio_PUBKEY(pub.get(), key.get()) != 1) {
    return Fail("writing a key");
  }
  kp.private_pem = Drain(priv.get());
  kp.public_pem = Drain(pub.get());
  return kp;
}

absl::StatusOr<Authority> CreateAuthority(absl::string_view cell_name, int64_t now_s, int64_t valid_s) {
  ClearErrorsOnExit clear_errors;
  absl::StatusOr<KeyPair> kp = GenerateKey();
  if (!kp.ok()) return kp.status();
  absl::StatusOr<Owned<EVP_PKEY>> key = ReadPrivateKey(kp->private_pem);
  if (!key.ok()) return key.status();
  Owned<X509> x(X509_new());
  if (absl::Status st = Build(x.get(), nullptr, key->get(), absl::StrCat("herd cell ", cell_name, " CA"), {"ca"});
      !st.ok()) {
    return st;
  }
  if (absl::Status st = SetValidity(x.get(), now_s, valid_s); !st.ok()) return st;
  for (auto [nid, value] : {std::pair{NID_basic_constraints, "critical,CA:TRUE,pathlen:0"},
                            std::pair{NID_key_usage, "critical,keyCertSign,cRLSign"},
                            std::pair{NID_subject_key_identifier, "hash"}}) {
    if (absl::Status st = AddExtension(x.get(), x.get(), nid, value); !st.ok()) return st;
  }
  if (X509_sign(x.get(), key->get(), EVP_sha256()) == 0) return Fail("signing the CA");
  absl::StatusOr<std::string> pem = WriteCert(x.get());
  if (!pem.ok()) return pem.status();
  return Authority{*pem, kp->private_pem};
}

absl::StatusOr<std::string> Issue(const Authority& ca, absl::string_view public_pem, const Subject& who,
                                  int64_t now_s, int64_t valid_s, const std::string& extra_sans) {
  ClearErrorsOnExit clear_errors;
  absl::StatusOr<Owned<X509>> ca_cert = ReadCert(ca.cert_pem);
  if (!ca_cert.ok()) return absl::InvalidArgumentError("the CA certificate is " + ca_cert.status().ToString());
  absl::StatusOr<Owned<EVP_PKEY>> ca_key = ReadPrivateKey(ca.key_pem);
  if (!ca_key.ok()) return absl::InvalidArgumentError("the CA key is not a PEM private key");
  absl::StatusOr<Owned<EVP_PKEY>> pub = ReadPublicKey(public_pem);
  if (!pub.ok()) return pub.status();
  if (who.name.empty() && who.role != Role::kMaster) return absl::InvalidArgumentError("a certificate needs a name");
  Owned<X509> x(X509_new());
  std::vector<std::string> ous{std::string(RoleName(who.role))};
  if (who.admin) ous.push_back("admin");
  if (absl::Status st = Build(x.get(), ca_cert->get(), pub->get(), who.name.empty() ? "master" : who.name, ous);
      !st.ok()) {
    return st;
  }
  if (absl::Status st = SetValidity(x.get(), now_s, valid_s); !st.ok()) return st;
  std::string san = absl::StrCat("URI:", IdentityUri(who), ",DNS:", ServerName(who));
  if (!extra_sans.empty()) absl::StrAppend(&san, ",", extra_sans);
  for (auto [nid, value] : {std::pair{NID_basic_constraints, std::string("critical,CA:FALSE")},
                            std::pair{NID_key_usage, std::string("critical,digitalSignature,keyAgreement")},
                            std::pair{NID_ext_key_usage, std::string("serverAuth,clientAuth")},
                            std::pair{NID_authority_key_identifier, std::string("keyid")},
                            std::pair{NID_subject_alt_name, san}}) {
    if (absl::Status st = AddExtension(x.get(), ca_cert->get(), nid, value); !st.ok()) return st;
  }
  if (X509_sign(x.get(), ca_key->get(), EVP_sha256()) == 0) return Fail("signing a certificate");
  return WriteCert(x.get());
}

absl::StatusOr<CertInfo> Inspect(absl::string_view cert_pem) {
  ClearErrorsOnExit clear_errors;
  absl::StatusOr<Owned<X509>> x = ReadCert(cert_pem);
  if (!x.ok()) return x.status();
  CertInfo info;
  const ASN1_INTEGER* serial = X509_get0_serialNumber(x->get());
  Owned<BIGNUM> bn(ASN1_INTEGER_to_BN(serial, nullptr));
  if (!bn) return Fail("serial");
  char* hex = BN_bn2hex(bn.get());
  info.serial = absl::AsciiStrToLower(hex);
  OPENSSL_free(hex);
  info.not_before_s = ToUnix(X509_get0_notBefore(x->get()));
  info.not_after_s = ToUnix(X509_get0_notAfter(x->get()));
  info.is_ca = X509_check_ca(x->get()) != 0;
  if (info.is_ca) {
    info.subject.role = Role::kMaster;
    return info;
  }
  Owned<GENERAL_NAMES> names(
      static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(x->get(), NID_subject_alt_name, nullptr, nullptr)));
  bool found = false;
  for (int i = 0; names && i < sk_GENERAL_NAME_num(names.get()); ++i) {
    const GENERAL_NAME* g = sk_GENERAL_NAME_value(names.get(), i);
    if (g->type != GEN_URI) continue;
    const ASN1_IA5STRING* uri = g->d.uniformResourceIdentifier;
    absl::string_view text(reinterpret_cast<const char*>(ASN1_STRING_get0_data(uri)),
                           static_cast<size_t>(ASN1_STRING_length(uri)));
    absl::StatusOr<Subject> s = ParseIdentityUri(text);
    if (!s.ok()) continue;
    info.subject = *std::move(s);
    found = true;
    break;
  }
  if (!found) return absl::InvalidArgumentError("the certificate names no herd identity");
  return info;
}

absl::Status Verify(absl::string_view cert_pem, absl::string_view ca_cert_pem, int64_t now_s) {
  ClearErrorsOnExit clear_errors;
  absl::StatusOr<Owned<X509>> x = ReadCert(cert_pem);
  if (!x.ok()) return absl::UnauthenticatedError(x.status().message());
  absl::StatusOr<Owned<X509>> ca = ReadCert(ca_cert_pem);
  if (!ca.ok()) return absl::InvalidArgumentError("the CA certificate is not a PEM certificate");
  Owned<X509_STORE> store(X509_STORE_new());
  Owned<X509_STORE_CTX> ctx(X509_STORE_CTX_new());
  if (!store || !ctx || X509_STORE_add_cert(store.get(), ca->get()) != 1 ||
      X509_STORE_CTX_init(ctx.get(), store.get(), x->get(), nullptr) != 1) {
    return Fail("setting up verification");
  }
  X509_STORE_CTX_set_time(ctx.get(), 0, static_cast<time_t>(now_s));
  if (X509_verify_cert(ctx.get()) != 1) {
    int err = X509_STORE_CTX_get_error(ctx.get());
    ERR_clear_error();
    return absl::UnauthenticatedError(
        absl::StrCat("certificate not accepted: ", X509_verify_cert_error_string(err)));
  }
  return absl::OkStatus();
}

absl::StatusOr<Credential> IssueCredential(const Authority& ca, const Subject& who, int64_t now_s, int64_t valid_s,
                                           const std::string& extra_sans) {
  ClearErrorsOnExit clear_errors;
  absl::StatusOr<KeyPair> kp = GenerateKey();
  if (!kp.ok()) return kp.status();
  absl::StatusOr<std::string> cert = Issue(ca, kp->public_pem, who, now_s, valid_s, extra_sans);
  if (!cert.ok()) return cert.status();
  Credential c;
  c.cert_pem = *std::move(cert);
  c.key_pem = kp->private_pem;
  c.ca_pem = ca.cert_pem;
  absl::StatusOr<CertInfo> info = Inspect(c.cert_pem);
  if (!info.ok()) return info.status();
  c.info = *std::move(info);
  return c;
}

std::string FormatCredential(const Credential& c) {
  return absl::StrCat("# herd credential: ", Describe(c.info.subject), "\n", c.cert_pem, c.key_pem,
                      "# the cell's certificate authority\n", c.ca_pem);
}

absl::StatusOr<Credential> ParseCredential(absl::string_view text, absl::string_view where) {
  ClearErrorsOnExit clear_errors;
  // Blocks in order: BEGIN CERTIFICATE (own), BEGIN PRIVATE KEY, BEGIN
  // CERTIFICATE (CA). Anything outside a block is a comment.
  std::vector<std::string> certs;
  std::string key;
  size_t pos = 0;
  while (true) {
    size_t begin = text.find("-----BEGIN ", pos);
    if (begin == absl::string_view::npos) break;
    size_t label_end = text.find("-----", begin + 11);
    if (label_end == absl::string_view::npos) break;
    absl::string_view label = text.substr(begin + 11, label_end - begin - 11);
    std::string end_marker = absl::StrCat("-----END ", label, "-----");
    size_t end = text.find(end_marker, label_end);
    if (end == absl::string_view::npos) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": a '", label, "' block has no END line"));
    }
    std::string block = absl::StrCat(text.substr(begin, end + end_marker.size() - begin), "\n");
    if (label == "CERTIFICATE") {
      certs.push_back(std::move(block));
    } else if (absl::EndsWith(label, "PRIVATE KEY")) {
      key = std::move(block);
    }
    pos = end + end_marker.size();
  }
  if (certs.size() != 2 || key.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, ": not a herd credential (want a certificate, its private key and the cell's CA certificate; found ",
        certs.size(), " certificate(s) and ", key.empty() ? "no" : "a", " key)"));
  }
  Credential c{certs[0], key, certs[1], {}};
  absl::StatusOr<CertInfo> info = Inspect(c.cert_pem);
  if (!info.ok()) return absl::InvalidArgumentError(absl::StrCat(where, ": ", info.status().message()));
  c.info = *std::move(info);
  // The key must be the certificate's.
  absl::StatusOr<Owned<X509>> x = ReadCert(c.cert_pem);
  absl::StatusOr<Owned<EVP_PKEY>> k = ReadPrivateKey(c.key_pem);
  if (!x.ok() || !k.ok() || X509_check_private_key(x->get(), k->get()) != 1) {
    ERR_clear_error();
    return absl::InvalidArgumentError(absl::StrCat(where, ": the private key does not belong to the certificate"));
  }
  return c;
}

absl::StatusOr<Credential> LoadCredential(const std::string& path) {
  ClearErrorsOnExit clear_errors;
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read credential ", path, ": ", std::strerror(errno)));
  std::stringstream ss;
  ss << in.rdbuf();
  if (ss.str().size() > (1 << 20)) return absl::InvalidArgumentError(absl::StrCat(path, ": larger than 1 MiB"));
  return ParseCredential(ss.str(), path);
}

absl::Status SaveCredential(const std::string& path, const Credential& c) {
  std::filesystem::path p(path);
  if (p.has_parent_path()) {
    std::error_code ec;
    std::filesystem::create_directories(p.parent_path(), ec);
    if (ec) return absl::InternalError(absl::StrCat("cannot create ", p.parent_path().string(), ": ", ec.message()));
  }
  return WriteFileAtomic(path, FormatCredential(c));
}

absl::StatusOr<Authority> LoadAuthority(const std::string& dir) {
  ClearErrorsOnExit clear_errors;
  Authority ca;
  for (auto [file, out] : {std::pair{"ca.crt", &ca.cert_pem}, std::pair{"ca.key", &ca.key_pem}}) {
    std::string path = absl::StrCat(dir, "/", file);
    std::ifstream in(path);
    if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path, ": ", std::strerror(errno)));
    std::stringstream ss;
    ss << in.rdbuf();
    *out = ss.str();
  }
  if (!ReadCert(ca.cert_pem).ok()) return absl::InvalidArgumentError(absl::StrCat(dir, "/ca.crt: not a certificate"));
  if (!ReadPrivateKey(ca.key_pem).ok()) return absl::InvalidArgumentError(absl::StrCat(dir, "/ca.key: not a key"));
  return ca;
}

absl::Status SaveAuthority(const std::string& dir, const Authority& ca) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  ::chmod(dir.c_str(), 0700);
  if (absl::Status st = WriteFileAtomic(absl::StrCat(dir, "/ca.key"), ca.key_pem); !st.ok()) return st;
  return WriteFileAtomic(absl::StrCat(dir, "/ca.crt"), ca.cert_pem, {.mode = 0644});
}

absl::StatusOr<std::string> Sign(absl::string_view key_pem, absl::string_view data) {
  ClearErrorsOnExit clear_errors;
  absl::StatusOr<Owned<EVP_PKEY>> key = ReadPrivateKey(key_pem);
  if (!key.ok()) return key.status();
  Owned<EVP_MD_CTX> ctx(EVP_MD_CTX_new());
  size_t len = 0;
  if (!ctx || EVP_DigestSignInit(ctx.get(), nullptr, EVP_sha256(), nullptr, key->get()) != 1 ||
      EVP_DigestSign(ctx.get(), nullptr, &len, reinterpret_cast<const unsigned char*>(data.data()), data.size()) !=
          1) {
    return Fail("signing");
  }
  std::string sig(len, '\0');
  if (EVP_DigestSign(ctx.get(), reinterpret_cast<unsigned char*>(sig.data()), &len,
                     reinterpret_cast<const unsigned char*>(data.data()), data.size()) != 1) {
    return Fail("signing");
  }
  sig.resize(len);
  return sig;
}

absl::Status VerifySignature(absl::string_view cert_pem, absl::string_view data, absl::string_view signature) {
  ClearErrorsOnExit clear_errors;
  absl::StatusOr<Owned<X509>> x = ReadCert(cert_pem);
  if (!x.ok()) return absl::UnauthenticatedError("the signer's certificate is not a PEM certificate");
  EVP_PKEY* pub = X509_get0_pubkey(x->get());
  Owned<EVP_MD_CTX> ctx(EVP_MD_CTX_new());
  if (!ctx || pub == nullptr || EVP_DigestVerifyInit(ctx.get(), nullptr, EVP_sha256(), nullptr, pub) != 1) {
    return Fail("verifying");
  }
  int ok = EVP_DigestVerify(ctx.get(), reinterpret_cast<const unsigned char*>(signature.data()), signature.size(),
                            reinterpret_cast<const unsigned char*>(data.data()), data.size());
  ERR_clear_error();
  if (ok != 1) return absl::UnauthenticatedError("bad signature");
  return absl::OkStatus();
}

absl::StatusOr<std::string> PublicKeyHash(absl::string_view cert_pem) {
  ClearErrorsOnExit clear_errors;
  absl::StatusOr<Owned<X509>> x = ReadCert(cert_pem);
  if (!x.ok()) return x.status();
  unsigned char* der = nullptr;
  const int len = i2d_X509_PUBKEY(X509_get_X509_PUBKEY(x->get()), &der);
  if (len <= 0) return Fail("public key");
  std::string hex = Sha256Hex(absl::string_view(reinterpret_cast<const char*>(der), static_cast<size_t>(len)));
  OPENSSL_free(der);
  return absl::StrCat("sha256:", hex);
}

absl::StatusOr<std::string> RandomAlnum(int n) {
  static constexpr char kAlphabet[] = "abcdefghijklmnopqrstuvwxyz0123456789";
  std::string out;
  while (static_cast<int>(out.size()) < n) {
    unsigned char b[64];
    if (RAND_bytes(b, sizeof(b)) != 1) return absl::InternalError("no random bytes");
    for (unsigned char c : b) {
      if (c >= 252) continue;  // 252 = 7 * 36: no bias
      out.push_back(kAlphabet[c % 36]);
      if (static_cast<int>(out.size()) == n) break;
    }
  }
  return out;
}

std::string Sha256Hex(absl::string_view data) {
  unsigned char md[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(data.data()), data.size(), md);
  return absl::BytesToHexString(absl::string_view(reinterpret_cast<const char*>(md), sizeof(md)));
}

}  // namespace herd::pki
