// herd status JOB: the spec in brief, then each task's state, machine and
// last transition with its reason, and why pending tasks are pending.
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/priority.h"
#include "base/units.h"
#include "cell/constraints.h"
#include "cli/commands/commands.h"
#include "cli/render/render.h"

namespace herd::cli {

std::string TaskTable(const google::protobuf::RepeatedPtrField<v1::Task>& tasks, int64_t now);

namespace {

std::string RestartText(const v1::RestartPolicy& r) {
  std::string mode = "on-failure";
  if (r.mode() == v1::RestartPolicy::ALWAYS) mode = "always";
  if (r.mode() == v1::RestartPolicy::NEVER) mode = "never";
  if (r.max_restarts() > 0) absl::StrAppend(&mode, " (at most ", r.max_restarts(), ")");
  return mode;
}

}  // namespace

void AddStatus(CLI::App& app, CommandContext& ctx) {
  auto* cmd = app.add_subcommand("status", "Show a job: spec summary, each task's state, machine and last transition");
  auto job = std::make_shared<std::string>();
  auto rev = std::make_shared<int64_t>(0);
  cmd->add_option("job", *job, "JOB or USER/JOB")->required();
  cmd->add_option("--at-revision", *rev, "The job as of this revision");
  cmd->add_flag("--json", ctx.flags.json, "Print the GetJobResponse as JSON");
  cmd->callback([&ctx, job, rev] {
    Client client(ctx.flags);
    v1::GetJobRequest req;
    req.set_job(*job);
    req.set_at_revision(*rev);
    v1::GetJobResponse resp;
    if (!CallMaster(ctx, client, &v1::Herd::Stub::GetJob, req, &resp)) return;
    const v1::Job& j = resp.job();
    const v1::JobSpec& s = j.spec();
    int64_t now = NowMs();
    std::string cmdline = absl::StrJoin(s.task().command(), " ");
    if (!s.task().args().empty()) absl::StrAppend(&cmdline, " ", absl::StrJoin(s.task().args(), " "));
    std::printf("job:        %s\n", j.id().c_str());
    std::printf("state:      %s (%d running, %d pending, %d dead)\n", v1::Job::State_Name(j.state()).c_str(),
                j.running(), j.pending(), j.dead());
    std::printf("priority:   %d (%s)\n", s.priority(), std::string(BandNameOf(s.priority())).c_str());
    int outdated = 0;
    for (const v1::Task& t : resp.tasks()) outdated += t.job_version() < j.version();
    std::printf("version:    %lld", static_cast<long long>(j.version()));
    if (j.version() > 1) std::printf(" (changed at revision %lld)", static_cast<long long>(j.version_revision()));
    if (outdated > 0) std::printf("; %d task%s still on an older version", outdated, outdated == 1 ? "" : "s");
    std::printf("\n");
    if (j.has_rollout()) std::printf("rollout:    %s\n", RolloutText(j.rollout()).c_str());
    if (!j.waiting_for().empty()) {
      std::printf("waiting:    for %s to finish (after:); its tasks are not placed until then\n",
                  absl::StrJoin(j.waiting_for(), ", ").c_str());
    } else if (!s.after().empty()) {
      std::printf("after:      %s\n", absl::StrJoin(s.after(), ", ").c_str());
    }
    if (!s.schedule().empty()) {
      std::printf("schedule:   \"%s\" in %s; %d run(s) kept (herd runs %s)\n", s.schedule().c_str(),
                  s.time_zone().empty() ? "UTC" : s.time_zone().c_str(), j.runs_size(), j.id().c_str());
    }
    if (!j.scheduled_by().empty()) std::printf("run of:     %s\n", j.scheduled_by().c_str());
    if (s.alloc_set()) {
      std::printf("alloc set:  %d allocs, each %s; jobs in it: %s\n", s.task_count(),
                  ShortResources(s.task().resources()).c_str(),
                  j.alloc_members().empty() ? "none" : absl::StrJoin(j.alloc_members(), ", ").c_str());
    } else {
      if (!s.alloc().empty()) std::printf("alloc:      task i runs in alloc i of %s\n", s.alloc().c_str());
      std::printf("tasks:      %d, each %s\n", s.task_count(), ShortResources(s.task().resources()).c_str());
      std::printf("command:    %s\n", cmdline.c_str());
    }
    std::printf("restart:    %s; grace period %s%s\n", RestartText(s.restart()).c_str(),
                FormatDurationMs(s.grace_period_ms()).c_str(), s.at_most_once() ? "; at most once" : "");
    if (!s.constraints().empty()) {
      std::vector<std::string> cs;
      for (const auto& c : s.constraints()) {
        cs.push_back(c.soft() ? absl::StrCat(cell::Describe(c), " (soft)") : cell::Describe(c));
      }
      std::printf("constraints: %s\n", absl::StrJoin(cs, "; ").c_str());
    }
    if (!s.overrides().empty()) std::printf("overrides:  %d\n", s.overrides_size());
    std::printf("submitted:  %s ago at revision %lld%s%s\n", Age(j.submit_time_ms(), now).c_str(),
                static_cast<long long>(j.submit_revision()), s.source().empty() ? "" : " from ",
                s.source().c_str());
    if (j.last_event().transition() != v1::Event::TRANSITION_UNSPECIFIED) {
      std::printf("last event: %s: %s (%s ago)\n", TransitionName(j.last_event().transition()).c_str(),
                  j.last_event().reason().c_str(), Age(j.last_event().time_ms(), now).c_str());
    }
    std::printf("\n%s", TaskTable(resp.tasks(), now).c_str());
    if (!resp.why_pending().empty()) {
      // Group identical explanations.
      std::map<std::string, std::vector<int32_t>> by_reason;
      for (const auto& [index, why] : resp.why_pending()) by_reason[why].push_back(index);
      std::printf("\nwhy pending:\n");
      for (auto& [why, idx] : by_reason) {
        std::sort(idx.begin(), idx.end());
        std::printf("  %zu task%s: %s\n", idx.size(), idx.size() == 1 ? "" : "s", why.c_str());
      }
    }
  });
}

}  // namespace herd::cli
