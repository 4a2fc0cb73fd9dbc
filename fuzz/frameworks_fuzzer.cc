// Fuzz target: the Framework API (issue #17) as a hostile framework sees
// it. One input is a script of calls on a FrameworkManager over a fresh
// MasterCore (a MemoryLogStore, the cell's real policy, a ManualClock, no
// scheduler): subscriptions, accepts, declines, kills, acknowledgements,
// reconciliations, teardowns and listings -- each either built from a few
// bytes around the offers actually outstanding (so accepts reach the
// commit) or a protobuf message decoded from the input as it is -- between
// allocation rounds, disconnections, task exits and time passing.
//
// Properties checked after every call, beyond "nothing crashes":
// - the cell's invariants hold (CellState::CheckInvariants);
// - no machine holds more than its capacity (one ledger for everyone);
// - a call by mallory, a user with no capabilities, changes nothing that is
//   not mallory's (other users' jobs and tasks);
// - at the end, the state recovered from the store equals the state in
//   memory.
#include <google/protobuf/util/message_differencer.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/clock.h"
#include "base/ids.h"
#include "fuzz_util.h"
#include "master_fuzz.h"
#include "herd/v1/frameworks.pb.h"
#include "master/core/admission/authorizer.h"
#include "master/core/frameworks/manager.h"
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
using herd::master::frameworks::FrameworkManager;
namespace v1 = herd::v1;

constexpr int kMachines = 3;
constexpr size_t kMaxOps = 64;

Principal Who(uint8_t b) {
  switch (b % 4) {
    case 0:
      return Principal::Admin("root");
    case 1:
      return Principal::User("alice");
    default:
      return Principal::User("mallory");
  }
}
bool IsMallory(const Principal& p) { return p.kind == Principal::Kind::kUser && p.name == "mallory"; }

// What mallory may not change: other users' jobs and tasks.
v1::CellSnapshot NotMallorys(const herd::cell::CellState& state) {
  v1::CellSnapshot s = state.ToSnapshot();
  v1::CellSnapshot out;
  for (const v1::Job& j : s.jobs()) {
    if (j.spec().user() != "mallory") *out.add_jobs() = j;
  }
  for (const v1::Task& t : s.tasks()) {
    if (t.job().rfind("mallory/", 0) != 0) *out.add_tasks() = t;
  }
  return out;
}

void Check(herd::master::MasterCore& core) {
  absl::Status st = core.committer().Read([](const herd::cell::CellState& s) -> absl::Status {
    HERD_RETURN_IF_ERROR(s.CheckInvariants());
    for (const herd::cell::Machine* m : s.machines()) {
      if (!m->allocated().FitsIn(m->capacity())) {
        return absl::InternalError(absl::StrCat("machine ", m->name(), " holds ", m->allocated().ToString(),
                                                " of ", m->capacity().ToString()));
      }
    }
    return absl::OkStatus();
  });
  HERD_FUZZ_ASSERT(st.ok(), st.ToString());
}

// The frameworks the script subscribed: id, its stream, whose it is.
struct Sub {
  FrameworkManager::Subscription sub;
  Principal who;
  std::vector<v1::ResourceOffer> offers;  // seen on its stream, maybe stale
};

void Drain(Sub& s) {
  v1::FrameworkEvent e;
  while (s.sub.events && s.sub.events->Next(&e, absl::ZeroDuration())) {
    if (e.has_offers()) {
      for (const auto& o : e.offers().offers()) s.offers.push_back(o);
    }
    if (s.offers.size() > 32) s.offers.erase(s.offers.begin(), s.offers.begin() + 16);
  }
}

