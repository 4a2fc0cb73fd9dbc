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

#include "agent/supervisor/extension.h"

namespace herd::agent {

// The host name a task with its own uts namespace gets.
std::string TaskHostname(const v1::TaskRun& spec);

class IsolationExtension : public Extension {
 public:
  absl::string_view name() const override { return "isolation"; }
  absl::Status Prepare(const RunView& run, AttemptSetup* setup) override;
};

}  // namespace herd::agent
