#include "agent/server/logs.h"

#include <chrono>
#include <thread>

#include "absl/strings/str_cat.h"
#include "agent/supervisor/log_reader.h"
#include "rpc/rpc.h"

namespace herd::agent {
namespace {

constexpr size_t kChunkBytes = 64 << 10;
// How often a followed log is checked for new output.
constexpr auto kFollowPoll = std::chrono::milliseconds(200);

}  // namespace

grpc::Status ServeLogs(const Supervisor& sup, grpc::ServerContext* ctx, const v1::ReadLogsRequest& req,
                       grpc::ServerWriter<v1::LogChunk>* writer, const Revocations::Stream* stream) {
  auto path = sup.LogPath(req.run_id(), req.stderr());
  if (!path.ok()) return rpc::ToGrpc(path.status());
  // The stream and its rotated predecessors (stdout.K .. stdout.1), and
  // with follow the files that replace it as it rotates.
  absl::StatusOr<LogReader> reader = LogReader::Open(*path, req.tail_bytes());
  if (!reader.ok()) return rpc::ToGrpc(reader.status());
  std::string buf;
  while (!ctx->IsCancelled()) {
    if (stream != nullptr && stream->revoked()) return grpc::Status(grpc::StatusCode::PERMISSION_DENIED, stream->Why());
    buf.clear();
    absl::StatusOr<size_t> n = reader->Read(&buf, kChunkBytes);
    if (!n.ok()) return rpc::ToGrpc(n.status());
    if (*n > 0) {
      v1::LogChunk chunk;
      chunk.set_data(std::move(buf));
      if (!writer->Write(chunk)) break;
      continue;
    }
    if (!req.follow()) break;
    std::this_thread::sleep_for(kFollowPoll);
  }
  return grpc::Status::OK;
}

}  // namespace herd::agent
