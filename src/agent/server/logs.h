// Agent.ReadLogs: a run's stdout or stderr, from its run directory.
#pragma once

#include <grpcpp/grpcpp.h>
#include <grpcpp/support/sync_stream.h>

#include "agent/server/revocations.h"
#include "agent/supervisor/supervisor.h"
#include "herd/v1/agent.pb.h"

namespace herd::agent {

// `stream` (null for the master's own calls): once its user is revoked the
// read ends with PERMISSION_DENIED.
grpc::Status ServeLogs(const Supervisor& sup, grpc::ServerContext* ctx, const v1::ReadLogsRequest& req,
                       grpc::ServerWriter<v1::LogChunk>* writer, const Revocations::Stream* stream = nullptr);

}  // namespace herd::agent
