// herd why JOB: why the job's pending tasks are pending, as the scheduler's
// last pass saw it -- per class of identical tasks, the machines that failed
// which check ("0/3 machines fit: 2 insufficient memory, 1 constraint arch ==
// amd64"), whether preemption was tried, and what change would fit.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "cli/commands/commands.h"
#include "cli/render/render.h"

namespace herd::cli {

// "0/3 machines fit: 2 insufficient memory, 1 constraint arch == amd64".
std::string HistogramLine(const v1::PendingDiagnosis& d) {
  std::vector<std::pair<std::string, int64_t>> v(d.reasons().begin(), d.reasons().end());
  std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) {
    return a.second != b.second ? a.second > b.second : a.first < b.first;
  });
  std::string out = absl::StrCat(d.feasible(), "/", d.machines(), " machines fit");
  if (!v.empty()) {
    absl::StrAppend(&out, ": ", absl::StrJoin(v, ", ", [](std::string* o, const auto& p) {
                      absl::StrAppend(o, p.second, " ", p.first);
                    }));
  }
  return out;
}

void AddWhy(CLI::App& app, CommandContext& ctx) {
  auto* cmd = app.add_subcommand("why", "Why a job's pending tasks are pending, and what change would fit");
  auto job = std::make_shared<std::string>();
  cmd->add_option("job", *job, "JOB or USER/JOB")->required();
  cmd->add_flag("--json", ctx.flags.json, "Print the WhyResponse as JSON");
  cmd->callback([&ctx, job] {
    Client client(ctx.flags);
    v1::WhyRequest req;
    req.set_job(*job);
    v1::WhyResponse resp;
    if (!CallMaster(ctx, client, &v1::Herd::Stub::Why, req, &resp)) return;
    std::printf("job %s: %d pending task%s\n", resp.job().c_str(), resp.pending_tasks(),
                resp.pending_tasks() == 1 ? "" : "s");
    for (const v1::PendingDiagnosis& d : resp.pending()) {
      std::vector<int32_t> idx(d.indexes().begin(), d.indexes().end());
      std::printf("\ntask%s %s:\n", idx.size() == 1 ? "" : "s", IndexRanges(idx).c_str());
      std::printf("  %s\n", HistogramLine(d).c_str());
      if (d.preemption_tried()) std::printf("  preempting lower-priority tasks would not make room\n");
      if (!d.suggestions().empty()) {
        std::printf("  would fit:\n");
        for (const std::string& s : d.suggestions()) std::printf("    %s\n", s.c_str());
      }
      std::printf("  (scheduler %s, pass at revision %lld)\n", d.scheduler().c_str(),
                  static_cast<long long>(d.revision()));
    }
    if (!resp.note().empty()) std::printf("%s%s\n", resp.pending().empty() ? "" : "\n", resp.note().c_str());
  });
}

}  // namespace herd::cli
