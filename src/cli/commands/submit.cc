// herd submit FILE...: parse and validate job specs locally (file:line
// errors, exit 2, nothing sent), then submit them all in one request: new
// jobs are created, live ones whose spec changed are updated. herd diff
// FILE... sends the same request as a dry run and prints what it would do.
#include <random>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "cli/commands/commands.h"
#include "cli/render/render.h"
#include "spec/spec.h"

namespace herd::cli {
namespace {

std::string NewRequestId() {
  std::random_device rd;
  return absl::StrFormat("cli-%016x%016x", (static_cast<uint64_t>(rd()) << 32) | rd(),
                         (static_cast<uint64_t>(rd()) << 32) | rd());
}

enum class Mode { kSubmit, kDryRun, kDiff };

int RunSubmit(CommandContext& ctx, const std::vector<std::string>& files, Mode mode, std::string request_id) {
  const bool dry_run = mode != Mode::kSubmit;
  Client client(ctx.flags);
  spec::ParseOptions po;
  po.default_user = client.user();
  v1::SubmitRequest req;
  std::vector<std::string> errors;
  auto parse_all = [&] {
    req.clear_jobs();
    errors.clear();
    for (const std::string& f : files) {
      auto jobs = spec::ParseFile(f, po);
      if (!jobs.ok()) {
        errors.emplace_back(jobs.status().message());
        continue;
      }
      for (auto& j : *jobs) *req.add_jobs() = std::move(j);
    }
  };
  parse_all();
  // Jobs named in after: must exist, or come in this submit: asked of the
  // master now, so a mistake is reported at its line (read again with the
  // check; the master checks once more when the jobs arrive).
  bool waits = false;
  for (const v1::JobSpec& j : req.jobs()) waits = waits || !j.after().empty();
  if (errors.empty() && waits) {
    absl::flat_hash_set<std::string> submitted;
    for (const v1::JobSpec& j : req.jobs()) submitted.insert(absl::StrCat(j.user(), "/", j.name()));
    po.check_after = [&](const std::string& id) -> std::string {
      if (submitted.contains(id)) return "";
      v1::GetJobRequest get;
      get.set_job(id);
      v1::GetJobResponse got;
      auto gctx = client.Context();
      grpc::Status st = client.stub().GetJob(gctx.get(), get, &got);
      if (st.error_code() == grpc::StatusCode::NOT_FOUND) {
        return absl::StrCat("there is no job ", id, " (herd jobs --all lists them; a job named here must exist "
                            "or be submitted with this one)");
      }
      if (!st.ok()) return "";  // unreachable master: submitting reports it
      if (!got.job().spec().schedule().empty()) {
        return absl::StrCat(id, " is a scheduled job; wait for one of its runs instead");
      }
      return "";
    };
    parse_all();
  }
  if (!errors.empty()) {
    return Fail(absl::InvalidArgumentError(absl::StrCat("invalid job spec; nothing was ",
                                                        mode == Mode::kDiff ? "compared\n" : "submitted\n",
                                                        absl::StrJoin(errors, "\n"))));
  }
  req.set_request_id(request_id.empty() ? NewRequestId() : request_id);
  req.set_dry_run(dry_run);
  v1::SubmitResponse resp;
  auto rctx = client.Context();
  grpc::Status st = client.stub().Submit(rctx.get(), req, &resp);
  if (!st.ok()) return Fail(client.Error(st));
  if (ctx.flags.json) {
    std::printf("%s\n", ToJson(resp).c_str());
    return 0;
  }
  for (const auto& r : resp.results()) {
    if (mode == Mode::kDiff) {
      std::printf("%s", DiffText(r.diff()).c_str());
    } else if (dry_run) {
      std::printf("%s: valid and within quota (%d tasks); dry run, nothing submitted\n", r.job().c_str(), r.tasks());
      if (r.updated()) std::printf("%s", DiffText(r.diff()).c_str());
    } else if (r.updated()) {
      std::printf("updated %s to version %lld (revision %lld)\n%s", r.job().c_str(),
                  static_cast<long long>(r.diff().to_version()), static_cast<long long>(resp.revision()),
                  DiffText(r.diff()).c_str());
    } else if (r.created()) {
      std::printf("submitted %s: %d task%s (revision %lld)\n", r.job().c_str(), r.tasks(), r.tasks() == 1 ? "" : "s",
                  static_cast<long long>(resp.revision()));
    } else {
      std::printf("%s unchanged: an identical job is already there\n", r.job().c_str());
    }
  }
  return 0;
}

}  // namespace

void AddSubmit(CLI::App& app, CommandContext& ctx) {
  auto* cmd = app.add_subcommand("submit", "Submit jobs from spec files (YAML, JSON or Jsonnet)");
  auto files = std::make_shared<std::vector<std::string>>();
  auto dry = std::make_shared<bool>(false);
  auto rid = std::make_shared<std::string>();
  cmd->add_option("files", *files, "Job spec files")->required();
  cmd->add_flag("--dry-run", *dry, "Validate and check quota, submit nothing");
  cmd->add_option("--request-id", *rid, "Idempotency key: resubmitting the same id changes nothing");
  cmd->add_flag("--json", ctx.flags.json, "Print the response as JSON");
  cmd->callback([&ctx, files, dry, rid] {
    ctx.exit_code = RunSubmit(ctx, *files, *dry ? Mode::kDryRun : Mode::kSubmit, *rid);
  });
}

void AddDiff(CLI::App& app, CommandContext& ctx) {
  auto* cmd = app.add_subcommand(
      "diff", "Show what submitting spec files would change: fields, and which tasks restart, move, are added or "
              "removed; changes nothing");
  auto files = std::make_shared<std::vector<std::string>>();
  cmd->add_option("files", *files, "Job spec files")->required();
  cmd->add_flag("--json", ctx.flags.json, "Print the (dry-run) SubmitResponse as JSON; each result has its diff");
  cmd->callback([&ctx, files] { ctx.exit_code = RunSubmit(ctx, *files, Mode::kDiff, ""); });
}

}  // namespace herd::cli
