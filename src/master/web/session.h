// Browser sessions for the master's web UI.
//
// A browser cannot present the CLI's client certificate, so a user who has
// one asks the master for a login link (`herd ui`, the CreateWebLogin RPC):
// a short-lived, single-use token naming the certificate that asked. Opening
// the link trades it for a session cookie (HttpOnly, Secure, SameSite=Strict)
// carrying the same identity. Both are signed with a key this master made at
// start (HMAC-SHA256) and never wrote anywhere: a restarted or different
// master does not accept them, and the user opens a new link. Every request
// rebuilds the certificate's identity from the token and goes through
// Identify and the Authorizer like a gRPC call, so revoking a user's
// credentials ends their sessions too.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "pki/pki.h"

namespace herd::master::web {

struct SessionClaims {
  enum class Kind { kLogin, kSession };
  Kind kind = Kind::kSession;
  pki::CertInfo cert;      // the credential that asked for the login (subject, serial, validity)
  std::string acting_as;   // --user of the CLI that asked ("" = itself)
  int64_t expires_ms = 0;  // Unix ms
  std::string nonce;       // random, hex
};

class WebSessions {
 public:
  static constexpr int64_t kLoginValidMs = 10 * 60 * 1000;       // a link: 10 minutes
  static constexpr int64_t kSessionValidMs = 12 * 3600 * 1000;  // a cookie: 12 hours
  static constexpr size_t kMaxTokenBytes = 2048;
  static constexpr size_t kMaxRedeemed = 100'000;        // used links remembered (until they expire)
  static constexpr size_t kMaxRedeemedPerUser = 100;     // of one user's, within a link's life
  static constexpr size_t kMaxLoggedOut = 100'000;       // sessions ended early (until they expire)
  static constexpr char kCookieName[] = "herd_session";

  WebSessions();  // a fresh random key

  // A login token for `cert` (never past the certificate's own expiry).
  std::string MintLogin(const pki::CertInfo& cert, const std::string& acting_as, int64_t now_ms);
  // The claims of a login token that is valid now (used or not): for the
  // page that asks the browser to confirm the login.
  absl::StatusOr<SessionClaims> CheckLogin(const std::string& login_token, int64_t now_ms) const;
  // Trades a login token for a session token, once: UNAUTHENTICATED if it is
  // forged, expired, not a login token or already used.
  absl::StatusOr<std::string> Redeem(const std::string& login_token, int64_t now_ms);
  // The claims of a session token; UNAUTHENTICATED if it is forged, expired,
  // logged out or not a session token.
  absl::StatusOr<SessionClaims> Check(const std::string& session_token, int64_t now_ms) const;
  // Ends a session before its time (logout); false if it was not valid.
  bool LogOut(const std::string& session_token, int64_t now_ms);

  // The session token in a Cookie header ("" if none).
  static std::string FromCookie(const std::string& cookie_header);

 private:
  std::string Sign(const SessionClaims& c) const;
  absl::StatusOr<SessionClaims> Parse(const std::string& token, int64_t now_ms) const;

  std::string key_;
  mutable absl::Mutex mu_;
  struct Used {
    int64_t expires_ms;
    std::string user;
  };
  std::map<std::string, Used> redeemed_ ABSL_GUARDED_BY(mu_);         // login nonce -> when it expires, whose
  std::map<std::string, size_t> redeemed_by_user_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, int64_t> logged_out_ ABSL_GUARDED_BY(mu_);  // session nonce -> its expiry
};

}  // namespace herd::master::web
