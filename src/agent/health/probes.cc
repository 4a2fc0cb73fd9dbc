#include "agent/health/probes.h"

#include <arpa/inet.h>
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

ProbeResult ProbeHttp(int32_t port, const std::string& path_in, int64_t timeout_ms, int cancel_fd) {
  const int64_t deadline = SteadyNowMs() + timeout_ms;
  const std::string path = path_in.empty() ? "/" : (path_in[0] == '/' ? path_in : "/" + path_in);
  const std::string what = absl::StrCat("GET ", path);
  ProbeResult r;
  Fd fd = Connect(port, deadline, cancel_fd, timeout_ms, &r.message);
  if (!fd.valid()) {
    r.message = absl::StrCat(what, ": ", r.message);
    return r;
  }
  const std::string request = absl::StrCat("GET ", path, " HTTP/1.0\r\nHost: 127.0.0.1:", port,
                                           "\r\nUser-Agent: herd-health\r\nConnection: close\r\n\r\n");
  size_t sent = 0;
  auto fail = [&](absl::string_view why) {
    Abort(fd);
    r.message = absl::StrCat(what, " on port ", port, ": ", why);
    return r;
  };
  auto waited = [&](short events) -> std::string {
    switch (WaitFd(fd.get(), events, deadline, cancel_fd)) {
      case Wait::kReady:
        return "";
      case Wait::kTimeout:
        return absl::StrCat("timed out after ", timeout_ms, "ms");
      case Wait::kCancelled:
        return "cancelled";
      case Wait::kError:
        return absl::StrCat("poll: ", strerror(errno));
    }
    return "";
  };
  while (sent < request.size()) {
    ssize_t n = send(fd.get(), request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n > 0) {
      sent += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno != EAGAIN && errno != EINTR) return fail(absl::StrCat("send: ", strerror(errno)));
    if (std::string e = waited(POLLOUT); !e.empty()) return fail(e);
  }
  // The status line is all we need.
  std::string response;
  while (response.find('\n') == std::string::npos && response.size() < 4096) {
    char buf[1024];
    ssize_t n = recv(fd.get(), buf, sizeof(buf), 0);
    if (n > 0) {
      response.append(buf, static_cast<size_t>(n));
      continue;
    }
    if (n == 0) break;  // closed
    if (errno != EAGAIN && errno != EINTR) return fail(absl::StrCat("recv: ", strerror(errno)));
    if (std::string e = waited(POLLIN); !e.empty()) return fail(e);
  }
  std::string line = response.substr(0, response.find('\n'));
  if (!line.empty() && line.back() == '\r') line.pop_back();
  // "HTTP/1.1 200 OK"
  std::vector<absl::string_view> f = absl::StrSplit(line, absl::MaxSplits(' ', 2));
  int status = 0;
  if (f.size() < 2 || !absl::StartsWith(f[0], "HTTP/") || !absl::SimpleAtoi(f[1], &status)) {
    return fail(response.empty() ? "connection closed without a response"
                                 : absl::StrCat("not an HTTP response: \"", Quote(line), "\""));
  }
  Abort(fd);
  r.healthy = status < 400;
  r.message = absl::StrCat("HTTP ", status, " from ", what, " on port ", port);
  return r;
}

ProbeResult ProbeCommand(const InRunOptions& options, int64_t timeout_ms, int cancel_fd) {
  const int64_t deadline = SteadyNowMs() + timeout_ms;
  ProbeResult r;
  absl::StatusOr<InRunProcess> spawned = SpawnInRun(options);
  if (!spawned.ok()) {
    r.message = absl::StrCat("cannot run ", options.argv.empty() ? "" : options.argv[0], ": ",
                             spawned.status().message());
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
