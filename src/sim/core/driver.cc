#include "sim/core/driver.h"

#include "absl/strings/str_cat.h"
#include "base/status.h"

namespace herd::sim {

Driver::Driver(DriverOptions options) : options_(std::move(options)), clock_(options_.start_ms), agents_(&clock_) {}

Driver::~Driver() {
  if (life_) life_->Stop();
}

absl::StatusOr<std::unique_ptr<Driver>> Driver::Create(DriverOptions options, const cell::Checkpoint* from) {
  std::unique_ptr<Driver> d(new Driver(std::move(options)));
  if (from != nullptr) {
    HERD_RETURN_IF_ERROR(d->store_.Restore(from->snapshot));
    if (!from->log.empty()) HERD_RETURN_IF_ERROR(d->store_.Append(from->log));
    int64_t t = from->log.empty() ? 0 : from->log.back().time_ms();
    if (t > 0) d->clock_.SetNowMs(t);
  }
  master::MasterOptions mo;
  mo.cell_name = from != nullptr && !from->snapshot.cell().empty() ? from->snapshot.cell() : d->options_.cell;
  mo.link.poll_interval_ms = d->options_.tick_ms;
  mo.link.down_after_misses = d->options_.down_after;
  mo.link.max_down_fraction = 1.0;
  mo.scheduler = d->options_.scheduler;
  mo.scheduler.name = "fauxmaster";
  mo.scheduler_loop.idle_wait_ms = 0;
  mo.scheduler_loop.retry_wait_ms = 0;
  mo.committer.snapshot_every = 0;
  HERD_ASSIGN_OR_RETURN(d->master_, master::MasterCore::Create(&d->store_, &d->agents_, &d->clock_, mo));
  // The master's own lifecycle, stepped on this thread: one Step() is a
  // scheduler pass, a poll of every machine, a rollout and a batch step.
  d->life_ = std::make_unique<master::MasterLifecycle>(d->master_.get(), master::MasterLifecycle::Mode::kStepped);
  HERD_RETURN_IF_ERROR(d->life_->Start());
  HERD_RETURN_IF_ERROR(d->life_->Promote());
  return d;
}

absl::Status Driver::AddMachines(const std::vector<v1::Machine>& machines) {
  for (const v1::Machine& m : machines) {
    v1::RegisterMachineRequest req;
    *req.mutable_machine() = m;
    if (req.machine().address().empty()) req.mutable_machine()->set_address(absl::StrCat("sim:", m.name()));
    HERD_RETURN_IF_ERROR(
        master_->machines().RegisterMachine(master::Principal::Machine(req.machine().name()), req).status());
  }
  return absl::OkStatus();
}

absl::StatusOr<v1::SubmitResponse> Driver::Submit(std::vector<v1::JobSpec> jobs, const std::string& user) {
  v1::SubmitRequest req;
  for (auto& j : jobs) *req.add_jobs() = std::move(j);
  return master_->jobs().Submit(master::Principal::User(user), req);
}

absl::Status Driver::Kill(const std::string& job, const std::string& reason) {
  v1::KillRequest req;
  req.set_job(job);
  req.set_reason(reason);
  return master_->jobs().Kill(master::Principal::User("sim"), req).status();
}

absl::Status Driver::Settle() {
  for (int round = 0; round < options_.max_rounds_per_tick; ++round) {
    int64_t before = revision();
    // A scheduler pass, a poll of every machine; rolling updates, dependent
    // jobs and scheduled jobs' runs move on at the virtual clock, as on a
    // live master.
    HERD_RETURN_IF_ERROR(life_->Step());
    if (revision() == before) return absl::OkStatus();
  }
  return absl::OkStatus();
}

absl::Status Driver::AdvanceTo(int64_t t_ms) {
  while (clock_.NowMs() < t_ms) {
    clock_.AdvanceMs(std::min(options_.tick_ms, t_ms - clock_.NowMs()));
    master_->PollAllMachines();
    HERD_RETURN_IF_ERROR(Settle());
  }
  return absl::OkStatus();
}

}  // namespace herd::sim
