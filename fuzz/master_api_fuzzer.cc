// Fuzz target: the master's API handlers and the agent protocol as the
// master sees it. One input is a script of calls on a fresh MasterCore
// (over a MemoryLogStore, the cell's real policy, an injected clock and
// in-process agents): submits, kills, machine registrations, quotas,
// placements and user changes, each either built from a few bytes (so the
// fuzzer reaches deep states quickly) or a protobuf message decoded from the
// input as it is (what a hostile client can send over gRPC); polls in which
// an agent answers with a message decoded from the input (a compromised
// machine); scheduler rounds; reads.
//
// Properties checked after every call, beyond "nothing crashes":
// - the cell's invariants hold (CellState::CheckInvariants);
// - a call by mallory, a user with no capabilities, changes nothing that is
//   not mallory's (other users' jobs, tasks, quotas and records, machines);
// - at the end, the state recovered from the store equals the state in
//   memory: everything acknowledged is durable and replays the same.
#include <google/protobuf/util/message_differencer.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "base/clock.h"
#include "base/ids.h"
#include "fuzz_util.h"
#include "master_fuzz.h"
#include "herd/v1/agent.pb.h"
#include "herd/v1/api.pb.h"
#include "master/core/admission/authorizer.h"
#include "master/core/master_core.h"
#include "master/core/recovery.h"
#include "store/log_store.h"
#include "testing/builders.h"
#include "testing/fake_agent_link.h"

namespace {

using herd::fuzz::Bytes;
using herd::fuzz::Decode;
using herd::fuzz::Note;
using herd::fuzz::Tracing;
using herd::master::Principal;
namespace v1 = herd::v1;

constexpr int kMachines = 4;
constexpr size_t kMaxOps = 48;

std::string MachineName(int i) { return absl::StrCat("m", i); }
std::string MachineAddress(int i) { return absl::StrCat("m", i, ":1"); }

// In-process agents that obey, except that the script can make one answer
// its next poll with whatever the input says.
class ScriptedLink : public herd::master::AgentLink {
 public:
  absl::StatusOr<v1::PollResponse> Poll(const std::string& address, const v1::PollRequest& req,
                                        int64_t timeout_ms) override {
    auto it = hostile_.find(address);
    if (it != hostile_.end()) {
      v1::PollResponse resp = std::move(it->second);
      hostile_.erase(it);
      return resp;
    }
    return obeying_.Poll(address, req, timeout_ms);
  }
  void Answer(const std::string& address, v1::PollResponse resp) { hostile_[address] = std::move(resp); }
  herd::testing::FakeAgentLink& obeying() { return obeying_; }

