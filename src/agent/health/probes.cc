#include "agent/health/probes.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <mutex>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "agent/runtime/shim_protocol.h"
#include "base/clock.h"

namespace herd::agent {
namespace {

// How much of a command's output the message quotes.
constexpr size_t kOutputQuote = 200;

enum class Wait { kReady, kTimeout, kCancelled, kError };

// Waits until `fd` has `events`, the deadline passes or cancel_fd fires.
Wait WaitFd(int fd, short events, int64_t deadline, int cancel_fd) {
  while (true) {
    int64_t left = deadline - SteadyNowMs();
    if (left <= 0) return Wait::kTimeout;
    struct pollfd fds[2] = {{fd, events, 0}, {cancel_fd, POLLIN, 0}};
    int r = poll(fds, cancel_fd >= 0 ? 2 : 1, static_cast<int>(left));
    if (r < 0) {
      if (errno == EINTR) continue;
      return Wait::kError;
    }
    if (r == 0) continue;  // re-checks the deadline
    if (cancel_fd >= 0 && fds[1].revents != 0) return Wait::kCancelled;
    return Wait::kReady;
  }
}

// A non-blocking socket connected to 127.0.0.1:port, or a failure message.
Fd Connect(int32_t port, int64_t deadline, int cancel_fd, int64_t timeout_ms, std::string* error) {
  const std::string where = absl::StrCat("127.0.0.1:", port);
  Fd fd(socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd.valid()) {
    *error = absl::StrCat("socket: ", strerror(errno));
    return Fd();
  }
  struct sockaddr_in addr = {};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd.get(), reinterpret_cast<struct sockaddr*>(&addr), sizeof(addr)) != 0) {
    if (errno != EINPROGRESS) {
      *error = absl::StrCat("connect to ", where, ": ", strerror(errno));
      return Fd();
    }
    switch (WaitFd(fd.get(), POLLOUT, deadline, cancel_fd)) {
      case Wait::kReady:
        break;
      case Wait::kTimeout:
        *error = absl::StrCat("connect to ", where, ": timed out after ", timeout_ms, "ms");
        return Fd();
      case Wait::kCancelled:
        *error = "cancelled";
        return Fd();
      case Wait::kError:
        *error = absl::StrCat("poll: ", strerror(errno));
        return Fd();
    }
    int err = 0;
    socklen_t len = sizeof(err);
    getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0) {
      *error = absl::StrCat("connect to ", where, ": ", strerror(err));
      return Fd();
    }
  }
  return fd;
}

// Closes with RST rather than FIN: the prober leaves no TIME_WAIT socket
// behind on every probe.
void Abort(Fd& fd) {
  struct linger lg = {1, 0};
  setsockopt(fd.get(), SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
  fd.Reset();
}

std::string Quote(std::string s) {
  s = std::string(absl::StripAsciiWhitespace(s));
  if (s.size() > kOutputQuote) s = s.substr(0, kOutputQuote) + "...";
  for (char& c : s) {
    if (c == '\n' || c == '\r' || c == '\t') c = ' ';
  }
  return s;
}

}  // namespace

ProbeResult ProbeTcp(int32_t port, int64_t timeout_ms, int cancel_fd) {
  const int64_t deadline = SteadyNowMs() + timeout_ms;
  ProbeResult r;
  Fd fd = Connect(port, deadline, cancel_fd, timeout_ms, &r.message);
  if (!fd.valid()) return r;
  Abort(fd);
  r.healthy = true;
  r.message = absl::StrCat("connected to 127.0.0.1:", port);
  return r;
}

// libcurl's part of an HTTP probe: the status line and headers are read,
// the body is not (the write callback stops the transfer at its first byte).
struct HttpProbe {
  static size_t Body(char*, size_t, size_t, void*) { return 0; }
  // Closes with RST rather than FIN: the prober leaves no TIME_WAIT socket
  // behind on every probe.
  static int Linger(void*, curl_socket_t fd, curlsocktype) {
    struct linger lg = {1, 0};
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
    return CURL_SOCKOPT_OK;
  }
};

