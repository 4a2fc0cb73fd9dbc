#include "sim/core/simulated_agents.h"

#include "absl/strings/str_cat.h"

namespace herd::sim {

absl::StatusOr<v1::PollResponse> SimulatedAgents::Poll(const std::string& address, const v1::PollRequest& request,
                                                       int64_t) {
  std::lock_guard l(mu_);
  Agent& a = agents_[address];
  if (!a.reachable) return absl::UnavailableError(absl::StrCat("simulated machine at ", address, " is away"));
  const int64_t now = clock_->NowMs();
  std::map<std::string, Run> next;
  for (const v1::TaskRun& want : request.desired()) {
    auto it = a.runs.find(want.run_id());
    if (it != a.runs.end()) {
      next.emplace(want.run_id(), std::move(it->second));
      continue;
    }
    Run r;
    *r.status.mutable_ref() = want.ref();
    r.status.set_run_id(want.run_id());
    r.status.set_phase(v1::Task::ACTIVE);
    r.status.set_pid(next_pid_++);
    r.status.set_started_ms(now);
    r.status.set_desired(true);
    if (script_) {
      if (auto end = script_(want, now)) {
        r.end_ms = end->first;
        r.exit_code = end->second;
      }
    }
    ++started_;
    next.emplace(want.run_id(), std::move(r));
  }
  a.runs = std::move(next);
  v1::PollResponse resp;
  resp.set_machine(request.machine());
  for (auto& [id, r] : a.runs) {
    if (r.end_ms && *r.end_ms <= now && !r.status.terminal()) {
      r.status.set_terminal(true);
      r.status.set_phase(v1::Task::EXITED);
      r.status.set_exit_code(r.exit_code);
    }
    *resp.add_runs() = r.status;
  }
  return resp;
}

void SimulatedAgents::SetReachable(const std::string& address, bool reachable) {
  std::lock_guard l(mu_);
  agents_[address].reachable = reachable;
}

int64_t SimulatedAgents::runs() const {
  std::lock_guard l(mu_);
  int64_t n = 0;
  for (const auto& [addr, a] : agents_) n += static_cast<int64_t>(a.runs.size());
  return n;
}

int64_t SimulatedAgents::started() const {
  std::lock_guard l(mu_);
  return started_;
}

}  // namespace herd::sim
