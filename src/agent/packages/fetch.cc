#include "agent/packages/fetch.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <openssl/evp.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <memory>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "agent/runtime/process.h"
#include "base/errno_status.h"

namespace herd::agent {
namespace {

constexpr int kIdleTimeoutMs = 30'000;  // no byte from the server for this long: give up
constexpr int kMaxRedirects = 5;

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
  Hasher() : ctx_(EVP_MD_CTX_new(), EVP_MD_CTX_free) { EVP_DigestInit_ex(ctx_.get(), EVP_sha256(), nullptr); }
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
  absl::Status Open(const std::string& dest) {
    fd_.Reset(open(dest.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    if (!fd_.valid()) return ErrnoToStatus(errno, absl::StrCat("create ", dest));
    dest_ = dest;
    return absl::OkStatus();
  }
  absl::Status Write(const char* p, size_t n) {
    hasher_.Update(p, n);
    size_ += static_cast<int64_t>(n);
    while (n > 0) {
      ssize_t w = write(fd_.get(), p, n);
      if (w < 0 && errno == EINTR) continue;
      if (w < 0) return ErrnoToStatus(errno, absl::StrCat("write ", dest_));
      p += w;
      n -= static_cast<size_t>(w);
    }
    return absl::OkStatus();
  }
  absl::StatusOr<Fetched> Finish() {
    if (fsync(fd_.get()) != 0) return ErrnoToStatus(errno, absl::StrCat("fsync ", dest_));
    fd_.Reset();
    return Fetched{hasher_.Hex(), size_};
  }

 private:
  Fd fd_;
  std::string dest_;
  Hasher hasher_;
  int64_t size_ = 0;
};

bool Stopped(const std::atomic<bool>* stop) { return stop != nullptr && stop->load(); }

absl::StatusOr<Fetched> FetchFile(const std::string& path, const std::string& dest, const std::atomic<bool>* stop) {
  Fd in(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!in.valid()) {
    return ErrnoToStatus(errno, absl::StrCat("open ", path));
  }
  Sink sink;
  if (absl::Status st = sink.Open(dest); !st.ok()) return st;
  std::string buf(1 << 20, '\0');
  while (true) {
    if (Stopped(stop)) return absl::CancelledError("agent stopping");
    ssize_t n = read(in.get(), buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoToStatus(errno, absl::StrCat("read ", path));
    if (n == 0) break;
    if (absl::Status st = sink.Write(buf.data(), static_cast<size_t>(n)); !st.ok()) return st;
  }
  return sink.Finish();
}

struct HttpUrl {
  std::string host;
  std::string port = "80";
  std::string path = "/";
};

absl::StatusOr<HttpUrl> ParseHttpUrl(absl::string_view url) {
  absl::string_view rest = url;
  if (!absl::ConsumePrefix(&rest, "http://")) return absl::InvalidArgumentError(absl::StrCat("not http: ", url));
  HttpUrl u;
  size_t slash = rest.find('/');
  absl::string_view authority = rest.substr(0, slash);
  if (slash != absl::string_view::npos) u.path = std::string(rest.substr(slash));
  size_t colon = authority.rfind(':');
  if (colon != absl::string_view::npos && authority.find(']') == absl::string_view::npos) {
    u.port = std::string(authority.substr(colon + 1));
    authority = authority.substr(0, colon);
  }
  u.host = std::string(authority);
  if (u.host.empty()) return absl::InvalidArgumentError(absl::StrCat("no host in ", url));
  return u;
}

// Reads what is there within the idle timeout; 0 at EOF.
absl::StatusOr<size_t> ReadSome(int fd, char* buf, size_t n, const std::atomic<bool>* stop) {
  int waited = 0;
  while (true) {
    if (Stopped(stop)) return absl::CancelledError("agent stopping");
    struct pollfd p = {fd, POLLIN, 0};
    int r = poll(&p, 1, 200);
    if (r < 0 && errno != EINTR) return ErrnoToStatus(errno, "poll");
    if (r <= 0) {
      if ((waited += 200) >= kIdleTimeoutMs) return absl::UnavailableError("timed out waiting for the server");
      continue;
    }
    ssize_t got = read(fd, buf, n);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return ErrnoToStatus(errno, "read");
    return static_cast<size_t>(got);
  }
}

absl::StatusOr<Fd> Connect(const HttpUrl& u) {
  struct addrinfo hints = {};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  struct addrinfo* res = nullptr;
  if (int rc = getaddrinfo(u.host.c_str(), u.port.c_str(), &hints, &res); rc != 0) {
    return absl::UnavailableError(absl::StrCat("resolve ", u.host, ": ", gai_strerror(rc)));
  }
  std::string last = "no address";
  for (struct addrinfo* a = res; a != nullptr; a = a->ai_next) {
    Fd fd(socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol));
    if (!fd.valid()) continue;
    if (connect(fd.get(), a->ai_addr, a->ai_addrlen) == 0) {
      freeaddrinfo(res);
      return fd;
    }
    last = strerror(errno);
  }
  freeaddrinfo(res);
  return absl::UnavailableError(absl::StrCat("connect ", u.host, ":", u.port, ": ", last));
}

absl::StatusOr<Fetched> FetchHttp(const std::string& url, const std::string& dest, const std::atomic<bool>* stop,
                                  int redirects) {
  absl::StatusOr<HttpUrl> u = ParseHttpUrl(url);
  if (!u.ok()) return u.status();
  absl::StatusOr<Fd> conn = Connect(*u);
  if (!conn.ok()) return conn.status();
  // HTTP/1.0: the body ends when the server closes (no chunked encoding).
  std::string req = absl::StrCat("GET ", u->path, " HTTP/1.0\r\nHost: ", u->host, "\r\nUser-Agent: herd-agent\r\n",
                                 "Connection: close\r\n\r\n");
  for (size_t off = 0; off < req.size();) {
    ssize_t w = send(conn->get(), req.data() + off, req.size() - off, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) return ErrnoToStatus(errno, absl::StrCat("send to ", u->host));
    off += static_cast<size_t>(w);
  }
  std::string buf(1 << 16, '\0');
  std::string head;
  size_t header_end = std::string::npos;
  while (header_end == std::string::npos) {
    absl::StatusOr<size_t> n = ReadSome(conn->get(), buf.data(), buf.size(), stop);
    if (!n.ok()) return n.status();
    if (*n == 0) return absl::UnavailableError(absl::StrCat("GET ", url, ": connection closed before the headers"));
    head.append(buf.data(), *n);
    header_end = head.find("\r\n\r\n");
    if (header_end == std::string::npos && head.size() > (64 << 10)) {
      return absl::InternalError(absl::StrCat("GET ", url, ": headers too long"));
    }
  }
  std::string body_start = head.substr(header_end + 4);
  head.resize(header_end);
  std::vector<std::string> lines = absl::StrSplit(head, "\r\n");
  std::vector<std::string> status_line = absl::StrSplit(lines[0], absl::MaxSplits(' ', 2));
  int code = 0;
  if (status_line.size() < 2 || !absl::SimpleAtoi(status_line[1], &code)) {
    return absl::InternalError(absl::StrCat("GET ", url, ": bad status line: ", lines[0]));
  }
  int64_t content_length = -1;
  std::string location;
  for (size_t i = 1; i < lines.size(); ++i) {
    size_t colon = lines[i].find(':');
    if (colon == std::string::npos) continue;
    std::string key = absl::AsciiStrToLower(lines[i].substr(0, colon));
    std::string value(absl::StripAsciiWhitespace(lines[i].substr(colon + 1)));
    if (key == "content-length") (void)absl::SimpleAtoi(value, &content_length);
    if (key == "location") location = value;
  }
  if (code >= 300 && code < 400 && !location.empty()) {
    if (redirects >= kMaxRedirects) return absl::InternalError(absl::StrCat("GET ", url, ": too many redirects"));
    if (absl::StartsWith(location, "/")) location = absl::StrCat("http://", u->host, ":", u->port, location);
    return FetchHttp(location, dest, stop, redirects + 1);
  }
  if (code != 200) {
    std::string msg = absl::StrCat("GET ", url, ": HTTP ", code);
    if (code == 404 || code == 410) return absl::NotFoundError(msg);
    if (code >= 500) return absl::UnavailableError(msg);
    return absl::InternalError(msg);
  }
  Sink sink;
  if (absl::Status st = sink.Open(dest); !st.ok()) return st;
  if (absl::Status st = sink.Write(body_start.data(), body_start.size()); !st.ok()) return st;
  int64_t got_bytes = static_cast<int64_t>(body_start.size());
  while (true) {
    absl::StatusOr<size_t> n = ReadSome(conn->get(), buf.data(), buf.size(), stop);
    if (!n.ok()) return n.status();
    if (*n == 0) break;
    got_bytes += static_cast<int64_t>(*n);
    if (absl::Status st = sink.Write(buf.data(), *n); !st.ok()) return st;
  }
  if (content_length >= 0 && got_bytes != content_length) {
    return absl::UnavailableError(
        absl::StrCat("GET ", url, ": got ", got_bytes, " bytes of ", content_length, " (connection cut)"));
  }
  return sink.Finish();
}

}  // namespace

std::string Sha256Hex(absl::string_view data) {
  Hasher h;
  h.Update(data.data(), data.size());
  return h.Hex();
}

absl::StatusOr<Fetched> FetchToFile(const std::string& url, const std::string& dest, const std::atomic<bool>* stop) {
  if (absl::StartsWith(url, "http://")) return FetchHttp(url, dest, stop, 0);
  if (absl::StartsWith(url, "file://")) return FetchFile(url.substr(7), dest, stop);
  if (absl::StartsWith(url, "/")) return FetchFile(url, dest, stop);
  if (absl::StrContains(url, "://")) {
    return absl::InvalidArgumentError(
        absl::StrCat("unsupported package URL ", url, " (the agent fetches http://, file:// and absolute paths)"));
  }
  return absl::InvalidArgumentError(absl::StrCat("package URL ", url, " is not absolute"));
}

absl::Status Untar(const std::string& archive, const std::string& dir) {
  std::string tar;
  for (const char* p : {"/usr/bin/tar", "/bin/tar"}) {
    if (access(p, X_OK) == 0) {
      tar = p;
      break;
    }
  }
  if (tar.empty()) return absl::InternalError("tar(1) not found in /usr/bin or /bin");
  SpawnOptions o;
  o.path = tar;
  o.argv = {tar, "-x", "-f", archive, "-C", dir, "--no-same-owner", "--delay-directory-restore"};
  o.env = {{"PATH", "/usr/bin:/bin"}, {"LC_ALL", "C"}};
  o.stderr_path = dir + ".tar-errors";
  absl::StatusOr<pid_t> pid = Spawn(o);
  if (!pid.ok()) return pid.status();
  int status = 0;
  while (waitpid(*pid, &status, 0) < 0) {
    if (errno != EINTR) return ErrnoToStatus(errno, "waitpid tar");
  }
  absl::StatusOr<std::string> errors = ReadFile(o.stderr_path);
  unlink(o.stderr_path.c_str());
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return absl::OkStatus();
  std::string why(absl::StripAsciiWhitespace(errors.ok() ? *errors : ""));
  if (size_t nl = why.find('\n'); nl != std::string::npos) why.resize(nl);
  return absl::FailedPreconditionError(absl::StrCat("not a readable tar archive (", why.empty() ? "tar failed" : why, ")"));
}

}  // namespace herd::agent
