// herd logs JOB/INDEX [--stderr] [-f]: a task's output, read through the
// agent of the machine it runs (or last ran) on.
#include "absl/strings/str_cat.h"
#include "base/ids.h"
#include "cli/commands/commands.h"
#include "rpc/rpc.h"

namespace herd::cli {

std::optional<TaskLocation> LocateTask(CommandContext& ctx, Client& client, const std::string& task,
                                       v1::AccessAction action, absl::string_view never_ran) {
  auto ref = ParseTaskRef(task);
  if (!ref.ok()) {
    ctx.exit_code = Fail(ref.status());
    return std::nullopt;
  }
  v1::GrantAccessRequest req;
  req.set_job(ref->job.user.empty() ? ref->job.name : ref->job.Id());
  req.set_index(ref->index);
  req.set_action(action);
  v1::GrantAccessResponse granted;
  auto rctx = client.Context();
  grpc::Status st = client.stub().GrantAccess(rctx.get(), req, &granted);
  if (!st.ok()) {
    ctx.exit_code = Fail(client.Error(st));
    return std::nullopt;
  }
  TaskLocation where;
  where.response = std::move(*granted.mutable_task());
  where.grant = std::move(*granted.mutable_grant());
  const v1::GetTaskResponse& resp = where.response;
  if (resp.run_id().empty() || resp.machine().address().empty()) {
    ctx.exit_code = Fail(absl::NotFoundError(absl::StrCat("task ", resp.task().job(), "/", resp.task().index(),
                                                          " has not run yet, ", never_ran, " (it is ",
                                                          v1::Task::State_Name(resp.task().state()), ")")));
    return std::nullopt;
  }
  where.agent = v1::Agent::NewStub(
      rpc::Channel(resp.machine().address(), client.credential(), rpc::MachineIdentity(resp.machine().name())));
  return where;
}

absl::Status AgentError(const TaskLocation& where, const grpc::Status& st, absl::string_view doing) {
  if (st.error_code() == grpc::StatusCode::UNAVAILABLE) {
    return absl::UnavailableError(absl::StrCat("cannot reach the agent of machine ", where.response.machine().name(),
                                               " at ", where.response.machine().address(), " to ", doing));
  }
  return rpc::FromGrpc(st);
}

void AddLogs(CLI::App& app, CommandContext& ctx) {
  auto* cmd = app.add_subcommand("logs", "Print a task's stdout (or stderr); -f follows");
  auto task = std::make_shared<std::string>();
  auto err = std::make_shared<bool>(false);
  auto follow = std::make_shared<bool>(false);
  auto tail = std::make_shared<int64_t>(0);
  cmd->add_option("task", *task, "JOB/INDEX, e.g. hello/0 or alice/hello/0")->required();
  cmd->add_flag("--stderr", *err, "Show stderr instead of stdout");
  cmd->add_flag("-f,--follow", *follow, "Keep printing new output");
  cmd->add_option("--tail", *tail, "Only the last N bytes");
  cmd->callback([&ctx, task, err, follow, tail] {
    Client client(ctx.flags);
    std::optional<TaskLocation> where = LocateTask(ctx, client, *task, v1::READ_LOGS, "so it has no logs");
    if (!where) return;
    const v1::GetTaskResponse& resp = where->response;
    v1::Agent::Stub* agent = where->agent.get();
    v1::ReadLogsRequest lr;
    lr.set_run_id(resp.run_id());
    lr.set_stderr(*err);
    lr.set_follow(*follow);
    lr.set_tail_bytes(*tail);
    *lr.mutable_grant() = where->grant;
    auto actx = rpc::Context("", *follow ? 0 : 30'000);
    auto reader = agent->ReadLogs(actx.get(), lr);
    v1::LogChunk chunk;
    while (reader->Read(&chunk)) {
      std::fwrite(chunk.data().data(), 1, chunk.data().size(), stdout);
      std::fflush(stdout);
    }
    grpc::Status rs = reader->Finish();
    if (!rs.ok()) ctx.exit_code = Fail(AgentError(*where, rs, "read the logs"));
  });
}

}  // namespace herd::cli
