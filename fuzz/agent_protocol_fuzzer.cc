// Fuzz target: what an agent reads from others. Anyone who can reach an
// agent's port (with any certificate of the cell) can present an access
// grant; the master names runs whose ids become directory names; a crash
// leaves a run's state file half written. The first byte picks which:
//
//  - grants: the input is an AccessGrant (decoded as it is, or a genuine
//    grant with its body, signature or signer swapped for input bytes, or a
//    body signed by a machine's key or another cell's master), checked for a
//    user, machine, run, action and time the input also picks. Property: a
//    grant is accepted only if this cell's master signed exactly that body
//    and the body names what is asked for, unexpired. No forgery.
//  - run ids: ValidateRunId accepts only names that are safe as one
//    directory entry (no '/', not '.' or '..', no NUL, not empty).
//  - run state files: DecodeRunState never crashes, and what it accepts
//    encodes and decodes to the same thing.
#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "agent/supervisor/run_dir.h"
#include "fuzz_util.h"
#include "herd/v1/objects.pb.h"
#include "pki/grant.h"
#include "pki/pki.h"

namespace {

using herd::fuzz::Bytes;
namespace v1 = herd::v1;
namespace pki = herd::pki;

constexpr int64_t kNowS = 1'800'000'000;
constexpr int64_t kExpiresMs = (kNowS + 60) * 1000;

struct Cell {
  pki::Authority ca;
  pki::Credential master;
  pki::Credential machine;  // signs grants it has no right to sign
  pki::Credential foreign;  // another cell's master
  std::map<std::string, v1::AccessGrant> genuine;  // serialized body -> the grant
  v1::AccessGrant forged_by_machine;
  v1::AccessGrant forged_by_foreign;
};

template <typename T>
T Must(absl::StatusOr<T> v) {
  if (!v.ok()) herd::fuzz::Broken(__FILE__, __LINE__, "setup", v.status().ToString());
  return *std::move(v);
}

const Cell& TheCell() {
  static const Cell cell = [] {
    Cell c;
    c.ca = Must(pki::CreateAuthority("fuzz", kNowS - 3600, 86400));
    c.master = Must(pki::IssueCredential(c.ca, {pki::Role::kMaster, "master", false}, kNowS - 3600, 86400));
    c.machine = Must(pki::IssueCredential(c.ca, {pki::Role::kMachine, "m1", false}, kNowS - 3600, 86400));
    pki::Authority other = Must(pki::CreateAuthority("other", kNowS - 3600, 86400));
    c.foreign = Must(pki::IssueCredential(other, {pki::Role::kMaster, "master", false}, kNowS - 3600, 86400));
    for (const char* user : {"alice", "bob"}) {
      for (v1::AccessAction a : {v1::EXEC, v1::READ_LOGS}) {
        v1::AccessGrant g = Must(pki::SignGrant(c.master, user, "m1", "alice.web.0.1", a, kExpiresMs));
        c.genuine[g.body()] = g;
      }
    }
    c.forged_by_machine = Must(pki::SignGrant(c.machine, "alice", "m1", "alice.web.0.1", v1::EXEC, kExpiresMs));
    c.forged_by_foreign = Must(pki::SignGrant(c.foreign, "alice", "m1", "alice.web.0.1", v1::EXEC, kExpiresMs));
    return c;
  }();
  return cell;
}

void FuzzGrant(Bytes& in) {
  const Cell& cell = TheCell();
  v1::AccessGrant grant;
  const uint8_t how = in.U8();
  const v1::AccessGrant& base = std::next(cell.genuine.begin(), in.U8() % cell.genuine.size())->second;
  switch (how % 6) {
    case 0: {
      absl::string_view raw = in.Take(in.U16());
      if (!grant.ParseFromArray(raw.data(), static_cast<int>(raw.size()))) grant.Clear();
      break;
    }
    case 1:
      grant = base;
      grant.set_body(std::string(in.Take(in.U16())));
      break;
    case 2:
      grant = base;
      grant.set_signature(std::string(in.Take(in.U16())));
      break;
    case 3:
      grant = base;
      grant.set_signer_cert(std::string(in.Take(in.U16())));
      break;
    case 4:
      grant = how & 8 ? cell.forged_by_machine : cell.forged_by_foreign;
      break;
    default:
      grant = base;
      break;
  }
  static const char* const kUsers[] = {"alice", "bob", "mallory", ""};
  static const char* const kMachines[] = {"m1", "m2", ""};
  static const char* const kRuns[] = {"alice.web.0.1", "alice.web.0.2", "bob.db.0.1", ""};
  const uint8_t pick = in.U8();
  const std::string user = kUsers[pick % 4];
  const std::string machine = kMachines[(pick >> 2) % 3];
  const std::string run = kRuns[(pick >> 4) % 4];
  const v1::AccessAction action = pick & 64 ? v1::EXEC : v1::READ_LOGS;
  const int64_t now_ms = kNowS * 1000 + static_cast<int64_t>(in.U16()) * 10;

  absl::Status st = pki::CheckGrant(grant, cell.ca.cert_pem, user, machine, run, action, now_ms);
  if (!st.ok()) {
    HERD_FUZZ_ASSERT(!st.message().empty(), "a refusal without a reason");
    return;
  }
  auto it = cell.genuine.find(grant.body());
  HERD_FUZZ_ASSERT(it != cell.genuine.end(), absl::StrCat("accepted a body the master never signed: ",
                                                          grant.ShortDebugString()));
  v1::AccessGrant::Body body;
  HERD_FUZZ_ASSERT(body.ParseFromString(grant.body()), "accepted an unreadable body");
  HERD_FUZZ_ASSERT(body.user() == user && body.machine() == machine && body.run_id() == run &&
                       body.action() == action,
                   absl::StrCat("accepted a grant for something else: ", body.ShortDebugString(), " asked ", user,
                                " ", machine, " ", run));
  HERD_FUZZ_ASSERT(now_ms < body.expires_unix_ms(), "accepted an expired grant");
}

void FuzzRunId(Bytes& in) {
  absl::string_view id = in.Take(in.left());
  if (!herd::agent::ValidateRunId(id).ok()) return;
  HERD_FUZZ_ASSERT(!id.empty() && id != "." && id != ".." && id.find('/') == absl::string_view::npos &&
                       id.find('\0') == absl::string_view::npos && id.size() <= 255,
                   std::string(id));
}

void FuzzRunState(Bytes& in) {
  absl::string_view text = in.Take(in.left());
  absl::StatusOr<herd::agent::RunState> state = herd::agent::DecodeRunState(text);
  if (!state.ok()) {
    HERD_FUZZ_ASSERT(!state.status().message().empty(), "an error without a message");
    return;
  }
  std::string once = herd::agent::EncodeRunState(*state);
  absl::StatusOr<herd::agent::RunState> again = herd::agent::DecodeRunState(once);
  HERD_FUZZ_ASSERT(again.ok(), absl::StrCat(again.status().ToString(), "\n", once));
  std::string twice = herd::agent::EncodeRunState(*again);
  HERD_FUZZ_ASSERT(once == twice, absl::StrCat(once, "\n!=\n", twice));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  herd::fuzz::Quiet();
  if (size > (64 << 10)) return 0;
  Bytes in(data, size);
  switch (in.U8() % 3) {
    case 0:
      FuzzGrant(in);
      break;
    case 1:
      FuzzRunId(in);
      break;
    default:
      FuzzRunState(in);
      break;
  }
  return 0;
}
