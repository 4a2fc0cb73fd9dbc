// compat_make_golden DIR: writes one generation of format fixtures
// (tests/compat/golden.h) into DIR, from a small cell run by the real master
// core on a real SQLite store, with fake agents and a manual clock, so the
// files are the same on every run of the same code. Run it once when a
// format changes, into a new tests/compat/golden/vN; never over an
// existing generation (docs/upgrades.md).
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl.h>
#include <google/protobuf/text_format.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "agent/supervisor/run_dir.h"
#include "base/status.h"
#include "cell/checkpoint_codec.h"
#include "compat/golden.h"
#include "master/core/lifecycle.h"
#include "master/core/master_core.h"
#include "pki/pki.h"
#include "store/sqlite/sqlite_log_store.h"
#include "testing/builders.h"
#include "testing/fake_agent_link.h"

namespace herd::compat {
namespace {

namespace fs = std::filesystem;
using master::Principal;
using namespace herd::testing;  // NOLINT

absl::Status WriteDelimited(const std::vector<v1::Mutation>& ms, const std::string& path) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  google::protobuf::io::OstreamOutputStream zout(&out);
  google::protobuf::io::CodedOutputStream coded(&zout);
  for (const v1::Mutation& m : ms) {
    coded.WriteVarint32(static_cast<uint32_t>(m.ByteSizeLong()));
    if (!m.SerializeToCodedStream(&coded)) return absl::InternalError("cannot write " + path);
  }
  return absl::OkStatus();
}

absl::Status WriteBinary(const google::protobuf::Message& m, const std::string& path) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!m.SerializeToOstream(&out)) return absl::InternalError("cannot write " + path);
  return absl::OkStatus();
}

