#include "sim/core/fork_pool.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <map>

#include "absl/strings/str_cat.h"

namespace herd::sim {

absl::StatusOr<std::vector<std::string>> ForkMap(int n, int parallel, const std::function<std::string(int)>& fn) {
  std::vector<std::string> out(static_cast<size_t>(n));
  if (parallel <= 1) {
    for (int i = 0; i < n; ++i) out[static_cast<size_t>(i)] = fn(i);
    return out;
  }
  struct Child {
    int index;
    int fd;
    std::string data;
  };
  std::map<pid_t, Child> running;
  int next = 0;
  absl::Status failed;
  std::fflush(stdout);
  std::fflush(stderr);
  while ((next < n && failed.ok()) || !running.empty()) {
    while (next < n && failed.ok() && static_cast<int>(running.size()) < parallel) {
      int p[2];
      if (pipe(p) != 0) return absl::InternalError("pipe failed");
      pid_t pid = fork();
      if (pid < 0) return absl::InternalError("fork failed");
      if (pid == 0) {
        close(p[0]);
        std::string r = fn(next);
        size_t off = 0;
        while (off < r.size()) {
          ssize_t w = write(p[1], r.data() + off, r.size() - off);
          if (w <= 0) break;
          off += static_cast<size_t>(w);
        }
        close(p[1]);
        std::fflush(stdout);
        std::_Exit(off == r.size() ? 0 : 1);
      }
      close(p[1]);
      running[pid] = Child{next, p[0], ""};
      ++next;
    }
    // Drain whichever child has output or has finished.
    for (auto it = running.begin(); it != running.end();) {
      char buf[4096];
      ssize_t r = read(it->second.fd, buf, sizeof(buf));
      if (r > 0) {
        it->second.data.append(buf, static_cast<size_t>(r));
        continue;
      }
      close(it->second.fd);
      int status = 0;
      waitpid(it->first, &status, 0);
      if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0) && failed.ok()) {
        failed = absl::InternalError(absl::StrCat("run ", it->second.index, " failed (",
                                                  WIFSIGNALED(status) ? "signal " : "exit ",
                                                  WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status), ")"));
      }
      out[static_cast<size_t>(it->second.index)] = std::move(it->second.data);
      it = running.erase(it);
      break;  // start the next child before blocking on another
    }
  }
  if (!failed.ok()) return failed;
  return out;
}

}  // namespace herd::sim
