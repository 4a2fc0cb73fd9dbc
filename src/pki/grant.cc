#include "pki/grant.h"

#include "absl/strings/str_cat.h"

namespace herd::pki {

namespace {
absl::string_view Verb(v1::AccessAction a) { return a == v1::EXEC ? "exec into" : "read the logs of"; }
}  // namespace

absl::StatusOr<v1::AccessGrant> SignGrant(const Credential& master, absl::string_view user, absl::string_view machine,
                                          absl::string_view run_id, v1::AccessAction action,
                                          int64_t expires_unix_ms) {
  v1::AccessGrant::Body body;
  body.set_user(std::string(user));
  body.set_machine(std::string(machine));
  body.set_run_id(std::string(run_id));
  body.set_action(action);
  body.set_expires_unix_ms(expires_unix_ms);
  v1::AccessGrant g;
  g.set_body(body.SerializeAsString());
  absl::StatusOr<std::string> sig = Sign(master.key_pem, g.body());
  if (!sig.ok()) return sig.status();
  g.set_signature(std::move(*sig));
  g.set_signer_cert(master.cert_pem);
  return g;
}

absl::Status CheckGrant(const v1::AccessGrant& grant, absl::string_view ca_pem, absl::string_view user,
                        absl::string_view machine, absl::string_view run_id, v1::AccessAction action,
                        int64_t now_unix_ms) {
  auto refuse = [&](absl::string_view why) {
    return absl::PermissionDeniedError(absl::StrCat("user ", user, " may not ", Verb(action), " run ", run_id,
                                                    " on machine ", machine, ": ", why));
  };
  if (grant.body().empty()) return refuse("no grant from the master (ask the master: herd exec / herd logs)");
  if (absl::Status st = Verify(grant.signer_cert(), ca_pem, now_unix_ms / 1000); !st.ok()) {
    return refuse(absl::StrCat("the grant's signer: ", st.message()));
  }
  absl::StatusOr<CertInfo> signer = Inspect(grant.signer_cert());
  if (!signer.ok() || signer->subject.role != Role::kMaster) return refuse("the grant is not signed by a master");
  if (absl::Status st = VerifySignature(grant.signer_cert(), grant.body(), grant.signature()); !st.ok()) {
    return refuse("the grant's signature does not match");
  }
  v1::AccessGrant::Body body;
  if (!body.ParseFromString(grant.body())) return refuse("the grant is malformed");
  if (body.user() != user) return refuse(absl::StrCat("the grant is for user ", body.user()));
  if (body.machine() != machine) return refuse(absl::StrCat("the grant is for machine ", body.machine()));
  if (body.run_id() != run_id) return refuse(absl::StrCat("the grant is for run ", body.run_id()));
  if (body.action() != action) return refuse("the grant is for another action");
  if (body.expires_unix_ms() < now_unix_ms) return refuse("the grant has expired");
  return absl::OkStatus();
}

int64_t GrantIssuedMs(const v1::AccessGrant& grant) {
  v1::AccessGrant::Body body;
  if (!body.ParseFromString(grant.body())) return 0;
  return body.expires_unix_ms() - kGrantValidMs;
}

}  // namespace herd::pki