absl::Status Run(const std::string& dir) {
  if (fs::exists(dir) && !fs::is_empty(dir)) {
    return absl::FailedPreconditionError(dir + " is not empty: a generation is never written over");
  }
  fs::create_directories(dir);
  ManualClock clock(1'767'225'600'000);  // 2026-01-01
  FakeAgentLink link;
  HERD_ASSIGN_OR_RETURN(auto store, store::SqliteLogStore::Open((fs::path(dir) / kCellDb).string()));
  master::MasterOptions o;
  o.cell_name = "golden";
  o.committer.snapshot_every = 20;  // a snapshot and a log after it
  o.link.max_down_fraction = 1.0;
  o.link.down_after_misses = 2;
  // A CA, for join tokens (generation v2 on).
  HERD_ASSIGN_OR_RETURN(o.authority, pki::CreateAuthority("golden", clock.NowMs() / 1000 - 60, 3650LL * 86400));
  HERD_ASSIGN_OR_RETURN(auto core, master::MasterCore::Create(store.get(), &link, &clock, o));
  master::MasterLifecycle life(core.get(), master::MasterLifecycle::Mode::kStepped);
  HERD_RETURN_IF_ERROR(life.Start());
  HERD_RETURN_IF_ERROR(life.Promote());
  auto step = [&](int n) -> absl::Status {
    for (int i = 0; i < n; ++i) {
      clock.AdvanceMs(1000);
      HERD_RETURN_IF_ERROR(life.Step());
    }
    return absl::OkStatus();
  };

  // Three machines in two racks.
  for (int i = 0; i < 3; ++i) {
    v1::RegisterMachineRequest r;
    *r.mutable_machine() = MachineBuilder("m" + std::to_string(i))
                               .Cpu(8000)
                               .Memory(16LL << 30)
                               .Attr("rack", i < 2 ? "r1" : "r2")
                               .Address("m" + std::to_string(i) + ":7071")
                               .Build();
    HERD_RETURN_IF_ERROR(core->machines().RegisterMachine(Principal::Machine(r.machine().name()), r).status());
  }
  // A service, a batch job, and one killed before it ran.
  v1::SubmitRequest web;
  *web.add_jobs() = JobBuilder("web", "alice").Priority(200).Tasks(3).Cpu(500).Memory(1LL << 30).Build();
  HERD_RETURN_IF_ERROR(core->jobs().Submit(Principal::User("alice"), web).status());
  v1::SubmitRequest report;
  *report.add_jobs() = JobBuilder("report", "bob").Tasks(2).Cpu(250).Memory(256LL << 20).Build();
  HERD_RETURN_IF_ERROR(core->jobs().Submit(Principal::User("bob"), report).status());
  HERD_RETURN_IF_ERROR(step(3));
  // bob's tasks end: one well, one not.
  for (int i = 0; i < 3; ++i) {
    v1::PollRequest last = link.LastRequest("m" + std::to_string(i) + ":7071");
    for (const v1::TaskRun& run : last.desired()) {
      if (run.ref().job() == "bob/report") link.Exit("m" + std::to_string(i) + ":7071", run.run_id(), run.ref().index());
    }
  }
  HERD_RETURN_IF_ERROR(step(2));
  v1::SubmitRequest tmp;
  *tmp.add_jobs() = JobBuilder("tmp", "carol").Cpu(100).Build();
  HERD_RETURN_IF_ERROR(core->jobs().Submit(Principal::User("carol"), tmp).status());
  v1::KillRequest kill;
  kill.set_job("carol/tmp");
  kill.set_reason("not needed");
  HERD_RETURN_IF_ERROR(core->jobs().Kill(Principal::User("carol"), kill).status());
  // alice changes her service (a rolling update), sets a quota, drains m2.
  v1::SubmitRequest update;
  *update.add_jobs() = JobBuilder("web", "alice").Priority(200).Tasks(3).Cpu(600).Memory(1LL << 30).Build();
  HERD_RETURN_IF_ERROR(core->jobs().Submit(Principal::User("alice"), update).status());
  HERD_RETURN_IF_ERROR(step(4));
  v1::SetQuotaRequest quota;
  quota.mutable_quota()->set_user("alice");
  quota.mutable_quota()->set_band("production");
  quota.mutable_quota()->mutable_limit()->set_cpu_millis(4000);
  HERD_RETURN_IF_ERROR(core->machines().SetQuota(Principal::User("admin"), quota).status());
  v1::DrainMachinesRequest drain;
  drain.add_machines("m2");
  drain.set_reason("kernel upgrade");
  HERD_RETURN_IF_ERROR(core->machines().DrainMachines(Principal::User("admin"), drain).status());
  // A join token (v2 on): made, used by a machine, another revoked.
  v1::CreateJoinTokenRequest token_req;
  token_req.set_max_uses(2);
  token_req.set_description("rack r3");
  HERD_ASSIGN_OR_RETURN(v1::CreateJoinTokenResponse token,
                        core->join().CreateJoinToken(Principal::Admin("admin"), token_req));
  v1::JoinRequest join;
  join.set_token(token.token());
  join.set_machine("m9");
  HERD_ASSIGN_OR_RETURN(pki::KeyPair key, pki::GenerateKey());
  join.set_public_key_pem(key.public_pem);
  HERD_RETURN_IF_ERROR(core->join().Join(join, "10.0.0.9").status());
  HERD_ASSIGN_OR_RETURN(v1::CreateJoinTokenResponse spare,
                        core->join().CreateJoinToken(Principal::Admin("admin"), v1::CreateJoinTokenRequest()));
  v1::RevokeJoinTokenRequest revoke;
  revoke.set_id(spare.info().id());
  HERD_RETURN_IF_ERROR(core->join().RevokeJoinToken(Principal::Admin("admin"), revoke).status());
  // m1 stops answering, is marked down, and comes back.
  link.SetUp("m1:7071", false);
  HERD_RETURN_IF_ERROR(step(4));
  link.SetUp("m1:7071", true);
  HERD_RETURN_IF_ERROR(step(3));

  // The log, the checkpoint and the state they all describe.
  const int64_t head = core->committer().revision();
  std::vector<v1::Mutation> log;
  HERD_RETURN_IF_ERROR(store->ReadLog(1, head, [&](const v1::Mutation& m) {
    log.push_back(m);
    return absl::OkStatus();
  }));
  HERD_RETURN_IF_ERROR(WriteDelimited(log, (fs::path(dir) / kMutations).string()));
  {
    std::ofstream out((fs::path(dir) / kCheckpoint).string(), std::ios::binary | std::ios::trunc);
    cell::CheckpointWriter writer(&out);
    absl::Status written = absl::OkStatus();
    HERD_RETURN_IF_ERROR(core->stream().ExportCheckpoint(Principal::User("admin"), head,
                                                         [&](const v1::CheckpointRecord& r) {
                                                           written = writer.Write(r);
                                                           return written.ok();
                                                         }));
    HERD_RETURN_IF_ERROR(written);
  }
  v1::CellSnapshot snapshot = core->committer().Read([](const cell::CellState& s) { return s.ToSnapshot(); });
  std::string text;
  google::protobuf::TextFormat::PrintToString(snapshot, &text);
  std::ofstream((fs::path(dir) / kSnapshot).string()) << text;

  // What goes between master and agent, and an agent's record of a run.
  v1::PollRequest poll = link.LastRequest("m0:7071");
  poll.set_delta(false);
  HERD_RETURN_IF_ERROR(WriteBinary(poll, (fs::path(dir) / kPollRequest).string()));
  HERD_ASSIGN_OR_RETURN(v1::PollResponse reply, link.Poll("m0:7071", poll, 1000));
  HERD_RETURN_IF_ERROR(WriteBinary(reply, (fs::path(dir) / kPollResponse).string()));
  if (poll.desired().empty()) return absl::InternalError("m0 runs nothing");
  fs::create_directories(fs::path(dir) / kRunDir);
  agent::RunDir run((fs::path(dir) / kRunDir).string());
  HERD_RETURN_IF_ERROR(run.WriteSpec(poll.desired(0)));
  agent::RunState state;
  state.phase = v1::Task::ACTIVE;
  state.restarts = 2;
  state.message = "restarted after exit 3";
  state.last_exit = "exited with code 3";
  state.started_ms = clock.NowMs() - 60'000;
  state.backoff_ms = 2000;
  state.quick_failures = 1;
  HERD_RETURN_IF_ERROR(run.WriteState(state));
  std::printf("wrote %s: revision %lld, %zu mutations, snapshot of %d jobs\n", dir.c_str(),
              static_cast<long long>(head), log.size(), snapshot.jobs_size());
  life.Stop();
  return absl::OkStatus();
}

}  // namespace
}  // namespace herd::compat

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: compat_make_golden DIR (a new, empty directory)\n");
    return 2;
  }
  absl::Status st = herd::compat::Run(argv[1]);
  if (!st.ok()) {
    std::fprintf(stderr, "compat_make_golden: %s\n", std::string(st.message()).c_str());
    return 1;
  }
  return 0;
}
