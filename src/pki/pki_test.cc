#include "pki/pki.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"

namespace herd::pki {
namespace {

constexpr int64_t kNow = 1'800'000'000;  // 2027
constexpr int64_t kYear = 365LL * 24 * 3600;

class PkiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto ca = CreateAuthority("test", kNow, 10 * kYear);
    ASSERT_TRUE(ca.ok()) << ca.status();
    ca_ = *ca;
  }
  Authority ca_;
};

TEST_F(PkiTest, IssuedCertificateSaysWhoAndVerifiesAgainstItsCa) {
  auto c = IssueCredential(ca_, {Role::kUser, "alice", true}, kNow, kYear);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->info.subject, (Subject{Role::kUser, "alice", true}));
  EXPECT_FALSE(c->info.is_ca);
  EXPECT_FALSE(c->info.serial.empty());
  EXPECT_LE(c->info.not_before_s, kNow);
  EXPECT_EQ(c->info.not_after_s, kNow + kYear);
  EXPECT_TRUE(Verify(c->cert_pem, ca_.cert_pem, kNow).ok());
  // Expired, and not yet valid.
  EXPECT_EQ(Verify(c->cert_pem, ca_.cert_pem, kNow + 2 * kYear).code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(Verify(c->cert_pem, ca_.cert_pem, kNow - 3600).code(), absl::StatusCode::kUnauthenticated);
}

TEST_F(PkiTest, AnotherCellsCertificateIsRefused) {
  auto other = CreateAuthority("other", kNow, kYear);
  ASSERT_TRUE(other.ok());
  auto c = IssueCredential(*other, {Role::kMachine, "m1", false}, kNow, kYear);
  ASSERT_TRUE(c.ok());
  absl::Status st = Verify(c->cert_pem, ca_.cert_pem, kNow);
  EXPECT_EQ(st.code(), absl::StatusCode::kUnauthenticated);
  EXPECT_TRUE(absl::StrContains(st.message(), "certificate not accepted")) << st;
}

TEST_F(PkiTest, SerialsDiffer) {
  auto a = IssueCredential(ca_, {Role::kUser, "bob", false}, kNow, kYear);
  auto b = IssueCredential(ca_, {Role::kUser, "bob", false}, kNow, kYear);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(a->info.serial, b->info.serial);
}

TEST_F(PkiTest, LongAndOddMachineNamesKeepTheirIdentity) {
  std::string name = absl::StrCat(std::string(200, 'x'), ":7071_A.b-c");
  auto c = IssueCredential(ca_, {Role::kMachine, name, false}, kNow, kYear);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->info.subject.name, name);
  EXPECT_EQ(c->info.subject.role, Role::kMachine);
  // The server name is DNS-safe and differs by machine.
  std::string dns = ServerName(c->info.subject);
  EXPECT_TRUE(absl::EndsWith(dns, ".machine.herd")) << dns;
  EXPECT_NE(dns, ServerName({Role::kMachine, "m2", false}));
  EXPECT_EQ(ServerName({Role::kMaster, "", false}), "master.herd");
}

TEST_F(PkiTest, CredentialRoundTripsThroughAFileWithMode0600) {
  auto c = IssueCredential(ca_, {Role::kUser, "carol", false}, kNow, kYear);
  ASSERT_TRUE(c.ok());
  std::string dir = ::testing::TempDir() + "/pki_test_" + std::to_string(getpid());
  std::string path = dir + "/sub/carol.pem";
  ASSERT_TRUE(SaveCredential(path, *c).ok());
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  auto back = LoadCredential(path);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->info.subject, c->info.subject);
  EXPECT_EQ(back->cert_pem, c->cert_pem);
  EXPECT_EQ(back->ca_pem, ca_.cert_pem);
  std::filesystem::remove_all(dir);
}

TEST_F(PkiTest, BadCredentialFilesSayWhatIsWrong) {
  auto c = IssueCredential(ca_, {Role::kUser, "dave", false}, kNow, kYear);
  auto other = IssueCredential(ca_, {Role::kUser, "erin", false}, kNow, kYear);
  ASSERT_TRUE(c.ok() && other.ok());
  auto missing_ca = ParseCredential(c->cert_pem + c->key_pem, "f.pem");
  EXPECT_TRUE(absl::StrContains(missing_ca.status().message(), "f.pem: not a herd credential")) << missing_ca.status();
  auto wrong_key = ParseCredential(c->cert_pem + other->key_pem + c->ca_pem, "g.pem");
  EXPECT_TRUE(absl::StrContains(wrong_key.status().message(), "g.pem: the private key does not belong"))
      << wrong_key.status();
  std::string cut = FormatCredential(*c);
  cut = cut.substr(0, cut.rfind("-----END"));
  auto truncated = ParseCredential(cut, "h.pem");
  EXPECT_TRUE(absl::StrContains(truncated.status().message(), "has no END line")) << truncated.status();
  EXPECT_EQ(LoadCredential("/nonexistent/x.pem").status().code(), absl::StatusCode::kNotFound);
}

