// IsolationExtension: a run's TaskRun.isolation, as herd-shim options.
//   namespaces          --namespaces --hostname N, N = "INDEX.JOB.USER" of the
//                       task (DNS-safe, at most 63 characters)
//   root_from_packages  --root RUN_DIR/root (built by PackagesExtension,
//                       which must come first) --bind SANDBOX sandbox
//                       --cwd /sandbox[/WORKDIR]; implies namespaces
//   user                --uid/--gid of the user (getpwnam on this machine;
//                       FAILED_PRECONDITION if there is none), and the
//                       sandbox (and workdir) is chowned to it
#pragma once

#include "agent/packages/task_users.h"
#include "agent/supervisor/extension.h"

namespace herd::agent {

// The host name a task with its own uts namespace gets.
std::string TaskHostname(const v1::TaskRun& spec);

// Runs every task as an unprivileged account: the machine account its
// spec names (the master allowed it), else its owner's uid from `users`
// (when the agent runs as root; without users or root, tasks run as the
// agent does).
class IsolationExtension : public Extension {
 public:
  explicit IsolationExtension(std::shared_ptr<TaskUsers> users = nullptr) : users_(std::move(users)) {}
  absl::string_view name() const override { return "isolation"; }
  absl::Status Prepare(const RunView& run, AttemptSetup* setup) override;

 private:
  std::shared_ptr<TaskUsers> users_;
};

}  // namespace herd::agent
