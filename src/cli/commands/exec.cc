// herd exec JOB/INDEX [--timeout DURATION] -- CMD...: runs CMD inside the
// task's cgroups, namespaces, root and user, with its environment and in its
// sandbox (Borg's borgssh), through the agent of the machine it runs on.
// Prints the command's output as it comes and exits with its exit code
// (128+N if it was killed by signal N).
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "base/units.h"
#include "cli/commands/commands.h"
#include "rpc/rpc.h"

namespace herd::cli {

void AddExec(CLI::App& app, CommandContext& ctx) {
  auto* cmd = app.add_subcommand("exec", "Run a command inside a running task (its cgroups, namespaces, user)");
  auto task = std::make_shared<std::string>();
  auto argv = std::make_shared<std::vector<std::string>>();
  auto timeout = std::make_shared<std::string>();
  cmd->add_option("task", *task, "JOB/INDEX, e.g. hello/0 or alice/hello/0")->required();
  cmd->add_option("command", *argv, "The command and its arguments, after --")->required();
  cmd->add_option("--timeout", *timeout, "Kill the command after this long (e.g. 30s; default 1h)");
  cmd->footer("Example: herd exec web/0 -- cat /proc/self/cgroup");
  cmd->callback([&ctx, task, argv, timeout] {
    int64_t timeout_ms = 0;
    if (!timeout->empty()) {
      absl::StatusOr<int64_t> ms = ParseDurationMs(*timeout);
      if (!ms.ok()) {
        ctx.exit_code = Fail(absl::InvalidArgumentError(absl::StrCat("--timeout: ", ms.status().message())));
        return;
      }
      timeout_ms = *ms;
    }
    Client client(ctx.flags);
    std::optional<TaskLocation> where = LocateTask(ctx, client, *task, v1::EXEC, "so there is nothing to exec in");
    if (!where) return;
    const v1::GetTaskResponse& resp = where->response;
    const std::string name = absl::StrCat(resp.task().job(), "/", resp.task().index());
    if (resp.task().state() != v1::Task::RUNNING) {
      ctx.exit_code = Fail(absl::FailedPreconditionError(
          absl::StrCat("task ", name, " is not running (it is ", v1::Task::State_Name(resp.task().state()), ")")));
      return;
    }
    v1::ExecRequest req;
    req.set_run_id(resp.run_id());
    for (const std::string& a : *argv) req.add_argv(a);
    req.set_timeout_ms(timeout_ms);
    *req.mutable_grant() = where->grant;
    auto actx = rpc::Context("", 0);
    auto reader = where->agent->Exec(actx.get(), req);
    v1::ExecOutput out;
    bool ended = false;
    int code = 0;
    while (reader->Read(&out)) {
      if (!out.stdout().empty()) {
        std::fwrite(out.stdout().data(), 1, out.stdout().size(), stdout);
        std::fflush(stdout);
      }
      if (!out.stderr().empty()) {
        std::fwrite(out.stderr().data(), 1, out.stderr().size(), stderr);
        std::fflush(stderr);
      }
      if (out.exited() || out.signal() != 0) {
        ended = true;
        code = out.exited() ? out.exit_code() : 128 + out.signal();
        if (out.timed_out()) std::fprintf(stderr, "herd: exec in %s timed out; command killed\n", name.c_str());
      }
    }
    grpc::Status st = reader->Finish();
    if (!st.ok()) {
      absl::Status err = AgentError(*where, st, "exec in task " + name);
      if (absl::IsFailedPrecondition(err) || absl::IsNotFound(err)) {
        err = absl::Status(err.code(), absl::StrCat("task ", name, ": ", err.message()));
      }
      ctx.exit_code = Fail(err);
      return;
    }
    if (!ended) {
      ctx.exit_code = Fail(absl::UnavailableError("the agent ended the exec without an exit status"));
      return;
    }
    ctx.exit_code = code;
  });
}

}  // namespace herd::cli
