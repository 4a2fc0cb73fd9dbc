// Agent.Exec: `herd exec`, a command run inside a task's cgroups,
// namespaces, root and user (agent/exec/spawn_in_run.h), its output streamed
// back as it comes and its exit status last.
#pragma once

#include <grpcpp/grpcpp.h>
#include <grpcpp/support/sync_stream.h>

#include <string>

#include "agent/server/revocations.h"
#include "agent/supervisor/supervisor.h"
#include "herd/v1/agent.pb.h"

namespace herd::agent {

// Commands without a timeout_ms are killed after this long.
inline constexpr int64_t kDefaultExecTimeoutMs = 3600'000;

// `stream` (null for the master's own calls): once its user is revoked the
// command is killed and the call ends with PERMISSION_DENIED.
grpc::Status ServeExec(const Supervisor& sup, const std::string& shim_path, grpc::ServerContext* ctx,
                       const v1::ExecRequest& req, grpc::ServerWriter<v1::ExecOutput>* writer,
                       const Revocations::Stream* stream = nullptr);

}  // namespace herd::agent
