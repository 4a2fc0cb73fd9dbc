#include "agent/server/exec.h"

#include "absl/strings/str_cat.h"
#include "agent/exec/spawn_in_run.h"
#include "base/log.h"
#include "rpc/rpc.h"

namespace herd::agent {

grpc::Status ServeExec(const Supervisor& sup, const std::string& shim_path, grpc::ServerContext* ctx,
                       const v1::ExecRequest& req, grpc::ServerWriter<v1::ExecOutput>* writer,
                       const Revocations::Stream* stream) {
  if (req.argv().empty()) return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "exec needs a command");
  absl::StatusOr<ProcessId> task = sup.TaskOf(req.run_id());
  if (!task.ok()) return rpc::ToGrpc(task.status());
  InRunOptions o;
  o.shim_path = shim_path;
  o.task = *task;
  o.argv.assign(req.argv().begin(), req.argv().end());
  for (const auto& [k, v] : req.env()) o.env[k] = v;
  HERD_LOG_INFO("exec in run {} (task {}): {}", req.run_id(), task->pid, o.argv[0]);
  bool client_gone = false;
  absl::StatusOr<InRunResult> r = RunInRun(
      o, req.timeout_ms() > 0 ? req.timeout_ms() : kDefaultExecTimeoutMs,
      [&](bool is_stderr, absl::string_view data) {
        v1::ExecOutput out;
        if (is_stderr) {
          out.set_stderr(data.data(), data.size());
        } else {
          out.set_stdout(data.data(), data.size());
        }
        if (!writer->Write(out)) client_gone = true;
        return !client_gone;
      },
      [&] { return !ctx->IsCancelled() && !(stream != nullptr && stream->revoked()); });
  if (!r.ok()) return rpc::ToGrpc(r.status());
  if (stream != nullptr && stream->revoked()) {
    HERD_LOG_INFO("exec in run {} ended: {}", req.run_id(), stream->Why());
    return grpc::Status(grpc::StatusCode::PERMISSION_DENIED, stream->Why());
  }
  if (r->cancelled || client_gone) return grpc::Status(grpc::StatusCode::CANCELLED, "the client went away");
  v1::ExecOutput last;
  last.set_exited(r->exited);
  last.set_exit_code(r->exit_code);
  last.set_signal(r->signal);
  last.set_timed_out(r->timed_out);
  writer->Write(last);
  return grpc::Status::OK;
}

}  // namespace herd::agent
