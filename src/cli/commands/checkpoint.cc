// herd checkpoint export FILE [--revision R]: the cell's state (snapshot +
// change log) to a file the simulator can load; herd checkpoint show FILE
// [--revision R]: what a checkpoint holds as of a revision.
#include <fstream>

#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "cell/cell_state.h"
#include "cell/checkpoint_codec.h"
#include "cli/commands/commands.h"
#include "cli/render/render.h"

namespace herd::cli {
namespace {

absl::Status ReadCheckpointAt(const std::string& path, int64_t revision, cell::CellState* out,
                              v1::CheckpointHeader* header) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  HERD_ASSIGN_OR_RETURN(cell::Checkpoint cp, cell::ReadCheckpoint(in, path));
  *header = cp.header;
  HERD_ASSIGN_OR_RETURN(*out, cell::CellState::FromSnapshot(cp.snapshot));
  for (const v1::Mutation& m : cp.log) {
    if (revision > 0 && m.revision() > revision) break;
    if (absl::Status st = out->Apply(m); !st.ok()) {
      return absl::DataLossError(absl::StrCat(path, ": revision ", m.revision(), ": ", st.message()));
    }
  }
  return absl::OkStatus();
}

}  // namespace

void AddCheckpoint(CLI::App& app, CommandContext& ctx) {
  auto* cmd = app.add_subcommand("checkpoint", "Export or inspect a checkpoint (snapshot + change log)");
  cmd->require_subcommand(1);
  auto file = std::make_shared<std::string>();
  auto rev = std::make_shared<int64_t>(0);
  auto* exp = cmd->add_subcommand("export", "Write the cell's checkpoint to FILE");
  exp->add_option("file", *file, "Output file")->required();
  exp->add_option("--revision", *rev, "Up to this revision (default: the newest)");
  exp->callback([&ctx, file, rev] {
    Client client(ctx.flags);
    v1::ExportCheckpointRequest req;
    req.set_up_to_revision(*rev);
    auto rctx = client.Context(600'000);
    auto reader = client.stub().ExportCheckpoint(rctx.get(), req);
    std::string tmp = *file + ".tmp";
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) {
      ctx.exit_code = Fail(absl::InvalidArgumentError(absl::StrCat("cannot write ", tmp)));
      return;
    }
    v1::CheckpointRecord rec;
    int64_t mutations = 0;
    v1::CheckpointHeader header;
    cell::CheckpointWriter writer(&out);
    absl::Status wst;
    while (reader->Read(&rec)) {
      if (rec.has_header()) header = rec.header();
      if (rec.has_mutation()) ++mutations;
      if (wst.ok()) wst = writer.Write(rec);
    }
    grpc::Status st = reader->Finish();
    out.close();
    if (st.ok() && (!wst.ok() || !out)) st = grpc::Status(grpc::StatusCode::DATA_LOSS, absl::StrCat("cannot write ", tmp));
    if (!st.ok()) {
      std::remove(tmp.c_str());
      ctx.exit_code = Fail(client.Error(st));
      return;
    }
    std::rename(tmp.c_str(), file->c_str());
    std::printf("wrote %s: snapshot at revision %lld + %lld mutations, up to revision %lld\n", file->c_str(),
                static_cast<long long>(header.snapshot_revision()), static_cast<long long>(mutations),
                static_cast<long long>(header.last_revision()));
  });
  auto* show = cmd->add_subcommand("show", "Summarise a checkpoint file as of a revision");
  show->add_option("file", *file, "Checkpoint file")->required();
  show->add_option("--revision", *rev, "As of this revision (default: its last)");
  show->add_flag("--json", ctx.flags.json, "Print the state (a CellSnapshot) as JSON");
  show->callback([&ctx, file, rev] {
    cell::CellState state;
    v1::CheckpointHeader header;
    if (absl::Status st = ReadCheckpointAt(*file, *rev, &state, &header); !st.ok()) {
      ctx.exit_code = Fail(st);
      return;
    }
    if (ctx.flags.json) {
      std::printf("%s\n", ToJson(state.ToSnapshot()).c_str());
      return;
    }
    std::printf("cell %s at revision %lld (file holds %lld..%lld)\n", state.cell_name().c_str(),
                static_cast<long long>(state.revision()), static_cast<long long>(header.snapshot_revision()),
                static_cast<long long>(header.last_revision()));
    std::printf("machines: %zu\njobs: %zu\ntasks: %lld running, %lld pending, %lld dead\n", state.machines().size(),
                state.jobs().size(), static_cast<long long>(state.task_count(v1::Task::RUNNING)),
                static_cast<long long>(state.task_count(v1::Task::PENDING)),
                static_cast<long long>(state.task_count(v1::Task::DEAD)));
  });
}

void AddUserCommands(CLI::App& app, CommandContext& ctx) {
  app.add_option("--master", ctx.flags.master, "Master address HOST:PORT (default: $HERD_MASTER or 127.0.0.1:7070)");
  app.add_option("--credentials", ctx.flags.credentials,
                 "Credential file (default: $HERD_CREDENTIALS, else the one 'herd up' wrote)");
  app.add_option("--user", ctx.flags.user,
                 "Act on behalf of this user (needs the run-as capability; default: $HERD_USER, else yourself)");
  AddSubmit(app, ctx);
  AddDiff(app, ctx);
  AddScale(app, ctx);
  AddRolloutCommands(app, ctx);
  AddKill(app, ctx);
  AddRuns(app, ctx);
  AddJobs(app, ctx);
  AddTasks(app, ctx);
  AddStatus(app, ctx);
  AddWhy(app, ctx);
  AddResolve(app, ctx);
  AddMachines(app, ctx);
  AddDrain(app, ctx);
  AddLogs(app, ctx);
  AddExec(app, ctx);
  AddQuota(app, ctx);
  AddCheckpoint(app, ctx);
  AddCell(app, ctx);
  AddQuery(app, ctx);
  AddAlerts(app, ctx);
  AddFrameworks(app, ctx);
  AddUi(app, ctx);
  AddCredentialCommands(app, ctx);
  AddTokenCommands(app, ctx);
}

}  // namespace herd::cli
