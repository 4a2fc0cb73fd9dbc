// Fuzz target: Jsonnet job specs. Jsonnet is code: spec::ParseText
// evaluates it in a child process under CPU, memory and wall-clock limits
// (spec/jsonnet/evaluate.h), with imports confined to the spec's own
// directory, then reads the JSON it printed as a JSON spec.
//
// This target runs the same two steps with tighter limits, so one input
// costs at most about a second: jsonnet::EvaluateSnippet, then the JSON
// through spec::ParseText. Beyond "nothing crashes" it checks the
// confinement: the spec lives in DIR/spec/, DIR/secret.txt holds a random
// marker (and DIR/spec/link.txt is a symlink to it), and neither the JSON
// nor an error may ever carry the marker, whatever the input imports.
//
// libjsonnet is Debian's (not instrumented) and runs in the child, so
// libFuzzer sees the coverage of Herd's side only: which JSON comes back.
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <limits>
#include <string>

#include "absl/strings/match.h"
#include "spec/jsonnet/evaluate.h"
#include "spec_check.h"

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HERD_FUZZ_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define HERD_FUZZ_ASAN 1
#endif

namespace {

// Jsonnet programs past this are not worth the fork.
constexpr size_t kMaxJsonnetInput = 4 << 10;

struct Sandbox {
  std::string dir;
  std::string secret;  // random per process: no input can spell it out
  std::string source;  // DIR/spec/fuzz.jsonnet (never written: the snippet is the input)
};

void Write(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

const Sandbox& TheSandbox() {
  static const Sandbox box = [] {
    Sandbox b;
    const char* tmp = getenv("TMPDIR");
    std::string tmpl = std::string(tmp != nullptr && *tmp ? tmp : "/tmp") + "/herd-fuzz-jsonnet-XXXXXX";
    if (mkdtemp(tmpl.data()) == nullptr) abort();
    b.dir = tmpl;
    std::ifstream urandom("/dev/urandom", std::ios::binary);
    unsigned char raw[16] = {};
    urandom.read(reinterpret_cast<char*>(raw), sizeof(raw));
    b.secret = "HERD-FUZZ-SECRET-";
    for (unsigned char c : raw) {
      b.secret.push_back("0123456789abcdef"[c >> 4]);
      b.secret.push_back("0123456789abcdef"[c & 15]);
    }
    mkdir((b.dir + "/spec").c_str(), 0755);
    mkdir((b.dir + "/spec/lib").c_str(), 0755);
    Write(b.dir + "/secret.txt", b.secret + "\n");
    Write(b.dir + "/spec/lib/jobs.libsonnet",
          "{ shard(name, n):: { name: name, user: 'bob', tasks: n, command: ['/bin/true'],"
          " resources: { cpu: '100m', memory: '64Mi' } } }\n");
    Write(b.dir + "/spec/data.txt", "inside\n");
    symlink("../secret.txt", (b.dir + "/spec/link.txt").c_str());
    b.source = b.dir + "/spec/fuzz.jsonnet";
    // Left behind on purpose: a fuzzer dies by signal as often as it exits.
    return b;
  }();
  return box;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  herd::fuzz::Quiet();
  if (size > kMaxJsonnetInput) return 0;
  const Sandbox& box = TheSandbox();
  absl::string_view code = herd::fuzz::AsText(data, size);
  herd::spec::jsonnet::Limits limits;
  limits.cpu_seconds = 1;
  limits.wall_ms = 3000;
  limits.output_bytes = 1 << 20;
#ifdef HERD_FUZZ_ASAN
  // AddressSanitizer reserves terabytes of address space up front, so an
  // RLIMIT_AS of any useful size fails every allocation in the child: under
  // ASan only the CPU limit bounds the evaluation.
  limits.memory_bytes = std::numeric_limits<int64_t>::max();
#else
  limits.memory_bytes = int64_t{512} << 20;
#endif
  absl::StatusOr<std::string> json = herd::spec::jsonnet::EvaluateSnippet(code, box.source, limits);
  if (!json.ok()) {
    HERD_FUZZ_ASSERT(!absl::StrContains(json.status().message(), box.secret), json.status().message());
    HERD_FUZZ_ASSERT(!json.status().message().empty(), "an error without a message");
    return 0;
  }
  HERD_FUZZ_ASSERT(!absl::StrContains(*json, box.secret), *json);
  if (json->size() > herd::fuzz::kMaxSpecInput) return 0;
  // What ParseText does with Jsonnet's output (it is JSON).
  herd::spec::ParseOptions opts;
  opts.default_user = "fuzz";
  auto specs = herd::spec::ParseText(*json, "fuzz.json", herd::spec::Format::kJson, opts);
  herd::fuzz::CheckSpecs(specs, "fuzz.json");
  return 0;
}
