// herd diff FILE...: what submitting the specs would change, changing
// nothing; herd scale JOB N: a new task count, surviving tasks untouched.
// DiffText renders a JobDiff for both and for herd submit.
#include <map>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "cell/job_update.h"
#include "cli/commands/commands.h"
#include "cli/render/render.h"

namespace herd::cli {
namespace {

std::string Counts(const v1::JobDiff& d) {
  std::vector<std::string> parts;
  auto add = [&](int32_t n, const char* what) {
    if (n > 0) parts.push_back(absl::StrCat(n, " ", what));
  };
  add(d.restart(), "restart");
  add(d.reschedule(), "reschedule");
  add(d.in_place(), "in place");
  add(d.unchanged(), "unchanged");
  add(d.added(), "added");
  add(d.removed(), "removed");
  return absl::StrJoin(parts, ", ");
}

}  // namespace

std::string DiffText(const v1::JobDiff& d) {
  std::string out;
  if (d.from_version() == 0) {
    return absl::StrCat(d.job(), ": a new job, ", d.added(), " task", d.added() == 1 ? "" : "s", " to add\n");
  }
  if (d.from_version() == d.to_version()) {
    return absl::StrCat(d.job(), ": no change (version ", d.from_version(), ")\n");
  }
  absl::StrAppend(&out, d.job(), ": version ", d.from_version(), " -> ", d.to_version(), "; tasks: ", Counts(d), "\n");
  Table fields({"  FIELD", "FROM", "TO", "UPDATE"});
  for (const v1::SpecChange& c : d.changes()) {
    fields.Add({"  " + c.field(), c.from().empty() ? "-" : c.from(), c.to().empty() ? "-" : c.to(),
                cell::UpdateClassText(c.update_class())});
  }
  absl::StrAppend(&out, fields.ToString());
  // Tasks with the same fate and reasons, as index ranges.
  std::map<std::pair<int, std::string>, std::vector<int32_t>> groups;
  for (const v1::TaskUpdate& t : d.tasks()) {
    if (t.update_class() == v1::UPDATE_NONE && t.reasons().empty()) continue;
    std::string why = absl::StrJoin(t.reasons(), "; ");
    if (t.update_class() == v1::UPDATE_REMOVE && t.state() == v1::Task::RUNNING) why = "its processes are stopped";
    groups[{-static_cast<int>(t.update_class()), why}].push_back(t.index());
  }
  if (!groups.empty()) {
    Table tasks({"  TASKS", "UPDATE", "WHY"});
    for (auto& [key, indexes] : groups) {
      tasks.Add({"  " + IndexRanges(indexes), cell::UpdateClassText(static_cast<v1::UpdateClass>(-key.first)),
                 key.second.empty() ? "-" : key.second});
    }
    absl::StrAppend(&out, tasks.ToString());
  }
  return out;
}

void AddScale(CLI::App& app, CommandContext& ctx) {
  auto* cmd = app.add_subcommand(
      "scale", "Change a job's task count: new tasks are placed, the highest indexes removed, the rest untouched");
  auto job = std::make_shared<std::string>();
  auto count = std::make_shared<int32_t>(0);
  auto dry = std::make_shared<bool>(false);
  auto expect = std::make_shared<int64_t>(0);
  cmd->add_option("job", *job, "JOB or USER/JOB")->required();
  cmd->add_option("tasks", *count, "The new task count (1..100000)")->required();
  cmd->add_flag("--dry-run", *dry, "Say what would change, change nothing");
  cmd->add_option("--expect-version", *expect, "Refuse unless the job is at this version");
  cmd->add_flag("--json", ctx.flags.json, "Print the ScaleResponse as JSON");
  cmd->callback([&ctx, job, count, dry, expect] {
    Client client(ctx.flags);
    v1::ScaleRequest req;
    req.set_job(*job);
    req.set_tasks(*count);
    req.set_dry_run(*dry);
    req.set_expect_version(*expect);
    v1::ScaleResponse resp;
    if (!CallMaster(ctx, client, &v1::Herd::Stub::Scale, req, &resp)) return;
    const v1::JobDiff& d = resp.diff();
    if (*dry || d.from_version() == d.to_version()) {
      std::printf("%s", DiffText(d).c_str());
      if (*dry) std::printf("dry run: nothing changed\n");
      return;
    }
    std::vector<int32_t> added, removed;
    for (const v1::TaskUpdate& t : d.tasks()) {
      if (t.update_class() == v1::UPDATE_ADD) added.push_back(t.index());
      if (t.update_class() == v1::UPDATE_REMOVE) removed.push_back(t.index());
    }
    std::printf("scaled %s to %d task%s (version %lld, revision %lld): %s %s\n", d.job().c_str(), *count,
                *count == 1 ? "" : "s", static_cast<long long>(d.to_version()),
                static_cast<long long>(resp.revision()), added.empty() ? "removed" : "added",
                IndexRanges(added.empty() ? removed : added).c_str());
  });
}

}  // namespace herd::cli
