#include "agent/packages/isolation_extension.h"

#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <string.h>
#include <unistd.h>

#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "agent/packages/packages_extension.h"
#include "agent/runtime/shim_protocol.h"
#include "base/errno_status.h"
#include "base/files.h"
#include "base/status.h"

namespace herd::agent {

std::string TaskHostname(const v1::TaskRun& spec) {
  // "alice/web" index 3 -> "3.web.alice", as a Borg task's BNS name reads.
  std::vector<std::string> parts = absl::StrSplit(spec.ref().job(), '/');
  std::string raw = absl::StrCat(spec.ref().index());
  for (auto it = parts.rbegin(); it != parts.rend(); ++it) absl::StrAppend(&raw, ".", *it);
  if (spec.ref().job().empty()) raw = spec.run_id();
  std::string out;
  for (char c : raw) {
    if (absl::ascii_isalnum(c) || c == '.' || c == '-') {
      out.push_back(absl::ascii_tolower(c));
    } else {
      out.push_back('-');
    }
  }
  if (out.size() > 63) out.resize(63);
  return out.empty() ? "task" : out;
}

absl::Status IsolationExtension::Prepare(const RunView& run, AttemptSetup* setup) {
  const v1::Isolation& iso = run.spec.isolation();
  const bool root = iso.root_from_packages();
  if (root && run.spec.packages().empty()) {
    return absl::InvalidArgumentError("isolation.root_from_packages needs packages to build the root from");
  }
  if (iso.seccomp() == "unconfined") setup->shim_args.push_back(shim::kOptUnconfined);  // granted by run-as-root
  if (iso.namespaces() || root) {
    setup->shim_args.insert(setup->shim_args.end(), {shim::kOptNamespaces, shim::kOptHostname, TaskHostname(run.spec)});
  }
  if (root) {
    const std::string& workdir = run.spec.workdir();
    std::string cwd = "/sandbox";
    if (!workdir.empty()) cwd = workdir[0] == '/' ? workdir : absl::StrCat("/sandbox/", workdir);
    setup->shim_args.insert(setup->shim_args.end(), {shim::kOptRoot, TaskRootOf(run.dir), shim::kOptBind,
                                                     run.dir.Sandbox(), "sandbox", shim::kOptCwd, cwd});
  }
  uint32_t uid = 0, gid = 0;
  std::string account;
  if (!iso.user().empty()) {
    struct passwd pw;
    struct passwd* found = nullptr;
    std::vector<char> buf(16384);
    int rc = getpwnam_r(iso.user().c_str(), &pw, buf.data(), buf.size(), &found);
    if (found == nullptr) {
      return absl::FailedPreconditionError(absl::StrCat("user ", iso.user(), " does not exist on this machine",
                                                        rc != 0 ? absl::StrCat(" (", strerror(rc), ")") : ""));
    }
    uid = pw.pw_uid;
    gid = pw.pw_gid;
    account = iso.user();
  } else if (users_ != nullptr && geteuid() == 0) {
    if (run.spec.user().empty()) return absl::InvalidArgumentError("the run names no user to run it as");
    absl::StatusOr<TaskAccount> a = users_->For(run.spec.user());
    if (!a.ok()) return a.status();
    uid = a->uid;
    gid = a->gid;
    account = absl::StrCat("uid ", uid, " (user ", run.spec.user(), ")");
  } else {
    return absl::OkStatus();  // the agent's own account (not root: nothing else is possible)
  }
  setup->shim_args.insert(setup->shim_args.end(),
                          {shim::kOptUid, absl::StrCat(uid), shim::kOptGid, absl::StrCat(gid)});
  // The task may write its sandbox (and its working directory in it). The
  // sandbox may hold what an earlier attempt left, a symlink where a
  // directory of the workdir was among it: each directory is opened beneath
  // the sandbox without following symlinks, then chowned through its
  // descriptor, so no chown lands outside.
  absl::StatusOr<Fd> dir = OpenDirectory(run.dir.Sandbox());
  if (!dir.ok()) return dir.status();
  auto chown_held = [&](const Fd& fd, absl::string_view what) -> absl::Status {
    if (fchown(fd.get(), uid, gid) != 0) return ErrnoToStatus(errno, absl::StrCat("chown ", what, " to ", account));
    return absl::OkStatus();
  };
  HERD_RETURN_IF_ERROR(chown_held(*dir, run.dir.Sandbox()));
  const std::string& workdir = run.spec.workdir();
  if (!workdir.empty() && workdir[0] != '/') {
    std::string walked;
    for (absl::string_view part : absl::StrSplit(workdir, '/', absl::SkipEmpty())) {
      if (part == ".") continue;
      absl::StrAppend(&walked, walked.empty() ? "" : "/", part);
      absl::StatusOr<Fd> next = OpenBeneath(dir->get(), part, O_RDONLY | O_DIRECTORY);
      if (!next.ok()) {
        if (absl::IsNotFound(next.status())) break;  // made by PrepareWorkdir; gone since
        return absl::FailedPreconditionError(absl::StrCat("workdir ", walked, ": ", next.status().message()));
      }
      HERD_RETURN_IF_ERROR(chown_held(*next, absl::StrCat("sandbox/", walked)));
      dir = std::move(next);
    }
  }
  return absl::OkStatus();
}

}  // namespace herd::agent
