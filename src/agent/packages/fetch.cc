#include "agent/packages/fetch.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <mutex>
#include <random>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "agent/runtime/process.h"
#include "base/errno_status.h"

namespace herd::agent {
namespace {

std::string Hex(const unsigned char* p, size_t n) {
  static const char kDigits[] = "0123456789abcdef";
  std::string out(2 * n, '0');
  for (size_t i = 0; i < n; ++i) {
    out[2 * i] = kDigits[p[i] >> 4];
    out[2 * i + 1] = kDigits[p[i] & 15];
  }
  return out;
}

// SHA-256 over a stream of chunks (OpenSSL's EVP).
class Hasher {
 public:
  Hasher() : ctx_(EVP_MD_CTX_new(), EVP_MD_CTX_free) { Reset(); }
  void Reset() { EVP_DigestInit_ex(ctx_.get(), EVP_sha256(), nullptr); }
  void Update(const char* p, size_t n) { EVP_DigestUpdate(ctx_.get(), p, n); }
  std::string Hex() {
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    EVP_DigestFinal_ex(ctx_.get(), md, &len);
    return herd::agent::Hex(md, len);
  }

 private:
  std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> ctx_;
};

// Writes to `dest` while hashing.
class Sink {
 public:
  // `resume`: keep what `dest` holds (hashing it) and append to it.
  absl::Status Open(const std::string& dest, bool resume) {
    dest_ = dest;
    fd_.Reset(open(dest.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | (resume ? 0 : O_TRUNC), 0644));
    if (!fd_.valid()) return ErrnoToStatus(errno, absl::StrCat("create ", dest));
    if (!resume) return absl::OkStatus();
    std::string buf(1 << 20, '\0');
    while (true) {
      ssize_t n = read(fd_.get(), buf.data(), buf.size());
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return ErrnoToStatus(errno, absl::StrCat("read ", dest));
      if (n == 0) return absl::OkStatus();
      hasher_.Update(buf.data(), static_cast<size_t>(n));
      size_ += n;
    }
  }
  // Starts over with an empty file.
  absl::Status Restart() {
    if (ftruncate(fd_.get(), 0) != 0 || lseek(fd_.get(), 0, SEEK_SET) != 0) {
      return ErrnoToStatus(errno, absl::StrCat("truncate ", dest_));
    }
    hasher_.Reset();
    size_ = 0;
    return absl::OkStatus();
  }
  absl::Status Write(const char* p, size_t n) {
    while (n > 0) {
      ssize_t w = write(fd_.get(), p, n);
      if (w < 0 && errno == EINTR) continue;
      if (w < 0) return ErrnoToStatus(errno, absl::StrCat("write ", dest_));
      hasher_.Update(p, static_cast<size_t>(w));
      size_ += w;
      p += w;
      n -= static_cast<size_t>(w);
    }
    return absl::OkStatus();
  }
  absl::StatusOr<Fetched> Finish() {
    if (fsync(fd_.get()) != 0) return ErrnoToStatus(errno, absl::StrCat("fsync ", dest_));
    fd_.Reset();
    Fetched f;
    f.sha256 = hasher_.Hex();
    f.size_bytes = size_;
    return f;
  }
  int64_t size() const { return size_; }

