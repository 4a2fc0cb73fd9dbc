#include "master/core/api/join.h"

#include <openssl/crypto.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/ids.h"
#include "base/status.h"
#include "pki/pki.h"

namespace herd::master {
namespace {

constexpr int64_t kHourS = 3600;
constexpr int64_t kMaxTtlS = 30 * 24 * kHourS;
constexpr int kMaxUses = 10'000;
// A token expired this long ago is forgotten when the next one is made.
constexpr int64_t kForgetAfterMs = 24 * kHourS * 1000;
constexpr int64_t kMachineCredentialS = 365 * 24 * kHourS;

bool Live(const v1::JoinToken& t, int64_t now_ms) {
  return !t.revoked() && now_ms < t.expires_ms() && (t.max_uses() == 0 || t.machines_size() < t.max_uses());
}

// Why a token whose secret matched does not work, or OK.
absl::Status Usable(const v1::JoinToken& t, int64_t now_ms) {
  if (t.revoked()) return absl::UnauthenticatedError(absl::StrCat("join token ", t.id(), " was revoked"));
  if (now_ms >= t.expires_ms()) return absl::UnauthenticatedError(absl::StrCat("join token ", t.id(), " has expired"));
  if (t.max_uses() > 0 && t.machines_size() >= t.max_uses()) {
    return absl::UnauthenticatedError(
        absl::StrCat("join token ", t.id(), " is used up (", t.max_uses(), " machine(s) joined with it)"));
  }
  return absl::OkStatus();
}

bool SameHash(const std::string& a, const std::string& b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace

absl::StatusOr<v1::CreateJoinTokenResponse> JoinApi::CreateJoinToken(const Principal& who,
                                                                     const v1::CreateJoinTokenRequest& req) {
  HERD_RETURN_IF_ERROR(ctx_.Authorize(who, Action::kManageUsers, Resource{}));
  const std::optional<pki::Authority>& ca = ctx_.options->authority;
  if (!ca.has_value()) {
    return absl::FailedPreconditionError(
        "this master holds no CA key (herd master --ca DIR): it cannot sign the credentials joining machines need");
  }
  const int64_t ttl_s = req.ttl_seconds() == 0 ? kHourS : req.ttl_seconds();
  if (ttl_s < 60 || ttl_s > kMaxTtlS) return absl::InvalidArgumentError("ttl: must be between 1m and 30 days");
  if (req.max_uses() < 0 || req.max_uses() > kMaxUses) {
    return absl::InvalidArgumentError(absl::StrCat("uses: must be between 0 (any) and ", kMaxUses));
  }
  if (req.description().size() > 256) return absl::InvalidArgumentError("description: longer than 256 bytes");
  HERD_ASSIGN_OR_RETURN(std::string secret, pki::RandomAlnum(16));
  HERD_ASSIGN_OR_RETURN(std::string ca_hash, pki::PublicKeyHash(ca->cert_pem));
  const int64_t now_ms = ctx_.clock->NowMs();
  v1::JoinToken token;
  auto build = [&](const cell::CellState& s) -> absl::StatusOr<std::vector<v1::Mutation>> {
    std::vector<v1::Mutation> out;
    int live = 0;
    for (const auto& [id, t] : s.join_tokens()) {
      if (Live(t, now_ms)) {
        ++live;
      } else if (t.revoked() || now_ms - t.expires_ms() > kForgetAfterMs) {
        v1::Mutation gone;
        gone.mutable_join_token_set()->mutable_token()->set_id(id);
        gone.mutable_join_token_set()->set_remove(true);
        out.push_back(std::move(gone));
      }
    }
    if (live >= kMaxLiveTokens) {
      return absl::ResourceExhaustedError(
          absl::StrCat("the cell has ", live, " live join tokens, the most it keeps; revoke some (herd token revoke)"));
    }
    token = v1::JoinToken();
    do {
      HERD_ASSIGN_OR_RETURN(std::string id, pki::RandomAlnum(6));
      token.set_id(id);
    } while (s.FindJoinToken(token.id()) != nullptr);
    token.set_secret_sha256(pki::Sha256Hex(secret));
    token.set_created_by(who.acting_user.empty() ? who.name : who.acting_user);
    token.set_created_ms(now_ms);
    token.set_expires_ms(now_ms + ttl_s * 1000);
    token.set_max_uses(req.max_uses());
    token.set_description(req.description());
    v1::Mutation m;
    *m.mutable_join_token_set()->mutable_token() = token;
    out.push_back(std::move(m));
    return out;
  };
  HERD_RETURN_IF_ERROR(ctx_.committer->Commit(who.name, build).status());
  v1::CreateJoinTokenResponse resp;
  resp.set_token(absl::StrCat(token.id(), ".", secret));
  *resp.mutable_info() = token;
  resp.mutable_info()->clear_secret_sha256();
  resp.set_ca_hash(std::move(ca_hash));
  return resp;
}

absl::StatusOr<v1::ListJoinTokensResponse> JoinApi::ListJoinTokens(const Principal& who,
                                                                   const v1::ListJoinTokensRequest&) {
  HERD_RETURN_IF_ERROR(ctx_.Authorize(who, Action::kManageUsers, Resource{}));
  v1::ListJoinTokensResponse resp;
  ctx_.committer->Read([&](const cell::CellState& s) {
    for (const auto& [id, t] : s.join_tokens()) {
      v1::JoinToken* out = resp.add_tokens();
      *out = t;
      out->clear_secret_sha256();
    }
  });
  if (const std::optional<pki::Authority>& ca = ctx_.options->authority; ca.has_value()) {
    if (absl::StatusOr<std::string> h = pki::PublicKeyHash(ca->cert_pem); h.ok()) resp.set_ca_hash(*h);
  }
  return resp;
}

absl::StatusOr<v1::RevokeJoinTokenResponse> JoinApi::RevokeJoinToken(const Principal& who,
                                                                     const v1::RevokeJoinTokenRequest& req) {
  HERD_RETURN_IF_ERROR(ctx_.Authorize(who, Action::kManageUsers, Resource{}));
  const std::string id = req.id().substr(0, req.id().find('.'));  // "ID.SECRET" works too
  if (id.size() != 6) return absl::InvalidArgumentError(absl::StrCat("'", Quote(id), "' is not a join token id"));
  v1::JoinToken token;
  auto build = [&](const cell::CellState& s) -> absl::StatusOr<std::vector<v1::Mutation>> {
    const v1::JoinToken* t = s.FindJoinToken(id);
    if (t == nullptr) return absl::NotFoundError(absl::StrCat("no join token ", Quote(id)));
    token = *t;
    token.set_revoked(true);
    v1::Mutation m;
    *m.mutable_join_token_set()->mutable_token() = token;
    return std::vector<v1::Mutation>{m};
  };
  HERD_RETURN_IF_ERROR(ctx_.committer->Commit(who.name, build).status());
  v1::RevokeJoinTokenResponse resp;
  *resp.mutable_token() = token;
  resp.mutable_token()->clear_secret_sha256();
  return resp;
}

absl::StatusOr<v1::GetJoinInfoResponse> JoinApi::GetJoinInfo() {
  v1::GetJoinInfoResponse resp;
  resp.set_cell(ctx_.options->cell_name);
  if (ctx_.options->authority.has_value()) {
    resp.set_ca_pem(ctx_.options->authority->cert_pem);
  } else if (ctx_.options->credential.has_value()) {
    resp.set_ca_pem(ctx_.options->credential->ca_pem);
  }
  return resp;
}

absl::StatusOr<v1::JoinResponse> JoinApi::Join(const v1::JoinRequest& req, const std::string& peer) {
  const std::vector<std::string> parts = absl::StrSplit(req.token(), absl::MaxSplits('.', 1));
  const std::string id = parts.empty() ? "" : parts[0];
  auto audited = [&](absl::Status st) {
    ctx_.options->authorizer->Joined(peer, id, req.machine(), st);
    return st;
  };
  if (parts.size() != 2 || id.size() != 6 || parts[1].size() != 16) {
    return audited(absl::InvalidArgumentError("token: not a join token (ID.SECRET, as herd token create prints)"));
  }
  if (absl::Status st = ValidateMachineName(req.machine()); !st.ok()) {
    return audited(absl::InvalidArgumentError(absl::StrCat("machine: ", st.message())));
  }
  if (req.public_key_pem().empty() || req.public_key_pem().size() > 4096) {
    return audited(absl::InvalidArgumentError("public_key_pem: missing or longer than 4096 bytes"));
  }
  const std::optional<pki::Authority>& ca = ctx_.options->authority;
  if (!ca.has_value()) {
    return audited(absl::FailedPreconditionError("this master holds no CA key (herd master --ca DIR)"));
  }
  const std::string hash = pki::Sha256Hex(parts[1]);
  const int64_t now_ms = ctx_.clock->NowMs();
  // Checked (the key signs) before the token is spent.
  absl::StatusOr<std::string> cert = pki::Issue(
      *ca, req.public_key_pem(), pki::Subject{pki::Role::kMachine, req.machine()}, now_ms / 1000, kMachineCredentialS);
  if (!cert.ok()) return audited(absl::InvalidArgumentError(absl::StrCat("public_key_pem: ", cert.status().message())));
  auto build = [&](const cell::CellState& s) -> absl::StatusOr<std::vector<v1::Mutation>> {
    const v1::JoinToken* t = s.FindJoinToken(id);
    if (t == nullptr || !SameHash(t->secret_sha256(), hash)) {
      return absl::UnauthenticatedError("unknown join token, or a wrong secret");
    }
    HERD_RETURN_IF_ERROR(Usable(*t, now_ms));
    if (s.FindMachine(req.machine()) != nullptr) {
      return absl::AlreadyExistsError(absl::StrCat("machine ", req.machine(),
                                                   " is already in the cell: a join token makes credentials for new "
                                                   "machines only (an admin issues one for it: herd ca issue)"));
    }
    for (const auto& [other_id, other] : s.join_tokens()) {
      if (std::find(other.machines().begin(), other.machines().end(), req.machine()) != other.machines().end()) {
        return absl::AlreadyExistsError(absl::StrCat("machine ", req.machine(), " already joined (with token ",
                                                     other_id, "): a name gets one credential this way"));
      }
    }
    v1::JoinToken used = *t;
    used.add_machines(req.machine());
    v1::Mutation m;
    *m.mutable_join_token_set()->mutable_token() = std::move(used);
    return std::vector<v1::Mutation>{m};
  };
  absl::Status committed = ctx_.committer->Commit(absl::StrCat("join:", id), build).status();
  audited(committed);
  if (!committed.ok()) return committed;
  v1::JoinResponse resp;
  resp.set_cert_pem(std::move(*cert));
  resp.set_ca_pem(ca->cert_pem);
  return resp;
}

}  // namespace herd::master