TEST_F(PkiTest, SignaturesVerifyOnlyForTheSignedDataAndTheSignersCertificate) {
  auto master = IssueCredential(ca_, {Role::kMaster, "", false}, kNow, kYear);
  auto mallory = IssueCredential(ca_, {Role::kUser, "mallory", false}, kNow, kYear);
  ASSERT_TRUE(master.ok() && mallory.ok());
  auto sig = Sign(master->key_pem, "exec alice/web/0 until 123");
  ASSERT_TRUE(sig.ok()) << sig.status();
  EXPECT_TRUE(VerifySignature(master->cert_pem, "exec alice/web/0 until 123", *sig).ok());
  EXPECT_FALSE(VerifySignature(master->cert_pem, "exec alice/web/1 until 123", *sig).ok());
  EXPECT_FALSE(VerifySignature(mallory->cert_pem, "exec alice/web/0 until 123", *sig).ok());
  auto forged = Sign(mallory->key_pem, "exec alice/web/0 until 123");
  ASSERT_TRUE(forged.ok());
  EXPECT_FALSE(VerifySignature(master->cert_pem, "exec alice/web/0 until 123", *forged).ok());
}

TEST_F(PkiTest, AuthorityRoundTripsWithItsKeyPrivate) {
  std::string dir = ::testing::TempDir() + "/pki_ca_" + std::to_string(getpid());
  ASSERT_TRUE(SaveAuthority(dir, ca_).ok());
  struct stat st {};
  ASSERT_EQ(::stat((dir + "/ca.key").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  auto back = LoadAuthority(dir);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->cert_pem, ca_.cert_pem);
  auto info = Inspect(back->cert_pem);
  ASSERT_TRUE(info.ok());
  EXPECT_TRUE(info->is_ca);
  std::filesystem::remove_all(dir);
}

// The CA hash a joining machine pins: what kubeadm and openssl compute
// (SHA-256 of the DER SubjectPublicKeyInfo), checked with openssl(1).
TEST_F(PkiTest, PublicKeyHashIsTheSpkiDigestOpensslComputes) {
  absl::StatusOr<std::string> mine = PublicKeyHash(ca_.cert_pem);
  ASSERT_TRUE(mine.ok()) << mine.status();
  const std::string dir = ::testing::TempDir() + "/spki";
  std::filesystem::create_directories(dir);
  { std::ofstream(dir + "/ca.crt") << ca_.cert_pem; }
  const std::string cmd = "openssl x509 -in " + dir + "/ca.crt -pubkey -noout | openssl pkey -pubin -outform der | "
                          "openssl dgst -sha256 -r > " + dir + "/out";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::ifstream in(dir + "/out");
  std::string hex;
  in >> hex;
  EXPECT_EQ(*mine, "sha256:" + hex);
  // Another CA: another hash.
  auto other = CreateAuthority("other", kNow, kYear);
  ASSERT_TRUE(other.ok());
  EXPECT_NE(*PublicKeyHash(other->cert_pem), *mine);
}

TEST(PkiRandom, RandomAlnumIsOfTheAlphabetAndDiffers) {
  std::string a = *RandomAlnum(16), b = *RandomAlnum(16);
  EXPECT_EQ(a.size(), 16u);
  EXPECT_NE(a, b);
  for (char c : a + b) EXPECT_TRUE((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')) << c;
}

TEST(PkiRoles, ParseAndNameAgree) {
  for (Role r : {Role::kUser, Role::kMachine, Role::kMaster, Role::kScheduler}) {
    auto back = ParseRole(RoleName(r));
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(*back, r);
  }
  EXPECT_FALSE(ParseRole("root").ok());
  EXPECT_EQ(Describe({Role::kUser, "alice", true}), "user alice (admin)");
}

}  // namespace
}  // namespace herd::pki
