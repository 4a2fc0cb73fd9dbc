#include "master/web/session.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <algorithm>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "base/check.h"

namespace herd::master::web {
namespace {

std::string RandomBytes(size_t n) {
  std::string out(n, '\0');
  HERD_CHECK(RAND_bytes(reinterpret_cast<unsigned char*>(out.data()), static_cast<int>(n)) == 1);
  return out;
}

std::string Hmac(const std::string& key, const std::string& data) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HERD_CHECK(HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
                  reinterpret_cast<const unsigned char*>(data.data()), data.size(), out, &len) != nullptr);
  return std::string(reinterpret_cast<char*>(out), len);
}

absl::Status Bad(absl::string_view why) {
  return absl::UnauthenticatedError(absl::StrCat("web session: ", why, "; open a new link with 'herd ui'"));
}

}  // namespace

WebSessions::WebSessions() : key_(RandomBytes(32)) {}

// payload = v1|kind|role|name|admin|serial|not_before|not_after|acting_as|expires_ms|nonce
std::string WebSessions::Sign(const SessionClaims& c) const {
  const std::string payload = absl::StrCat(
      "v1|", c.kind == SessionClaims::Kind::kLogin ? "login" : "session", "|", static_cast<int>(c.cert.subject.role),
      "|", c.cert.subject.name, "|", c.cert.subject.admin ? 1 : 0, "|", c.cert.serial, "|", c.cert.not_before_s, "|",
      c.cert.not_after_s, "|", c.acting_as, "|", c.expires_ms, "|", c.nonce);
  return absl::StrCat(absl::WebSafeBase64Escape(payload), ".", absl::WebSafeBase64Escape(Hmac(key_, payload)));
}

absl::StatusOr<SessionClaims> WebSessions::Parse(const std::string& token, int64_t now_ms) const {
  if (token.empty()) return Bad("no session");
  if (token.size() > kMaxTokenBytes) return Bad("token too long");
  const size_t dot = token.find('.');
  if (dot == std::string::npos) return Bad("malformed token");
  std::string payload, mac;
  if (!absl::WebSafeBase64Unescape(token.substr(0, dot), &payload) ||
      !absl::WebSafeBase64Unescape(token.substr(dot + 1), &mac)) {
    return Bad("malformed token");
  }
  const std::string want = Hmac(key_, payload);
  if (mac.size() != want.size() || CRYPTO_memcmp(mac.data(), want.data(), want.size()) != 0) {
    return Bad("the token was not made by this master (it restarted, or another master made it)");
  }
  std::vector<std::string> f = absl::StrSplit(payload, '|');
  SessionClaims c;
  int role = 0, admin = 0;
  if (f.size() != 11 || f[0] != "v1" || (f[1] != "login" && f[1] != "session") || !absl::SimpleAtoi(f[2], &role) ||
      !absl::SimpleAtoi(f[4], &admin) || !absl::SimpleAtoi(f[6], &c.cert.not_before_s) ||
      !absl::SimpleAtoi(f[7], &c.cert.not_after_s) || !absl::SimpleAtoi(f[9], &c.expires_ms)) {
    return Bad("malformed token");
  }
  c.kind = f[1] == "login" ? SessionClaims::Kind::kLogin : SessionClaims::Kind::kSession;
  c.cert.subject.role = static_cast<pki::Role>(role);
  c.cert.subject.name = f[3];
  c.cert.subject.admin = admin != 0;
  c.cert.serial = f[5];
  c.acting_as = f[8];
  c.nonce = f[10];
  if (now_ms >= c.expires_ms) return Bad(c.kind == SessionClaims::Kind::kLogin ? "the link expired" : "the session expired");
  if (now_ms / 1000 >= c.cert.not_after_s) return Bad("the credential it was made for expired");
  return c;
}

