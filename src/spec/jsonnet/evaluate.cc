#include "spec/jsonnet/evaluate.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <sstream>

extern "C" {
#include <libjsonnet.h>
}

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/clock.h"

namespace herd::spec::jsonnet {
namespace {

// Stack frames printed for a runtime error; enough to find the call site.
constexpr unsigned kMaxTrace = 20;
constexpr unsigned kMaxStack = 500;

struct ImportContext {
  std::vector<std::string> roots;  // real paths of the directories imports may come from
  JsonnetVm* vm = nullptr;
};

char* Copy(JsonnetVm* vm, const std::string& s) {
  char* out = jsonnet_realloc(vm, nullptr, s.size() + 1);
  std::memcpy(out, s.c_str(), s.size() + 1);
  return out;
}

std::string RealDir(const std::string& path) {
  char buf[PATH_MAX];
  return realpath(path.c_str(), buf) != nullptr ? std::string(buf) : std::string();
}

// Only files whose real path lies under an allowed directory; refused by
// name before anything is read.
char* Import(void* raw, const char* base, const char* rel, char** found_here, int* success) {
  auto* ctx = static_cast<ImportContext*>(raw);
  *success = 0;
  std::string wanted = rel[0] == '/' ? std::string(rel) : absl::StrCat(base, rel);
  char real[PATH_MAX];
  bool inside = false;
  if (realpath(wanted.c_str(), real) != nullptr) {
    for (const std::string& root : ctx->roots) {
      if (!root.empty() && absl::StartsWith(real, absl::StrCat(root, root == "/" ? "" : "/"))) inside = true;
    }
  }
  if (!inside) {
    return Copy(ctx->vm, absl::StrCat("imports are allowed only beside the spec (or in its subdirectories); ", rel,
                                      " is not"));
  }
  std::ifstream in(real, std::ios::binary);
  if (!in) return Copy(ctx->vm, absl::StrCat("cannot read ", rel, ": ", std::strerror(errno)));
  std::stringstream buf;
  buf << in.rdbuf();
  *found_here = Copy(ctx->vm, real);
  *success = 1;
  return Copy(ctx->vm, buf.str());
}

// In the child: evaluates and writes "0"+JSON or "1"+error to `fd`.
void Child(int fd, const Limits& limits, const std::string& dir, const std::string& file,
           const std::string* snippet) {
  struct rlimit mem = {static_cast<rlim_t>(limits.memory_bytes), static_cast<rlim_t>(limits.memory_bytes)};
  setrlimit(RLIMIT_AS, &mem);
  struct rlimit cpu = {static_cast<rlim_t>(limits.cpu_seconds), static_cast<rlim_t>(limits.cpu_seconds + 1)};
  setrlimit(RLIMIT_CPU, &cpu);
  ImportContext ctx;
  ctx.roots.push_back(RealDir(dir));
  for (const std::string& d : limits.import_dirs) ctx.roots.push_back(RealDir(d));
  JsonnetVm* vm = jsonnet_make();
  ctx.vm = vm;
  jsonnet_max_trace(vm, kMaxTrace);
  jsonnet_max_stack(vm, kMaxStack);
  jsonnet_import_callback(vm, &Import, &ctx);
  int error = 0;
  char* out = snippet ? jsonnet_evaluate_snippet(vm, file.c_str(), snippet->c_str(), &error)
                      : jsonnet_evaluate_file(vm, file.c_str(), &error);
  std::string text = absl::StrCat(error ? "1" : "0", out ? out : "");
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = write(fd, text.data() + done, text.size() - done);
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  _exit(0);
}

absl::StatusOr<std::string> Run(const Limits& limits, const std::string& dir, const std::string& file,
                                const std::string* snippet) {
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) return absl::InternalError(absl::StrCat("pipe: ", std::strerror(errno)));
  pid_t pid = fork();
  if (pid < 0) {
    close(p[0]);
    close(p[1]);
    return absl::InternalError(absl::StrCat("fork: ", std::strerror(errno)));
  }
  if (pid == 0) {
    close(p[0]);
    Child(p[1], limits, dir, file, snippet);
  }
  close(p[1]);
  std::string got;
  bool too_big = false, timed_out = false;
  const int64_t deadline = SteadyNowMs() + limits.wall_ms;
  char buf[65536];
  while (true) {
    const int64_t left = deadline - SteadyNowMs();
    if (left <= 0) {
      timed_out = true;
      break;
    }
    struct pollfd pfd = {p[0], POLLIN, 0};
    int r = poll(&pfd, 1, static_cast<int>(std::min<int64_t>(left, 1000)));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) continue;
    ssize_t n = read(p[0], buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got.append(buf, static_cast<size_t>(n));
    if (static_cast<int64_t>(got.size()) > limits.output_bytes + 1) {
      too_big = true;
      break;
    }
  }
  close(p[0]);
  if (timed_out || too_big) kill(pid, SIGKILL);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  const std::string& what = file;
  if (timed_out) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": Jsonnet evaluation took longer than ", limits.wall_ms / 1000, " s; stopped"));
  }
  if (too_big) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": Jsonnet evaluation produced more than ", limits.output_bytes >> 20, " MiB; stopped"));
  }
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    if (sig == SIGXCPU || sig == SIGKILL) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": Jsonnet evaluation used more than ",
                                                     limits.cpu_seconds, " s of CPU; stopped"));
    }
    // Out of memory shows as an abort (std::bad_alloc) or a fault.
    return absl::InvalidArgumentError(absl::StrCat(what, ": Jsonnet evaluation ran out of its ",
                                                   limits.memory_bytes >> 20, " MiB of memory (or crashed: ",
                                                   strsignal(sig), ")"));
  }
  if (got.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": Jsonnet evaluation ended without a result (out of its ",
                                                   limits.memory_bytes >> 20, " MiB of memory?)"));
  }
  if (got[0] == '1') {
    return absl::InvalidArgumentError(std::string(absl::StripTrailingAsciiWhitespace(got.substr(1))));
  }
  return got.substr(1);
}

std::string DirOf(const std::string& path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

}  // namespace

absl::StatusOr<std::string> EvaluateFile(const std::string& path, const Limits& limits) {
  return Run(limits, DirOf(path), path, nullptr);
}

absl::StatusOr<std::string> EvaluateSnippet(absl::string_view code, absl::string_view source_name,
                                            const Limits& limits) {
  const std::string snippet(code);
  return Run(limits, DirOf(std::string(source_name)), std::string(source_name), &snippet);
}

}  // namespace herd::spec::jsonnet