ProbeResult ProbeHttp(int32_t port, const std::string& path_in, int64_t timeout_ms, int cancel_fd) {
  const int64_t deadline = SteadyNowMs() + timeout_ms;
  const std::string path = path_in.empty() ? "/" : (path_in[0] == '/' ? path_in : "/" + path_in);
  const std::string what = absl::StrCat("GET ", path);
  ProbeResult r;
  auto fail = [&](absl::string_view why) {
    r.message = absl::StrCat(what, " on port ", port, ": ", why);
    return r;
  };
  static std::once_flag init;  // curl_global_init before any other call, once
  std::call_once(init, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
  std::unique_ptr<CURL, void (*)(CURL*)> easy(curl_easy_init(), curl_easy_cleanup);
  std::unique_ptr<CURLM, CURLMcode (*)(CURLM*)> multi(curl_multi_init(), curl_multi_cleanup);
  if (!easy || !multi) return fail("cannot start libcurl");
  const std::string url = absl::StrCat("http://127.0.0.1:", port, path);
  CURL* c = easy.get();
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http");
  curl_easy_setopt(c, CURLOPT_NOPROXY, "*");        // the task's port, never a proxy from the environment
  curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);  // a 3xx is an answer (below 400: healthy)
  curl_easy_setopt(c, CURLOPT_USERAGENT, "herd-health");
  curl_easy_setopt(c, CURLOPT_FORBID_REUSE, 1L);
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, static_cast<long>(std::max<int64_t>(1, timeout_ms)));
  curl_easy_setopt(c, CURLOPT_MAXFILESIZE_LARGE, static_cast<curl_off_t>(1) << 20);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, &HttpProbe::Body);
  curl_easy_setopt(c, CURLOPT_SOCKOPTFUNCTION, &HttpProbe::Linger);
  curl_multi_add_handle(multi.get(), c);
  // Until the answer, the deadline or cancel_fd (the agent stopping the
  // probe), whichever first.
  int running = 1;
  while (running > 0) {
    if (curl_multi_perform(multi.get(), &running) != CURLM_OK) break;
    if (running == 0) break;
    const int64_t left = deadline - SteadyNowMs();
    if (left <= 0) break;
    struct curl_waitfd cancel = {cancel_fd, CURL_WAIT_POLLIN, 0};
    int ready = 0;
    curl_multi_poll(multi.get(), cancel_fd >= 0 ? &cancel : nullptr, cancel_fd >= 0 ? 1 : 0,
                    static_cast<int>(std::min<int64_t>(left, 1000)), &ready);
    if (cancel_fd >= 0 && cancel.revents != 0) {
      curl_multi_remove_handle(multi.get(), c);
      return fail("cancelled");
    }
  }
  CURLcode result = CURLE_OPERATION_TIMEDOUT;
  int queued = 0;
  while (CURLMsg* m = curl_multi_info_read(multi.get(), &queued)) {
    if (m->msg == CURLMSG_DONE) result = m->data.result;
  }
  curl_multi_remove_handle(multi.get(), c);
  long status = 0;
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
  // A write error is ours: the status line and headers came, the body is
  // not read.
  if (status == 0 || (result != CURLE_OK && result != CURLE_WRITE_ERROR)) {
    switch (result) {
      case CURLE_COULDNT_CONNECT: {
        long err = 0;
        curl_easy_getinfo(c, CURLINFO_OS_ERRNO, &err);
        return fail(absl::StrCat("connect to 127.0.0.1:", port, ": ",
                                 err != 0 ? strerror(static_cast<int>(err)) : curl_easy_strerror(result)));
      }
      case CURLE_OPERATION_TIMEDOUT:
        return fail(absl::StrCat("timed out after ", timeout_ms, "ms"));
      case CURLE_GOT_NOTHING:
        return fail("connection closed without a response");
      case CURLE_WEIRD_SERVER_REPLY:
      case CURLE_UNSUPPORTED_PROTOCOL:
        return fail("not an HTTP response");
      default:
        return fail(curl_easy_strerror(result));
    }
  }
  r.healthy = status < 400;
  r.message = absl::StrCat("HTTP ", status, " from ", what, " on port ", port);
  return r;
}

