// herd runs JOB [--json]: a scheduled job's schedule, its next due time and
// its last runs (docs/batch.md).
#include <cinttypes>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "cli/commands/commands.h"
#include "cli/render/render.h"

namespace herd::cli {
namespace {

std::string OutcomeText(v1::ScheduledRun::Outcome o) {
  switch (o) {
    case v1::ScheduledRun::STARTED:
      return "live";
    case v1::ScheduledRun::SUCCEEDED:
      return "succeeded";
    case v1::ScheduledRun::FAILED:
      return "failed";
    case v1::ScheduledRun::KILLED:
      return "killed";
    case v1::ScheduledRun::SKIPPED:
      return "skipped";
    default:
      return "?";
  }
}

std::string ConcurrencyText(v1::Concurrency c) {
  switch (c) {
    case v1::ALLOW:
      return "allow";
    case v1::REPLACE:
      return "replace";
    default:
      return "forbid";
  }
}

}  // namespace

void AddRuns(CLI::App& app, CommandContext& ctx) {
  auto* cmd = app.add_subcommand(
      "runs", "A scheduled job's schedule, next due time and last 20 runs: due, started, job, outcome, why");
  auto job = std::make_shared<std::string>();
  cmd->add_option("job", *job, "JOB or USER/JOB (a job submitted with schedule:)")->required();
  cmd->add_flag("--json", ctx.flags.json, "Print the job (a Job, with runs and next_due_ms) as JSON");
  cmd->callback([&ctx, job] {
    Client client(ctx.flags);
    v1::GetJobRequest req;
    req.set_job(*job);
    v1::GetJobResponse resp;
    auto rctx = client.Context();
    grpc::Status st = client.stub().GetJob(rctx.get(), req, &resp);
    if (!st.ok()) {
      ctx.exit_code = Fail(client.Error(st));
      return;
    }
    const v1::Job& j = resp.job();
    if (j.spec().schedule().empty()) {
      ctx.exit_code = Fail(absl::FailedPreconditionError(
          absl::StrCat("job ", j.id(), " is not a scheduled job (it has no schedule:)",
                       j.scheduled_by().empty() ? "" : absl::StrCat("; it is a run of ", j.scheduled_by()))));
      return;
    }
    if (ctx.flags.json) {
      std::printf("%s\n", ToJson(j).c_str());
      return;
    }
    // Times in the job's own zone (the master checked it loads; UTC if not here).
    absl::TimeZone zone = absl::UTCTimeZone();
    if (!j.spec().time_zone().empty()) absl::LoadTimeZone(j.spec().time_zone(), &zone);
    auto when = [&](int64_t ms) { return absl::FormatTime("%Y-%m-%d %H:%M %Z", absl::FromUnixMillis(ms), zone); };
    const int64_t now = NowMs();
    std::printf("%s: schedule \"%s\" in %s, concurrency %s\n", j.id().c_str(), j.spec().schedule().c_str(),
                j.spec().time_zone().empty() ? "UTC" : j.spec().time_zone().c_str(),
                ConcurrencyText(j.spec().concurrency()).c_str());
    if (j.state() == v1::Job::DEAD) {
      std::printf("dead (%s): no more runs\n", j.last_event().reason().c_str());
    } else if (j.next_due_ms() > 0) {
      std::printf("next run:   %s (in %s)\n", when(j.next_due_ms()).c_str(),
                  j.next_due_ms() > now ? Age(now, j.next_due_ms()).c_str() : "0s");
    } else {
      std::printf("next run:   none (the schedule names no time in the next 5 years)\n");
    }
    if (j.runs().empty()) {
      std::printf("no runs yet\n");
      return;
    }
    Table t({"DUE", "STARTED", "RUN", "OUTCOME", "ENDED", "WHY"});
    for (const v1::ScheduledRun& r : j.runs()) {
      t.Add({when(r.due_ms()), absl::StrCat(Age(r.time_ms(), now), " ago"), r.job().empty() ? "-" : r.job(),
             OutcomeText(r.outcome()), r.end_ms() > 0 ? absl::StrCat(Age(r.end_ms(), now), " ago") : "-",
             r.message().empty() ? "-" : r.message()});
    }
    std::printf("%s", t.ToString().c_str());
  });
}

}  // namespace herd::cli
