// Getting a package archive onto the machine: from a local path, a file://
// URL, or an http:// or https:// URL (libcurl), with its SHA-256 computed on
// the way, and unpacking it with tar(1).
//
// Over the network: https trusts the system's CAs and the ones in
// FetchOptions.extra_ca_pem (the agent's cell CA); redirects are followed,
// at most max_redirects of them and only to http or https; http_proxy,
// https_proxy and no_proxy in the environment are honoured (libcurl's
// defaults). Each attempt has a connect timeout, a total timeout and a
// low-speed limit (a server that stalls is given up); transient failures
// (cannot connect, timed out, connection cut, HTTP 5xx, 408, 429) are retried
// with exponential backoff, each retry resuming the partial file with a Range
// request (a server that ignores Range makes it start again from zero).
// HTTP 4xx, the size limit and certificate errors are not retried.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace herd::agent {

struct FetchOptions {
  // Certificate authorities (PEM) trusted for https besides the system's:
  // the agent passes its cell CA, so package servers may hold certificates
  // the cell issued.
  std::string extra_ca_pem;
  // The system's CA bundle, trusted along with extra_ca_pem. Empty:
  // libcurl's built-in one (/etc/ssl/certs/ca-certificates.crt on Debian).
  std::string system_ca_file;

  // Per attempt: to set the connection up (TCP and TLS), and for the whole
  // transfer (0: no limit). A transfer slower than low_speed_bytes_per_s
  // for low_speed_time_s seconds is given up as stalled.
  int64_t connect_timeout_ms = 10'000;
  int64_t timeout_ms = 3'600'000;
  int64_t low_speed_bytes_per_s = 1024;
  int32_t low_speed_time_s = 30;

  // Archives larger than this are refused: before the download when the
  // server says the size (Content-Length), during it otherwise. 0: no limit.
  int64_t max_bytes = 0;
  int32_t max_redirects = 5;

  // Tries in all for transient failures; waits backoff_initial_ms before
  // the second, doubling up to backoff_max_ms (each wait drawn from its
  // upper half, so machines that failed together do not retry together).
  int32_t attempts = 4;
  int64_t backoff_initial_ms = 1'000;
  int64_t backoff_max_ms = 30'000;

  // Over http(s): resume what an earlier call left in `dest` (a failed
  // call leaves its partial file) instead of starting from zero.
  bool resume_existing = false;
};

struct Fetched {
  std::string sha256;  // lower-case hex of the bytes written
  int64_t size_bytes = 0;
  // Bytes that came from before the last (successful) request: an earlier
  // attempt or call, completed with a Range request. 0: fetched in one go.
  int64_t resumed_bytes = 0;
  int32_t requests = 0;  // made over http(s), retries and restarts included
};

// Copies what `url` names to `dest` (created, or truncated unless resumed).
// Errors: NOT_FOUND (no such file, HTTP 404 or 410), UNAVAILABLE (cannot
// connect, timed out, HTTP 5xx: after the last attempt),
// FAILED_PRECONDITION (over max_bytes: the message says the URL, the limit
// and the size), INVALID_ARGUMENT (unsupported URL, or a redirect to one),
// UNAUTHENTICATED (the server's certificate is not trusted), INTERNAL
// otherwise (other HTTP statuses, too many redirects). Gives up with
// CANCELLED soon after `*stop` becomes true (also while waiting to retry).
absl::StatusOr<Fetched> FetchToFile(const std::string& url, const std::string& dest, const FetchOptions& options,
                                    const std::atomic<bool>* stop = nullptr);
// With the default FetchOptions.
absl::StatusOr<Fetched> FetchToFile(const std::string& url, const std::string& dest,
                                    const std::atomic<bool>* stop = nullptr);

// Lower-case hex SHA-256 of a byte string (for tests and small files).
std::string Sha256Hex(absl::string_view data);

}  // namespace herd::agent