 private:
  herd::testing::FakeAgentLink obeying_;
  std::map<std::string, v1::PollResponse> hostile_;
};

Principal Who(uint8_t b) {
  switch (b % 6) {
    case 0:
      return Principal::Admin("root");
    case 1:
      return Principal::User("alice");
    case 2:
    case 3:
      return Principal::User("mallory");
    case 4:
      return Principal::Machine(MachineName(b / 6 % kMachines));
    default:
      return Principal::Scheduler("sched");
  }
}

bool IsMallory(const Principal& p) { return p.kind == Principal::Kind::kUser && p.name == "mallory"; }

// Everything in the cell mallory may not change: the snapshot without
// mallory's jobs, tasks and submit records, without the revision, and
// without machines' sums of what runs on them.
v1::CellSnapshot NotMallorys(const herd::cell::CellState& state) {
  v1::CellSnapshot s = state.ToSnapshot();
  v1::CellSnapshot out;
  for (const v1::Job& j : s.jobs()) {
    if (j.spec().user() != "mallory") *out.add_jobs() = j;
  }
  for (const v1::Task& t : s.tasks()) {
    if (t.job().rfind("mallory/", 0) != 0) *out.add_tasks() = t;
  }
  for (v1::Machine m : s.machines()) {
    // What is placed there follows the tasks (mallory's own among them).
    m.clear_allocated();
    m.clear_task_count();
    *out.add_machines() = std::move(m);
  }
  *out.mutable_quotas() = s.quotas();
  *out.mutable_users() = s.users();
  return out;
}

// A job built from a few bytes: small, valid, on a user the byte picks.
v1::JobSpec SmallJob(Bytes& in) {
  static const char* const kUsers[] = {"alice", "mallory", "root"};
  uint8_t b = in.U8();
  herd::testing::JobBuilder job(absl::StrCat("j", b % 8), kUsers[(b >> 3) % 3]);
  job.Tasks(1 + in.U8() % 6).Cpu(100 * (1 + in.U8() % 40)).Priority(in.U8() % 2 ? 200 : 100);
  uint8_t shape = in.U8();
  if (shape & 1) job.DifferentMachines();
  if (shape & 2) job.Constraint("rack", v1::Constraint::EQ, {absl::StrCat("r", shape >> 4 & 1)});
  if (shape & 4) job.Restart(v1::RestartPolicy::NEVER);
  return job.Build();
}

void Check(herd::master::MasterCore& core) {
  absl::Status st = core.committer().Read([](const herd::cell::CellState& s) { return s.CheckInvariants(); });
  HERD_FUZZ_ASSERT(st.ok(), st.ToString());
}

void RunScript(Bytes& in) {
  herd::store::MemoryLogStore store;
  ScriptedLink link;
  herd::ManualClock clock;
  herd::master::MasterOptions o;
  o.authorizer = std::make_shared<herd::master::CellPolicy>();
  o.committer.snapshot_every = 7;  // recovery then replays snapshots and logs
  o.link.down_after_misses = 2;
  o.link.max_down_fraction = 1.0;
  // A scheduler round waits for nothing (as in the simulator).
  o.scheduler_loop.idle_wait_ms = 0;
  o.scheduler_loop.retry_wait_ms = 0;
  o.scheduler_loop.max_retry_wait_ms = 0;
  o.scheduler_loop.error_backoff_ms = 0;
  o.scheduler_loop.max_error_backoff_ms = 0;
  auto made = herd::master::MasterCore::Create(&store, &link, &clock, o);
  HERD_FUZZ_ASSERT(made.ok(), made.status().ToString());
  herd::master::MasterCore& core = **made;
  auto& jobs = core.jobs();
  auto& machines = core.machines();
  auto& access = core.access();
  auto& rollouts = core.rollouts();

  for (size_t ops = 0; ops < kMaxOps && !in.empty(); ++ops) {
    const uint8_t op = in.U8();
    const Principal who = Who(in.U8());
    // Polls, scheduler rounds, exits and time are nobody's call.
    const bool api_call = op % 16 <= 2 || op % 16 >= 8;
    const bool mallory = api_call && IsMallory(who);
    v1::CellSnapshot before;
    if (mallory) before = core.committer().Read(NotMallorys);
    switch (op % 16) {
      case 0: {  // a structured submit
        v1::SubmitRequest r;
        *r.add_jobs() = SmallJob(in);
        if (in.U8() & 1) r.set_request_id(absl::StrCat("req", in.U8() % 4));
        Note(op % 16, who, jobs.Submit(who, r));
        break;
      }
      case 1: {  // a structured kill
        v1::KillRequest r;
        static const char* const kOwners[] = {"alice/", "mallory/", "root/", ""};
        uint8_t b = in.U8();
        r.set_job(absl::StrCat(kOwners[b % 4], "j", (b >> 2) % 8));
        Note(op % 16, who, jobs.Kill(who, r));
        break;
      }
      case 2: {  // a machine registers itself (usually)
        int i = in.U8() % kMachines;
        v1::RegisterMachineRequest r;
        *r.mutable_machine() = herd::testing::MachineBuilder(MachineName(i))
                                   .Cpu(1000 * (1 + in.U8() % 8))
                                   .Attr("rack", absl::StrCat("r", i % 2))
                                   .Address(MachineAddress(i))
                                   .Build();
        Note(op % 16, who, machines.RegisterMachine(who, r));
        break;
      }
      case 3:  // everyone polled once
        core.PollAllMachines();
        break;
      case 4:  // a scheduler round
        (void)core.StepScheduler();
        break;
      case 5: {  // a compromised agent answers its next poll
        int i = in.U8() % kMachines;
        v1::PollResponse resp = Decode<v1::PollResponse>(in);
        if (in.U8() & 1) resp.set_machine(MachineName(i));
        link.Answer(MachineAddress(i), std::move(resp));
        core.PollAllMachines();
        break;
      }
      case 6: {  // a run exits
        int i = in.U8() % kMachines;
        v1::GetJobRequest g;
        g.set_job(absl::StrCat("alice/j", in.U8() % 8));
        auto j = jobs.GetJob(Principal::Admin("root"), g);
        if (j.ok() && j->tasks_size() > 0) {
          const v1::Task& t = j->tasks(in.U8() % j->tasks_size());
          if (t.incarnation() > 0) {
            link.obeying().Exit(MachineAddress(i), herd::RunId(t.job(), t.index(), t.incarnation()), in.U8() % 3);
          }
        }
        break;
      }
      case 7:  // time passes; rolling updates move on
        clock.AdvanceMs(1000 * (1 + in.U8() % 60));
        (void)core.StepRollouts();
        break;
      case 8:
        Note(op % 16, who, jobs.Submit(who, Decode<v1::SubmitRequest>(in)));
        break;
      case 9:
        Note(op % 16, who, jobs.Kill(who, Decode<v1::KillRequest>(in)));
        break;
      case 10:
        Note(op % 16, who, machines.RegisterMachine(who, Decode<v1::RegisterMachineRequest>(in)));
        break;
      case 11:
        Note(op % 16, who, machines.SetQuota(who, Decode<v1::SetQuotaRequest>(in)));
        break;
      case 12:
        Note(op % 16, who, jobs.Propose(who, Decode<v1::ProposeRequest>(in)));
        break;
      case 13:
        Note(op % 16, who, access.UpdateUser(who, Decode<v1::UpdateUserRequest>(in)));
        break;
      case 14: {  // reads: nothing may crash, whatever they name
        Note(op % 16, who, jobs.GetJob(who, Decode<v1::GetJobRequest>(in)));
        Note(op % 16, who, jobs.ListTasks(who, Decode<v1::ListTasksRequest>(in)));
        Note(op % 16, who, jobs.Why(who, Decode<v1::WhyRequest>(in)));
        Note(op % 16, who, jobs.ListJobs(who, Decode<v1::ListJobsRequest>(in)));
        Note(op % 16, who, machines.ListQuotas(who, Decode<v1::ListQuotasRequest>(in)));
        Note(op % 16, who, machines.MachineChanged(who, Decode<v1::MachineChangedRequest>(in)));
        Note(op % 16, who, rollouts.History(who, Decode<v1::HistoryRequest>(in)));
        break;
      }
      default:
        Note(op % 16, who, access.GrantAccess(who, Decode<v1::GrantAccessRequest>(in)));
        Note(op % 16, who, rollouts.Rollback(who, Decode<v1::RollbackRequest>(in)));
        Note(op % 16, who, rollouts.SetRollout(who, Decode<v1::SetRolloutRequest>(in)));
        break;
    }
    Check(core);
    if (Tracing()) {
      core.committer().Read([](const herd::cell::CellState& s) {
        v1::CellSnapshot snap = s.ToSnapshot();
        fprintf(stderr, "  revision %lld: %d jobs, %d tasks, %d machines\n", static_cast<long long>(snap.revision()),
                snap.jobs_size(), snap.tasks_size(), snap.machines_size());
        return 0;
      });
    }
    if (mallory) {
      v1::CellSnapshot after = core.committer().Read(NotMallorys);
      std::string diff;
      google::protobuf::util::MessageDifferencer d;
      d.ReportDifferencesToString(&diff);
      HERD_FUZZ_ASSERT(d.Compare(before, after), absl::StrCat("mallory changed someone else's state (op ", op % 16,
                                                               "):\n", diff));
    }
  }

  v1::CellSnapshot live = core.committer().Read([](const herd::cell::CellState& s) { return s.ToSnapshot(); });
  core.Stop();
  made->reset();
  herd::fuzz::CheckRecovered(store, live);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  herd::fuzz::Quiet();
  Bytes in(data, size);
  RunScript(in);
  return 0;
}
