// Fuzz target: credential files (pki::ParseCredential), which the CLI, the
// agent and the master read at start ($HERD_CREDENTIALS, --credentials).
// Nothing may crash; an error names the file; what is accepted formats and
// parses back to the same credential; and pki::Inspect, which reads
// certificates from the network (a peer's), survives any PEM.
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "fuzz_util.h"
#include "pki/pki.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  herd::fuzz::Quiet();
  if (size > (64 << 10)) return 0;
  absl::string_view text = herd::fuzz::AsText(data, size);
  absl::StatusOr<herd::pki::Credential> c = herd::pki::ParseCredential(text, "fuzz.pem");
  (void)herd::pki::Inspect(text);
  if (!c.ok()) {
    HERD_FUZZ_ASSERT(absl::StrContains(c.status().message(), "fuzz.pem"), c.status().ToString());
    return 0;
  }
  std::string formatted = herd::pki::FormatCredential(*c);
  absl::StatusOr<herd::pki::Credential> again = herd::pki::ParseCredential(formatted, "again.pem");
  HERD_FUZZ_ASSERT(again.ok(), absl::StrCat(again.status().ToString(), "\n", formatted));
  HERD_FUZZ_ASSERT(again->cert_pem == c->cert_pem && again->key_pem == c->key_pem && again->ca_pem == c->ca_pem &&
                       again->info.subject == c->info.subject && again->info.serial == c->info.serial,
                   formatted);
  return 0;
}