 private:
  Fd fd_;
  std::string dest_;
  Hasher hasher_;
  int64_t size_ = 0;
};

bool Stopped(const std::atomic<bool>* stop) { return stop != nullptr && stop->load(); }

// The error for an archive over the limit: `what` is "GET URL" or "read
// PATH", `size` what is known of its size ("2000000 bytes", "at least
// 1200000 bytes").
absl::Status TooLarge(absl::string_view what, int64_t limit, absl::string_view size) {
  return absl::FailedPreconditionError(
      absl::StrCat(what, ": the archive is ", size, ", over the size limit of ", limit, " bytes"));
}

absl::StatusOr<Fetched> FetchFile(const std::string& path, const std::string& dest, int64_t limit,
                                  const std::atomic<bool>* stop) {
  Fd in(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!in.valid()) {
    return ErrnoToStatus(errno, absl::StrCat("open ", path));
  }
  struct stat st;
  if (limit > 0 && fstat(in.get(), &st) == 0 && st.st_size > limit) {
    return TooLarge(absl::StrCat("read ", path), limit, absl::StrCat(st.st_size, " bytes"));
  }
  Sink sink;
  if (absl::Status st = sink.Open(dest, /*resume=*/false); !st.ok()) return st;
  std::string buf(1 << 20, '\0');
  while (true) {
    if (Stopped(stop)) return absl::CancelledError("agent stopping");
    ssize_t n = read(in.get(), buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoToStatus(errno, absl::StrCat("read ", path));
    if (n == 0) break;
    if (limit > 0 && sink.size() + n > limit) {
      return TooLarge(absl::StrCat("read ", path), limit, absl::StrCat("at least ", sink.size() + n, " bytes"));
    }
    if (absl::Status st = sink.Write(buf.data(), static_cast<size_t>(n)); !st.ok()) return st;
  }
  return sink.Finish();
}

// ---- http and https, through libcurl ----

// curl_global_init is not thread-safe and must run before any other curl
// call; the agent fetches on several threads.
CURLcode GlobalInit() {
  static std::once_flag once;
  static CURLcode rc = CURLE_OK;
  std::call_once(once, [] { rc = curl_global_init(CURL_GLOBAL_DEFAULT); });
  return rc;
}

// One request's view, shared with libcurl's callbacks.
struct Transfer {
  const std::string* url = nullptr;
  Sink* sink = nullptr;
  int64_t limit = 0;
  const std::atomic<bool>* stop = nullptr;
  int64_t start = 0;            // bytes on disk before this request (its Range)
  long code = 0;                // of the response being read (each redirect has its own)
  int64_t content_length = -1;  // of that response; -1: not said
  absl::Status error;           // why a callback ended the transfer
};

bool BodyIsArchive(long code) { return code == 200 || code == 206; }

size_t OnHeader(char* data, size_t size, size_t n, void* arg) {
  Transfer& t = *static_cast<Transfer*>(arg);
  absl::string_view line(data, size * n);
  if (absl::StartsWith(line, "HTTP/")) {
    // A new response: its status, and no length yet.
    int code = 0;
    if (size_t sp = line.find(' '); sp != absl::string_view::npos)
      (void)absl::SimpleAtoi(line.substr(sp + 1, 3), &code);
    t.code = code;
    t.content_length = -1;
    return size * n;
  }
  if (absl::StartsWithIgnoreCase(line, "content-length:")) {
    int64_t len = -1;
    if (absl::SimpleAtoi(absl::StripAsciiWhitespace(line.substr(15)), &len)) t.content_length = len;
  }
  if (absl::StripAsciiWhitespace(line).empty() && BodyIsArchive(t.code) && t.limit > 0 && t.content_length >= 0) {
    // The end of the headers: refuse a too large archive before its body.
    const int64_t total = (t.code == 206 ? t.start : 0) + t.content_length;
    if (total > t.limit) {
      t.error = TooLarge(absl::StrCat("GET ", *t.url), t.limit, absl::StrCat(total, " bytes"));
      return 0;
    }
  }
  return size * n;
}

size_t OnBody(char* data, size_t size, size_t n, void* arg) {
  Transfer& t = *static_cast<Transfer*>(arg);
  const size_t bytes = size * n;
  if (!BodyIsArchive(t.code)) {
    // A redirect's or an error's body: not the archive. Stop reading an
    // error page (its status is the result); ignore the rest.
    return t.code >= 400 ? 0 : bytes;
  }
  if (t.code == 200 && t.start > 0) {
    // Never mixed with a partial file (libcurl refuses this case anyway).
    t.error = absl::InternalError("a whole response to a Range request");
    return 0;
  }
  if (t.limit > 0 && t.sink->size() + static_cast<int64_t>(bytes) > t.limit) {
    t.error = TooLarge(absl::StrCat("GET ", *t.url), t.limit,
                       absl::StrCat("at least ", t.sink->size() + static_cast<int64_t>(bytes), " bytes"));
    return 0;
  }
  if (absl::Status st = t.sink->Write(data, bytes); !st.ok()) {
    t.error = st;
    return 0;
  }
  return bytes;
}

int OnProgress(void* arg, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  return Stopped(static_cast<Transfer*>(arg)->stop) ? 1 : 0;
}

// What one request came to.
enum class Outcome { kDone, kRestart, kRetry, kFail };
struct Result {
  Outcome outcome;
  absl::Status status;  // why, unless kDone
};

Result Classify(CURLcode rc, const Transfer& t, CURL* h, const char* errbuf) {
  const std::string& url = *t.url;
  if (rc != CURLE_OK && Stopped(t.stop)) return {Outcome::kFail, absl::CancelledError("agent stopping")};
  if (rc == CURLE_RANGE_ERROR || (t.start > 0 && (t.code == 416 || (t.code == 200 && rc != CURLE_OK)))) {
    // The server ignores Range (200) or has less than the partial file
    // (416): the whole archive again.
    return {Outcome::kRestart, absl::OkStatus()};
  }
  if (!t.error.ok()) return {Outcome::kFail, t.error};
  char* effective = nullptr;
  curl_easy_getinfo(h, CURLINFO_EFFECTIVE_URL, &effective);
  const std::string where = absl::StrCat(
      "GET ", url, effective != nullptr && url != effective ? absl::StrCat(" (redirected to ", effective, ")") : "");
  if (rc == CURLE_OK || (rc == CURLE_WRITE_ERROR && t.code >= 400)) {
    if (BodyIsArchive(t.code)) return {Outcome::kDone, absl::OkStatus()};
    const std::string msg = absl::StrCat(where, ": HTTP ", t.code);
    if (t.code == 404 || t.code == 410) return {Outcome::kFail, absl::NotFoundError(msg)};
    if (t.code >= 500 || t.code == 408 || t.code == 429) return {Outcome::kRetry, absl::UnavailableError(msg)};
    if (t.code >= 300 && t.code < 400)
      return {Outcome::kFail, absl::InternalError(absl::StrCat(msg, " without a Location"))};
    return {Outcome::kFail, absl::InternalError(msg)};
  }
  const std::string why = absl::StrCat(where, ": ", errbuf[0] != '\0' ? errbuf : curl_easy_strerror(rc));
  switch (rc) {
    case CURLE_FILESIZE_EXCEEDED:
      // libcurl's own check of Content-Length (CURLOPT_MAXFILESIZE_LARGE).
      return {Outcome::kFail,
              TooLarge(absl::StrCat("GET ", url), t.limit,
                       t.content_length >= 0 ? absl::StrCat(t.start + t.content_length, " bytes") : "larger")};
    case CURLE_UNSUPPORTED_PROTOCOL:
    case CURLE_URL_MALFORMAT:
      return {Outcome::kFail,
              absl::InvalidArgumentError(absl::StrCat(why, " (the agent fetches packages over http and https only)"))};
    case CURLE_TOO_MANY_REDIRECTS:
      return {Outcome::kFail, absl::InternalError(absl::StrCat(why, " (a redirect loop, or too many redirects)"))};
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_CERTPROBLEM:
      return {Outcome::kFail, absl::UnauthenticatedError(why)};
    case CURLE_COULDNT_RESOLVE_PROXY:
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_CONNECT:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_PARTIAL_FILE:
    case CURLE_GOT_NOTHING:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
      return {Outcome::kRetry, absl::UnavailableError(why)};
    default:
      return {Outcome::kFail, absl::InternalError(why)};
  }
}

// The CAs https trusts: the system's bundle and the extra ones, as one PEM
// blob (libcurl takes one CA file or blob, besides a hashed directory that
// not every system has).
std::string TrustedCas(CURL* h, const FetchOptions& o) {
  std::string file = o.system_ca_file;
  if (file.empty()) {
    char* builtin = nullptr;
    if (curl_easy_getinfo(h, CURLINFO_CAINFO, &builtin) == CURLE_OK && builtin != nullptr) file = builtin;
  }
  std::string pem;
  if (!file.empty()) {
    absl::StatusOr<std::string> system = ReadFile(file);
    if (system.ok()) pem = *std::move(system);
  }
  return absl::StrCat(pem, "\n", o.extra_ca_pem);
}

void SleepUnlessStopped(int64_t ms, const std::atomic<bool>* stop) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  while (!Stopped(stop) && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(
        std::chrono::milliseconds(50), until - std::chrono::steady_clock::now()));
  }
}

absl::StatusOr<Fetched> FetchHttp(const std::string& url, const std::string& dest, const FetchOptions& o,
                                  const std::atomic<bool>* stop) {
  if (CURLcode rc = GlobalInit(); rc != CURLE_OK) {
    return absl::InternalError(absl::StrCat("libcurl: ", curl_easy_strerror(rc)));
  }
  std::unique_ptr<CURL, void (*)(CURL*)> handle(curl_easy_init(), curl_easy_cleanup);
  CURL* h = handle.get();
  if (h == nullptr) return absl::InternalError("libcurl: cannot make a handle");
  Sink sink;
  if (absl::Status st = sink.Open(dest, o.resume_existing); !st.ok()) return st;
  Transfer t;
  t.url = &url;
  t.sink = &sink;
  t.limit = o.max_bytes;
  t.stop = stop;
  char errbuf[CURL_ERROR_SIZE];
  const std::string cas = o.extra_ca_pem.empty() ? "" : TrustedCas(h, o);
  curl_easy_setopt(h, CURLOPT_URL, url.c_str());
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(h, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 1L);
  curl_easy_setopt(h, CURLOPT_MAXREDIRS, static_cast<long>(o.max_redirects));
  curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(o.connect_timeout_ms));
  curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, static_cast<long>(o.timeout_ms));
  curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, static_cast<long>(o.low_speed_bytes_per_s));
  curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, static_cast<long>(o.low_speed_time_s));
  curl_easy_setopt(h, CURLOPT_USERAGENT, "herd-agent");
  curl_easy_setopt(h, CURLOPT_BUFFERSIZE, 256L << 10);
  curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
  curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, OnHeader);
  curl_easy_setopt(h, CURLOPT_HEADERDATA, &t);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, OnBody);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, &t);
  curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, OnProgress);
  curl_easy_setopt(h, CURLOPT_XFERINFODATA, &t);
  curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
  if (!cas.empty()) {
    struct curl_blob blob = {const_cast<char*>(cas.data()), cas.size(), CURL_BLOB_COPY};
    curl_easy_setopt(h, CURLOPT_CAINFO_BLOB, &blob);
  }
  std::mt19937_64 rng(std::random_device{}());
  int64_t backoff_ms = o.backoff_initial_ms;
  int32_t requests = 0;
  absl::Status last;
  for (int32_t attempt = 0; attempt < std::max(1, o.attempts);) {
    if (Stopped(stop)) return absl::CancelledError("agent stopping");
    t.start = sink.size();
    t.code = 0;
    t.content_length = -1;
    t.error = absl::OkStatus();
    errbuf[0] = '\0';
    curl_easy_setopt(h, CURLOPT_RESUME_FROM_LARGE, static_cast<curl_off_t>(t.start));
    // libcurl compares it with the response's Content-Length: what is left.
    curl_easy_setopt(h, CURLOPT_MAXFILESIZE_LARGE,
                     static_cast<curl_off_t>(o.max_bytes > 0 ? std::max<int64_t>(1, o.max_bytes - t.start) : 0));
    ++requests;
    Result r = Classify(curl_easy_perform(h), t, h, errbuf);
    switch (r.outcome) {
      case Outcome::kDone: {
        absl::StatusOr<Fetched> f = sink.Finish();
        if (f.ok()) {
          f->resumed_bytes = t.start;
          f->requests = requests;
        }
        return f;
      }
      case Outcome::kRestart:
        // Not a failure: the next request asks for everything (so it
        // cannot end here again).
        if (absl::Status st = sink.Restart(); !st.ok()) return st;
        continue;
      case Outcome::kFail:
        return r.status;
      case Outcome::kRetry:
        last = r.status;
        if (++attempt >= std::max(1, o.attempts)) break;
        std::uniform_int_distribution<int64_t> jitter(backoff_ms / 2, std::max<int64_t>(backoff_ms / 2, backoff_ms));
        SleepUnlessStopped(jitter(rng), stop);
        backoff_ms = std::min(o.backoff_max_ms, 2 * backoff_ms);
        continue;
    }
    break;
  }
  return absl::Status(last.code(),
                      absl::StrCat(last.message(), " (after ", requests, requests == 1 ? " attempt)" : " attempts)"));
}

}  // namespace

std::string Sha256Hex(absl::string_view data) {
  Hasher h;
  h.Update(data.data(), data.size());
  return h.Hex();
}

absl::StatusOr<Fetched> FetchToFile(const std::string& url, const std::string& dest, const FetchOptions& options,
                                    const std::atomic<bool>* stop) {
  if (absl::StartsWith(url, "http://") || absl::StartsWith(url, "https://")) {
    return FetchHttp(url, dest, options, stop);
  }
  if (absl::StartsWith(url, "file://")) return FetchFile(url.substr(7), dest, options.max_bytes, stop);
  if (absl::StartsWith(url, "/")) return FetchFile(url, dest, options.max_bytes, stop);
  if (absl::StrContains(url, "://")) {
    return absl::InvalidArgumentError(absl::StrCat(
        "unsupported package URL ", url, " (the agent fetches http://, https://, file:// and absolute paths)"));
  }
  return absl::InvalidArgumentError(absl::StrCat("package URL ", url, " is not absolute"));
}

absl::StatusOr<Fetched> FetchToFile(const std::string& url, const std::string& dest, const std::atomic<bool>* stop) {
  return FetchToFile(url, dest, FetchOptions(), stop);
}

}  // namespace herd::agent
