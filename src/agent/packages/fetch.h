// Getting a package archive onto the machine: from a local path, a file://
// URL or an http:// URL (a minimal HTTP/1.0 client: no TLS, no proxies),
// with its SHA-256 computed on the way, and unpacking it with tar(1).
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace herd::agent {

struct Fetched {
  std::string sha256;  // lower-case hex of the bytes written
  int64_t size_bytes = 0;
};

// Copies what `url` names to `dest` (created or truncated). Errors:
// NOT_FOUND (no such file, HTTP 404), UNAVAILABLE (cannot connect, timed
// out, HTTP 5xx), INVALID_ARGUMENT (unsupported URL), INTERNAL otherwise.
// Gives up with CANCELLED once `*stop` becomes true (checked between reads).
absl::StatusOr<Fetched> FetchToFile(const std::string& url, const std::string& dest,
                                    const std::atomic<bool>* stop = nullptr);

// Lower-case hex SHA-256 of a byte string (for tests and small files).
std::string Sha256Hex(absl::string_view data);

// Unpacks a tar archive (any compression tar recognizes) into `dir`, which
// must exist, without the archive's owners. FAILED_PRECONDITION with tar's
// message if the archive is unreadable.
absl::Status Untar(const std::string& archive, const std::string& dir);

}  // namespace herd::agent