void RunScript(Bytes& in) {
  herd::store::MemoryLogStore store;
  herd::testing::FakeAgentLink link;
  herd::ManualClock clock;
  herd::master::MasterOptions o;
  o.authorizer = std::make_shared<herd::master::CellPolicy>();
  o.committer.snapshot_every = 7;
  o.run_scheduler = false;
  o.run_link = false;
  auto made = herd::master::MasterCore::Create(&store, &link, &clock, o);
  HERD_FUZZ_ASSERT(made.ok(), made.status().ToString());
  herd::master::MasterCore& core = **made;
  for (int i = 0; i < kMachines; ++i) {
    v1::RegisterMachineRequest r;
    *r.mutable_machine() = herd::testing::MachineBuilder(absl::StrCat("m", i))
                               .Cpu(1000 * (1 + i))
                               .Memory((1ll << 30) * (1 + i))
                               .Attr("rack", absl::StrCat("r", i % 2))
                               .Address(absl::StrCat("m", i, ":1"))
                               .Build();
    auto reg = core.machines().RegisterMachine(Principal::Machine(absl::StrCat("m", i)), r);
    HERD_FUZZ_ASSERT(reg.ok(), reg.status().ToString());
  }
  herd::master::frameworks::ManagerOptions mo;
  mo.roles["heavy"] = {2, {}};
  FrameworkManager mgr(&core.committer(), &clock, &core.options(), mo);
  std::vector<Sub> subs;

  for (size_t ops = 0; ops < kMaxOps && !in.empty(); ++ops) {
    const uint8_t op = in.U8();
    const Principal who = Who(in.U8());
    const uint8_t pick = in.U8();  // every op's bytes are read whatever the state: seeds stay readable
    Sub* s = subs.empty() ? nullptr : &subs[pick % subs.size()];
    const std::string fid = s ? s->sub.framework_id : "";
    // Exits and time are nobody's call.
    const bool mallory = op % 14 <= 10 && IsMallory(who);
    v1::CellSnapshot before;
    if (mallory) before = core.committer().Read(NotMallorys);
    switch (op % 14) {
      case 0: {  // a framework subscribes (as itself, or claiming another's id)
        const uint8_t name = in.U8(), heavy = in.U8(), claim = in.U8(), failover = in.U8();
        if (subs.size() >= 6) break;
        v1::SubscribeRequest r;
        r.mutable_framework()->set_name(absl::StrCat("f", name % 4));
        if (heavy & 1) r.mutable_framework()->set_role("heavy");
        if (s && (claim & 1)) r.mutable_framework()->set_id(fid);
        r.mutable_framework()->set_failover_timeout_ms(1000 * (failover % 8));
        auto sub = mgr.Subscribe(who, r);
        Note(0, who, sub);
        if (sub.ok()) subs.push_back({*sub, who, {}});
        break;
      }
      case 1:
        Note(1, who, mgr.Subscribe(who, Decode<v1::SubscribeRequest>(in)));
        break;
      case 2: {  // an accept of an offer it saw, with tasks from a few bytes
        const uint8_t first = in.U8(), two = in.U8(), second = in.U8(), filter = in.U8();
        const int n = in.U8() % 4;
        v1::AcceptRequest r;
        for (int i = 0; i < n; ++i) {
          v1::FrameworkTask* t = r.add_tasks();
          t->set_task_id(absl::StrCat("t", in.U8() % 8));
          t->add_argv("/bin/true");
          t->mutable_resources()->set_cpu_millis(100 * (1 + in.U8() % 20));
          t->mutable_resources()->set_memory_bytes((64ll << 20) * (1 + in.U8() % 8));
        }
        if (!s) break;
        Drain(*s);
        r.set_framework_id(fid);
        if (!s->offers.empty()) r.add_offer_ids(s->offers[first % s->offers.size()].id());
        if (two % 4 == 0 && s->offers.size() > 1) r.add_offer_ids(s->offers[second % s->offers.size()].id());
        if (filter & 1) r.mutable_filters()->set_refuse_ms((filter >> 1) * 100);
        Note(2, who, mgr.Accept(who, r));
        break;
      }
      case 3:
        Note(3, who, mgr.Accept(who, Decode<v1::AcceptRequest>(in)));
        break;
      case 4: {  // a decline of what it saw
        const uint8_t attr = in.U8();
        if (!s) break;
        Drain(*s);
        v1::DeclineRequest r;
        r.set_framework_id(fid);
        for (const auto& off : s->offers) r.add_offer_ids(off.id());
        if (attr & 1) (*r.mutable_filters()->mutable_require_attributes())["rack"] = absl::StrCat("r", (attr >> 1) % 2);
        Note(4, who, mgr.Decline(who, r));
        break;
      }
      case 5:
        Note(5, who, mgr.Decline(who, Decode<v1::DeclineRequest>(in)));
        break;
      case 6: {
        v1::KillTaskRequest r;
        r.set_framework_id(fid);
        r.set_task_id(absl::StrCat("t", in.U8() % 8));
        const bool built = in.U8() & 1;
        Note(6, who, mgr.KillTask(who, built ? r : Decode<v1::KillTaskRequest>(in)));
        break;
      }
      case 7: {  // acknowledge what it saw, or anything
        if (s) Drain(*s);
        Note(7, who, mgr.Acknowledge(who, Decode<v1::AcknowledgeRequest>(in)));
        break;
      }
      case 8: {
        v1::ReconcileRequest r;
        r.set_framework_id(fid);
        const bool built = in.U8() & 1;
        Note(8, who, mgr.Reconcile(who, built ? r : Decode<v1::ReconcileRequest>(in)));
        Note(8, who, mgr.ListFrameworks(who, Decode<v1::ListFrameworksRequest>(in)));
        break;
      }
      case 9: {
        v1::TeardownRequest r;
        r.set_framework_id(fid);
        const bool built = in.U8() & 1;
        Note(9, who, mgr.Teardown(who, built ? r : Decode<v1::TeardownRequest>(in)));
        break;
      }
      case 10:  // a stream ends
        if (s && s->sub.events) {
          mgr.Disconnected(s->sub);
          s->sub.events.reset();
        }
        break;
      case 11: {  // a framework task's run exits (as its agent would report)
        auto runs = core.committer().Read([](const herd::cell::CellState& st) {
          std::vector<v1::TaskRef> out;
          for (const auto& [id, job] : st.jobs()) {
            for (const auto& t : job->tasks) {
              if (t.state() == v1::Task::RUNNING) {
                v1::TaskRef r;
                r.set_job(id);
                r.set_index(t.index());
                r.set_incarnation(t.incarnation());
                out.push_back(r);
              }
            }
          }
          return out;
        });
        const uint8_t which = in.U8(), code = in.U8();
        if (runs.empty()) break;
        v1::Mutation m;
        *m.mutable_task_exited()->mutable_task() = runs[which % runs.size()];
        m.mutable_task_exited()->set_exit_code(code % 2);
        (void)core.committer().CommitEach("agent", {m});
        mgr.Tick();
        break;
      }
      default:  // time passes; a round (offers, expiries, failover timeouts)
        clock.AdvanceMs(100 * (1 + in.U8() % 100));
        mgr.Tick();
        for (Sub& sub : subs) Drain(sub);
        break;
    }
    Check(core);
    if (mallory) {
      v1::CellSnapshot after = core.committer().Read(NotMallorys);
      std::string diff;
      google::protobuf::util::MessageDifferencer d;
      d.ReportDifferencesToString(&diff);
      HERD_FUZZ_ASSERT(d.Compare(before, after),
                       absl::StrCat("mallory changed someone else's state (op ", op % 14, "):\n", diff));
    }
  }

  v1::CellSnapshot live = core.committer().Read([](const herd::cell::CellState& st) { return st.ToSnapshot(); });
  mgr.Stop();
  core.Stop();
  herd::fuzz::CheckRecovered(store, live);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  herd::fuzz::Quiet();
  Bytes in(data, size);
  RunScript(in);
  return 0;
}
