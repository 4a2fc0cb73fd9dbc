#include "master/core/batch/schedules.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "base/cron.h"
#include "base/log.h"
#include "cell/batch.h"
#include "master/core/admission/quota.h"

namespace herd::master {
namespace {

// The most due times counted when catching up (a per-minute schedule over
// about two years); past it the catch-up run is for the last one counted.
constexpr int kMaxMissedCount = 1'000'000;

bool Load(const cell::Job& job, CronSchedule* cron, absl::TimeZone* zone) {
  absl::StatusOr<CronSchedule> c = CronSchedule::Parse(job.spec.schedule());
  if (!c.ok()) return false;  // checked at submit: cannot happen
  *cron = *std::move(c);
  if (job.spec.time_zone().empty()) {
    *zone = absl::UTCTimeZone();
    return true;
  }
  return absl::LoadTimeZone(job.spec.time_zone(), zone);
}

}  // namespace

int64_t NextDueMs(const cell::Job& job) {
  CronSchedule cron = *CronSchedule::Parse("* * * * *");
  absl::TimeZone zone;
  if (!Load(job, &cron, &zone)) return 0;
  std::optional<absl::Time> next = cron.Next(absl::FromUnixMillis(job.last_due_ms), zone);
  return next ? absl::ToUnixMillis(*next) : 0;
}

std::vector<v1::Mutation> StepSchedules(const cell::CellState& state, int64_t now_ms) {
  std::vector<v1::Mutation> out;
  for (const auto& [id, job] : state.jobs()) {
    if (!job->scheduled() || job->state != v1::Job::SCHEDULED) continue;
    CronSchedule cron = *CronSchedule::Parse("* * * * *");
    absl::TimeZone zone;
    if (!Load(*job, &cron, &zone)) {
      // Admission loaded it; this master's machine lacks it.
      HERD_LOG_WARN("scheduled job {}: time zone '{}' cannot be loaded here; no runs start", id,
                    job->spec.time_zone());
      continue;
    }
    std::optional<absl::Time> next = cron.Next(absl::FromUnixMillis(job->last_due_ms), zone);
    if (!next || absl::ToUnixMillis(*next) > now_ms) continue;
    int64_t due = absl::ToUnixMillis(*next);
    int32_t missed = 0;
    while (missed < kMaxMissedCount) {
      std::optional<absl::Time> later = cron.Next(absl::FromUnixMillis(due), zone);
      if (!later || absl::ToUnixMillis(*later) > now_ms) break;
      due = absl::ToUnixMillis(*later);
      ++missed;
    }
    v1::Mutation m;
    v1::ScheduleTriggered* t = m.mutable_schedule_triggered();
    t->set_job(id);
    t->set_due_ms(due);
    t->set_missed(missed);
    const std::string run = cell::RunJobId(id, due);
    const std::vector<std::string> live = cell::LiveRuns(state, *job);
    std::string skip;
    std::vector<const cell::Job*> replaced;
    if (!live.empty()) {
      switch (job->spec.concurrency()) {
        case v1::ALLOW:
          break;
        case v1::REPLACE:
          for (const std::string& r : live) {
            t->add_replace(r);
            replaced.push_back(state.FindJob(r));
          }
          break;
        default:
          skip = absl::StrCat(live.size() == 1 ? "the previous run " : "earlier runs ", absl::StrJoin(live, ", "),
                              live.size() == 1 ? " is" : " are", " still live (concurrency: forbid)");
      }
    }
    if (skip.empty()) {
      if (const cell::Job* taken = state.FindJob(run); taken != nullptr && taken->state != v1::Job::DEAD) {
        skip = absl::StrCat("a live job named ", run, " is in the way");
      }
    }
    if (skip.empty()) {
      if (absl::Status q = CheckQuota(state, {cell::RunSpec(job->spec, due)}, replaced); !q.ok()) {
        skip = std::string(q.message());
      }
    }
    if (!skip.empty()) {
      if (missed > 0) absl::StrAppend(&skip, "; ", missed, " earlier due time", missed == 1 ? " was" : "s were",
                                      " missed while no master led");
      t->clear_replace();
      t->set_skipped(skip);
    } else {
      t->set_run(run);
    }
    out.push_back(std::move(m));
  }
  return out;
}

}  // namespace herd::master