std::string WebSessions::MintLogin(const pki::CertInfo& cert, const std::string& acting_as, int64_t now_ms) {
  SessionClaims c;
  c.kind = SessionClaims::Kind::kLogin;
  c.cert = cert;
  c.acting_as = acting_as;
  c.expires_ms = std::min(now_ms + kLoginValidMs, cert.not_after_s * 1000);
  c.nonce = absl::BytesToHexString(RandomBytes(16));
  return Sign(c);
}

absl::StatusOr<SessionClaims> WebSessions::CheckLogin(const std::string& login_token, int64_t now_ms) const {
  absl::StatusOr<SessionClaims> c = Parse(login_token, now_ms);
  if (!c.ok()) return c.status();
  if (c->kind != SessionClaims::Kind::kLogin) return Bad("not a login link");
  return c;
}

absl::StatusOr<std::string> WebSessions::Redeem(const std::string& login_token, int64_t now_ms) {
  absl::StatusOr<SessionClaims> c = Parse(login_token, now_ms);
  if (!c.ok()) return c.status();
  if (c->kind != SessionClaims::Kind::kLogin) return Bad("not a login link");
  {
    absl::MutexLock lock(&mu_);
    for (auto it = redeemed_.begin(); it != redeemed_.end();) {
      if (it->second.expires_ms > now_ms) {
        ++it;
        continue;
      }
      if (--redeemed_by_user_[it->second.user] == 0) redeemed_by_user_.erase(it->second.user);
      it = redeemed_.erase(it);
    }
    if (redeemed_.contains(c->nonce)) return Bad("the link was used already");
    // One user's logins cannot crowd out everyone's.
    const std::string& user = c->cert.subject.name;
    if (redeemed_by_user_[user] >= kMaxRedeemedPerUser) {
      return Bad(absl::StrCat(user, " logged in ", kMaxRedeemedPerUser, " times within 10 minutes; wait a few minutes"));
    }
    if (redeemed_.size() >= kMaxRedeemed) return Bad("too many logins at once; try again in a few minutes");
    redeemed_.emplace(c->nonce, Used{c->expires_ms, user});
    ++redeemed_by_user_[user];
  }
  SessionClaims s = *c;
  s.kind = SessionClaims::Kind::kSession;
  s.expires_ms = std::min(now_ms + kSessionValidMs, c->cert.not_after_s * 1000);
  s.nonce = absl::BytesToHexString(RandomBytes(16));
  return Sign(s);
}

absl::StatusOr<SessionClaims> WebSessions::Check(const std::string& session_token, int64_t now_ms) const {
  absl::StatusOr<SessionClaims> c = Parse(session_token, now_ms);
  if (!c.ok()) return c.status();
  if (c->kind != SessionClaims::Kind::kSession) return Bad("a login link is not a session");
  absl::MutexLock lock(&mu_);
  if (logged_out_.contains(c->nonce)) return Bad("you logged out");
  return c;
}

bool WebSessions::LogOut(const std::string& session_token, int64_t now_ms) {
  absl::StatusOr<SessionClaims> c = Check(session_token, now_ms);
  if (!c.ok()) return false;
  absl::MutexLock lock(&mu_);
  std::erase_if(logged_out_, [&](const auto& kv) { return kv.second <= now_ms; });
  // Full (only by sessions made and ended within 12 hours): the oldest
  // record goes first; the cookie is cleared either way.
  while (logged_out_.size() >= kMaxLoggedOut) {
    logged_out_.erase(std::min_element(logged_out_.begin(), logged_out_.end(),
                                       [](const auto& a, const auto& b) { return a.second < b.second; }));
  }
  logged_out_.emplace(c->nonce, c->expires_ms);
  return true;
}

std::string WebSessions::FromCookie(const std::string& cookie_header) {
  for (absl::string_view part : absl::StrSplit(cookie_header, ';')) {
    part = absl::StripLeadingAsciiWhitespace(part);
    if (absl::ConsumePrefix(&part, kCookieName) && absl::ConsumePrefix(&part, "=")) {
      return std::string(absl::StripTrailingAsciiWhitespace(part));
    }
  }
  return "";
}

}  // namespace herd::master::web
