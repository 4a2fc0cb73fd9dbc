// The agent's package fetcher (agent/packages/fetch.h) over loopback: a
// server in this process serves a 64 MiB archive from memory over http and
// over https (a certificate from a CA made here, trusted as the cell CA),
// and FetchToFile downloads it several times each, hashing it and writing
// it to a file (fsync included), as an Install does. Baseline in the same
// run: FetchToFile of the same bytes from a local file (no network).
//
//   fetch_bench [--runs 5] [--mib 64] [--dir /tmp]
//
// Prints each run and, per source, the median as "RESULT
// fetch_local_64mib_ms=...", "RESULT fetch_http_64mib_ms=..." and "RESULT
// fetch_https_64mib_ms=...".
// Client and server share the machine's cores: the https figure includes
// the server's encryption as well as the client's decryption.
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "agent/packages/fetch.h"
#include "pki/pki.h"
#include "testing/http_server.h"

namespace {

using herd::testing::HttpServer;

int Fail(const std::string& why) {
  std::fprintf(stderr, "fetch_bench: %s\n", why.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  int runs = 5;
  int mib = 64;
  std::string dir = "/tmp";
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--runs" && absl::SimpleAtoi(argv[i + 1], &runs) && runs > 0) continue;
    if (flag == "--mib" && absl::SimpleAtoi(argv[i + 1], &mib) && mib > 0) continue;
    if (flag == "--dir") {
      dir = argv[i + 1];
      continue;
    }
    return Fail("usage: fetch_bench [--runs N] [--mib M] [--dir DIR]");
  }
  // Loopback: never through a proxy.
  for (const char* v : {"http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"})
    unsetenv(v);

  auto body = std::make_shared<std::string>(static_cast<size_t>(mib) << 20, '\0');
  uint64_t x = 88172645463325252ull;  // xorshift: incompressible, not periodic
  for (size_t i = 0; i + 8 <= body->size(); i += 8) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    std::memcpy(body->data() + i, &x, 8);
  }
  const std::string want = herd::agent::Sha256Hex(*body);

  const int64_t now = time(nullptr);
  absl::StatusOr<herd::pki::Authority> ca = herd::pki::CreateAuthority("bench", now, 3600);
  if (!ca.ok()) return Fail(ca.status().ToString());
  absl::StatusOr<herd::pki::Credential> cred =
      herd::pki::IssueCredential(*ca, herd::pki::Subject{herd::pki::Role::kMachine, "pkgs"}, now, 3600, "IP:127.0.0.1");
  if (!cred.ok()) return Fail(cred.status().ToString());
  HttpServer http(herd::testing::ServeBytes("pkg.tar", body));
  HttpServer https(herd::testing::ServeBytes("pkg.tar", body), HttpServer::Tls{cred->cert_pem, cred->key_pem});

  herd::agent::FetchOptions options;
  options.extra_ca_pem = ca->cert_pem;
  options.attempts = 1;
  const std::string dest = absl::StrCat(dir, "/fetch-bench-", getpid(), ".tar");
  // The baseline: the same archive from a local file (page cache) through
  // the same hashing, writing and fsync, without a network.
  const std::string local = dest + ".src";
  if (FILE* f = std::fopen(local.c_str(), "wb");
      f == nullptr || std::fwrite(body->data(), 1, body->size(), f) != body->size() || std::fclose(f) != 0) {
    return Fail("cannot write " + local);
  }
  std::printf("fetch_bench: %d MiB, %d rounds of local (baseline), http, https, into %s\n", mib, runs, dest.c_str());
  struct Mode {
    const char* name;
    std::string url;
    std::vector<double> ms;
  };
  std::vector<Mode> modes = {
      {"local", local, {}}, {"http", http.Url("pkg.tar"), {}}, {"https", https.Url("pkg.tar"), {}}};
  for (int r = 0; r < runs; ++r) {
    // Modes alternate within a round: a busy moment of the machine lands on
    // all of them alike.
    for (Mode& m : modes) {
      const auto t0 = std::chrono::steady_clock::now();
      absl::StatusOr<herd::agent::Fetched> f = herd::agent::FetchToFile(m.url, dest, options);
      const double took = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      if (!f.ok() || f->sha256 != want) {
        return Fail(absl::StrCat(m.name, " run ", r, ": ", f.ok() ? "wrong digest" : f.status().ToString()));
      }
      m.ms.push_back(took);
      std::printf("%-5s run %d: %8.1f ms  %7.1f MiB/s\n", m.name, r + 1, took, mib / (took / 1000));
    }
  }
  for (Mode& m : modes) {
    std::sort(m.ms.begin(), m.ms.end());
    const double median = m.ms[m.ms.size() / 2];
    std::printf("%-5s median %.1f ms (min %.1f, max %.1f), %.1f MiB/s\n", m.name, median, m.ms.front(), m.ms.back(),
                mib / (median / 1000));
  }
  for (Mode& m : modes) std::printf("RESULT fetch_%s_%dmib_ms=%.1f\n", m.name, mib, m.ms[m.ms.size() / 2]);
  std::filesystem::remove(local);
  std::filesystem::remove(dest);
  return 0;
}
