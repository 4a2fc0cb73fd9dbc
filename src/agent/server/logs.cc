#include "agent/server/logs.h"

#include <algorithm>
#include <chrono>
#include <fstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "rpc/rpc.h"

namespace herd::agent {

grpc::Status ServeLogs(const Supervisor& sup, grpc::ServerContext* ctx, const v1::ReadLogsRequest& req,
                       grpc::ServerWriter<v1::LogChunk>* writer) {
  auto path = sup.LogPath(req.run_id(), req.stderr());
  if (!path.ok()) return rpc::ToGrpc(path.status());
  std::ifstream in(*path, std::ios::binary);
  if (!in) return grpc::Status(grpc::StatusCode::NOT_FOUND, absl::StrCat("cannot open ", *path));
  in.seekg(0, std::ios::end);
  std::streamoff size = in.tellg();
  std::streamoff start = req.tail_bytes() > 0 ? std::max<std::streamoff>(0, size - req.tail_bytes()) : 0;
  in.seekg(start);
  std::string buf(64 << 10, '\0');
  while (!ctx->IsCancelled()) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    std::streamsize n = in.gcount();
    if (n > 0) {
      v1::LogChunk chunk;
      chunk.set_data(buf.data(), static_cast<size_t>(n));
      if (!writer->Write(chunk)) break;
      continue;
    }
    if (!req.follow()) break;
    in.clear();
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  return grpc::Status::OK;
}

}  // namespace herd::agent
