// FakeAgentLink: in-process agents for master tests. Each fake agent obeys
// its desired state at once (new runs become ACTIVE with a made-up pid,
// runs no longer desired vanish) and can be made unreachable, or have a run
// exit, by the test. A fake agent may understand delta polls (SetDeltas):
// it then keeps the desired state's revision as a real agent does, applies
// deltas on that base only and says which revision it holds. Test-only.
#pragma once

#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "herd/v1/agent.pb.h"
#include "master/core/link/agent_link.h"

namespace herd::testing {

class FakeAgentLink : public master::AgentLink {
 public:
  absl::StatusOr<v1::PollResponse> Poll(const std::string& address, const v1::PollRequest& req,
                                        int64_t timeout_ms) override {
    std::lock_guard l(mu_);
    Agent& a = agents_[address];
    ++a.polls;
    a.last_request = req;
    if (!a.up) return absl::UnavailableError(absl::StrCat("agent ", address, " unreachable"));
    if (a.lose_next_reply) {
      // Applied, but the reply never reaches the master.
      a.lose_next_reply = false;
      (void)PollLocked(a, req);
      return absl::DeadlineExceededError(absl::StrCat("the reply of ", address, " was lost"));
    }
    return PollLocked(a, req);
  }

  // The next poll of `address` is applied but its reply is lost.
  void LoseNextReply(const std::string& address) {
    std::lock_guard l(mu_);
    agents_[address].lose_next_reply = true;
  }

 private:
  struct Agent;

 public:
  // One agent's answer to `req` (mu_ held).
  absl::StatusOr<v1::PollResponse> PollLocked(Agent& a, const v1::PollRequest& req) {
    // The runs wanted here after this request.
    std::vector<v1::TaskRun> desired;
    if (req.delta()) {
      if (!a.deltas || a.held_revision == 0 || req.base_revision() != a.held_revision) {
        ++a.refused_deltas;
        v1::PollResponse resp;  // applies nothing, says what it holds
        resp.set_machine(req.machine());
        resp.set_desired_revision(a.held_revision);
        for (const auto& [id, r] : a.runs) *resp.add_runs() = r;
        return resp;
      }
      std::map<std::string, v1::TaskRun> held = a.held;
      for (const std::string& id : req.stop()) held.erase(id);
      for (const v1::TaskRun& run : req.desired()) held[run.run_id()] = run;
      for (const auto& [id, run] : held) desired.push_back(run);
    } else {
      desired.assign(req.desired().begin(), req.desired().end());
    }
    if (a.deltas) {
      a.held.clear();
      for (const v1::TaskRun& run : desired) a.held[run.run_id()] = run;
      a.held_revision = req.revision();
    }
    std::map<std::string, v1::RunStatus> next;
    for (const v1::TaskRun& run : desired) {
      auto it = a.runs.find(run.run_id());
      if (it != a.runs.end()) {
        next[run.run_id()] = it->second;
      } else if (!a.forget_new) {
        v1::RunStatus s;
        *s.mutable_ref() = run.ref();
        s.set_run_id(run.run_id());
        s.set_phase(v1::Task::ACTIVE);
        s.set_pid(++pid_);
        s.set_started_ms(1000);
        s.set_desired(true);
        next[run.run_id()] = s;
        ++a.started;
      }
    }
    a.killed += static_cast<int>(a.runs.size());
    for (const auto& [id, r] : next) a.killed -= a.runs.count(id) ? 1 : 0;
    a.runs = std::move(next);
    v1::PollResponse resp;
    resp.set_machine(req.machine());
    for (const auto& [id, r] : a.runs) *resp.add_runs() = r;
    if (a.deltas) resp.set_desired_revision(a.held_revision);
    return resp;
  }

  // The agent at `address` understands delta polls.
  void SetDeltas(const std::string& address, bool deltas) {
    std::lock_guard l(mu_);
    agents_[address].deltas = deltas;
  }
  // The agent restarts: it forgets the desired state it held (its runs go
  // on, as real ones are re-adopted).
  void Restart(const std::string& address) {
    std::lock_guard l(mu_);
    agents_[address].held.clear();
    agents_[address].held_revision = 0;
  }
  v1::PollRequest LastRequest(const std::string& address) {
    std::lock_guard l(mu_);
    return agents_[address].last_request;
  }
  int RefusedDeltas(const std::string& address) {
    std::lock_guard l(mu_);
    return agents_[address].refused_deltas;
  }

  void SetUp(const std::string& address, bool up) {
    std::lock_guard l(mu_);
    agents_[address].up = up;
  }
  // The next poll reports the run as ended for good.
  void Exit(const std::string& address, const std::string& run_id, int code) {
    std::lock_guard l(mu_);
    auto& r = agents_[address].runs[run_id];
    r.set_run_id(run_id);
    r.set_terminal(true);
    r.set_phase(v1::Task::EXITED);
    r.set_exit_code(code);
  }
  // The agent "loses" runs: new runs are not started and old ones forgotten.
  void Forget(const std::string& address) {
    std::lock_guard l(mu_);
    agents_[address].runs.clear();
    agents_[address].forget_new = true;
  }
  int Runs(const std::string& address) {
    std::lock_guard l(mu_);
    return static_cast<int>(agents_[address].runs.size());
  }
  int Killed(const std::string& address) {
    std::lock_guard l(mu_);
    return agents_[address].killed;
  }
  int Polls(const std::string& address) {
    std::lock_guard l(mu_);
    return agents_[address].polls;
  }

 private:
  struct Agent {
    bool up = true;
    bool forget_new = false;
    std::map<std::string, v1::RunStatus> runs;
    int polls = 0, started = 0, killed = 0, refused_deltas = 0;
    bool deltas = false;
    bool lose_next_reply = false;
    std::map<std::string, v1::TaskRun> held;  // the desired state held (deltas)
    int64_t held_revision = 0;
    v1::PollRequest last_request;
  };
  std::mutex mu_;
  std::map<std::string, Agent> agents_;
  int64_t pid_ = 1000;
};

}  // namespace herd::testing