ProbeResult ProbeCommand(const InRunOptions& options, int64_t timeout_ms, int cancel_fd) {
  const int64_t deadline = SteadyNowMs() + timeout_ms;
  ProbeResult r;
  absl::StatusOr<InRunProcess> spawned = SpawnInRun(options);
  if (!spawned.ok()) {
    r.message =
        absl::StrCat("cannot run ", options.argv.empty() ? "" : options.argv[0], ": ", spawned.status().message());
    return r;
  }
  InRunProcess& p = *spawned;
  std::string output;
  Fd* pipes[2] = {&p.stdout_fd, &p.stderr_fd};
  for (Fd* fd : pipes) fcntl(fd->get(), F_SETFL, O_NONBLOCK);
  std::string ended_why;  // set when we killed it
  bool exited = false;
  // Until it exits; its pipes are read as it goes so it never blocks on a
  // full pipe. Whatever it leaves running in its group is killed with it.
  while (!exited) {
    int64_t left = deadline - SteadyNowMs();
    if (left <= 0) {
      ended_why = absl::StrCat("timed out after ", timeout_ms, "ms");
      break;
    }
    struct pollfd fds[4];
    int n = 0;
    fds[n++] = {p.pidfd.get(), POLLIN, 0};
    for (Fd* fd : pipes) fds[n++] = {fd->valid() ? fd->get() : -1, POLLIN, 0};
    fds[n++] = {cancel_fd, POLLIN, 0};
    int rc = poll(fds, static_cast<nfds_t>(n), static_cast<int>(left));
    if (rc < 0 && errno != EINTR) {
      ended_why = absl::StrCat("poll: ", strerror(errno));
      break;
    }
    if (cancel_fd >= 0 && fds[3].revents != 0) {
      ended_why = "cancelled";
      break;
    }
    for (int s = 0; s < 2; ++s) {
      if (fds[1 + s].revents == 0) continue;
      char buf[4096];
      ssize_t got = read(pipes[s]->get(), buf, sizeof(buf));
      if (got > 0) {
        if (output.size() < 4 * kOutputQuote) output.append(buf, static_cast<size_t>(got));
      } else if (got == 0 || (errno != EAGAIN && errno != EINTR)) {
        pipes[s]->Reset();
      }
    }
    if (fds[0].revents != 0) exited = true;
  }
  // The group: the shim, the command and anything it started (its pgid is
  // reserved until we reap it below).
  kill(-p.pid, SIGKILL);
  kill(p.pid, SIGKILL);
  for (Fd* fd : pipes) {
    if (!fd->valid()) continue;
    char buf[4096];
    ssize_t got;
    while (output.size() < 4 * kOutputQuote && (got = read(fd->get(), buf, sizeof(buf))) > 0) {
      output.append(buf, static_cast<size_t>(got));
    }
  }
  int status = 0;
  while (waitpid(p.pid, &status, 0) < 0 && errno == EINTR) {
  }
  const std::string cmd = options.argv.empty() ? "" : options.argv[0];
  const std::string quoted = Quote(output);
  const std::string tail = quoted.empty() ? "" : absl::StrCat(": ", quoted);
  if (!ended_why.empty()) {
    r.message = absl::StrCat("command ", cmd, " ", ended_why, tail);
    return r;
  }
  if (WIFEXITED(status)) {
    int code = WEXITSTATUS(status);
    r.healthy = code == 0;
    if (code == shim::kEnterFailedExit) {
      r.message = absl::StrCat("command ", cmd, " could not enter the task", tail);
    } else {
      r.message = absl::StrCat("command ", cmd, " exited with code ", code, tail);
    }
  } else if (WIFSIGNALED(status)) {
    r.message = absl::StrCat("command ", cmd, " killed by ", SignalName(WTERMSIG(status)), tail);
  }
  return r;
}

}  // namespace herd::agent
