// Every generation of format fixtures (tests/compat/golden/vN, written by
// compat_make_golden with the code of its day) is read by today's code and
// means what it meant: the store opens and recovers the same cell, the log
// and the checkpoint replay to it, the agent protocol's messages and a run
// directory decode, and nothing in them is a field today's code does not
// know (a field removed or renumbered). A change that breaks one fails
// here; docs/upgrades.md says what may change and how.
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl.h>
#include <google/protobuf/text_format.h>
#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "agent/supervisor/run_dir.h"
#include "cell/cell_state.h"
#include "base/clock.h"
#include "cell/checkpoint_codec.h"
#include "compat/golden.h"
#include "master/core/master_core.h"
#include "master/core/recovery.h"
#include "store/sqlite/sqlite_log_store.h"

namespace herd::compat {
namespace {

namespace fs = std::filesystem;

std::vector<fs::path> Generations() {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(HERD_GOLDEN_DIR)) {
    if (e.is_directory()) out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string Slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

v1::CellSnapshot Expected(const fs::path& gen) {
  v1::CellSnapshot s;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(Slurp(gen / kSnapshot), &s)) << gen;
  return s;
}

// The same cell: every field compared (repeated fields in order).
void ExpectSameCell(const v1::CellSnapshot& got, const v1::CellSnapshot& want, const std::string& what) {
  google::protobuf::util::MessageDifferencer d;
  std::string diff;
  d.ReportDifferencesToString(&diff);
  EXPECT_TRUE(d.Compare(want, got)) << what << ":\n" << diff;
}

void ExpectAllKnown(const google::protobuf::Message& m, const std::string& what) {
  std::vector<std::string> unknown = UnknownFields(m);
  EXPECT_TRUE(unknown.empty()) << what << " has fields this code does not know: " << absl::StrJoin(unknown, ", ");
}

// The check itself: a field the fixture has and this code does not (as a
// field removed or renumbered would leave) is reported with its path.
TEST(Compat, AFieldThisCodeDoesNotKnowIsNoticed) {
  v1::Mutation m;
  m.mutable_job_killed()->set_job("alice/web");
  m.mutable_job_killed()->GetReflection()->MutableUnknownFields(m.mutable_job_killed())->AddVarint(999, 1);
  v1::Mutation decoded;
  ASSERT_TRUE(decoded.ParseFromString(m.SerializeAsString()));
  EXPECT_EQ(UnknownFields(decoded), std::vector<std::string>{"job_killed#999"});
  EXPECT_TRUE(UnknownFields(v1::Mutation()).empty());
}

TEST(Compat, ThereIsAGeneration) {
  ASSERT_FALSE(Generations().empty()) << "no fixtures in " << HERD_GOLDEN_DIR;
  for (const fs::path& g : Generations()) {
    for (const char* f : {kCellDb, kMutations, kCheckpoint, kSnapshot, kPollRequest, kPollResponse, kRunDir}) {
      EXPECT_TRUE(fs::exists(g / f)) << g / f;
    }
  }
}

TEST(Compat, TheLogReplaysToTheSameCell) {
  for (const fs::path& g : Generations()) {
    std::ifstream in(g / kMutations, std::ios::binary);
    google::protobuf::io::IstreamInputStream zin(&in);
    google::protobuf::io::CodedInputStream coded(&zin);
    cell::CellState state("golden");
    int n = 0;
    std::set<int> kinds;
    uint32_t size = 0;
    while (coded.ReadVarint32(&size)) {
      auto limit = coded.PushLimit(static_cast<int>(size));
      v1::Mutation m;
      ASSERT_TRUE(m.ParseFromCodedStream(&coded)) << g << ": mutation " << n;
      coded.PopLimit(limit);
      ExpectAllKnown(m, absl::StrCat(g.filename().string(), " mutation ", n));
      kinds.insert(m.kind_case());
      absl::Status st = state.Apply(m);
      ASSERT_TRUE(st.ok()) << g << ": mutation " << n << " (revision " << m.revision() << "): " << st;
      ++n;
    }
    EXPECT_GT(n, 20) << g;
    EXPECT_GE(kinds.size(), 8u) << g << ": the fixture should exercise many mutation kinds";
    EXPECT_TRUE(state.CheckInvariants().ok()) << g;
    ExpectSameCell(state.ToSnapshot(), Expected(g), g.string() + " " + kMutations);
  }
}

TEST(Compat, TheStoreOpensAndRecoversTheSameCell) {
  for (const fs::path& g : Generations()) {
    // A copy: opening may write (the journal, a schema upgrade); the
    // fixture stays as its generation wrote it.
    const fs::path tmp = fs::path(::testing::TempDir()) / ("compat-" + g.filename().string());
    fs::remove_all(tmp);
    fs::create_directories(tmp);
    fs::copy_file(g / kCellDb, tmp / kCellDb);
    auto store = store::SqliteLogStore::Open((tmp / kCellDb).string());
    ASSERT_TRUE(store.ok()) << g << ": " << store.status();
    absl::StatusOr<cell::CellState> state = master::Recover(**store, 0, "golden");
    ASSERT_TRUE(state.ok()) << g << ": " << state.status();
    ExpectSameCell(state->ToSnapshot(), Expected(g), g.string() + " " + kCellDb);
    // And a master takes it over and appends to it.
    master::MasterOptions o;
    o.cell_name = "golden";
    o.run_link = false;
    o.run_scheduler = false;
    ManualClock clock(1'800'000'000'000);
    class NoAgents final : public master::AgentLink {
     public:
      absl::StatusOr<v1::PollResponse> Poll(const std::string&, const v1::PollRequest&, int64_t) override {
        return absl::UnavailableError("no agents in this test");
      }
    } link;
    auto core = master::MasterCore::Create(store->get(), &link, &clock, o);
    ASSERT_TRUE(core.ok()) << g << ": " << core.status();
    v1::DrainMachinesRequest drain;
    drain.add_machines("m0");
    EXPECT_TRUE((*core)->machines().DrainMachines(master::Principal::User("admin"), drain).ok());
    fs::remove_all(tmp);
  }
}

TEST(Compat, TheCheckpointLoadsTheSameCell) {
  for (const fs::path& g : Generations()) {
    std::ifstream in(g / kCheckpoint, std::ios::binary);
    absl::StatusOr<cell::Checkpoint> cp = cell::ReadCheckpoint(in, (g / kCheckpoint).string());
    ASSERT_TRUE(cp.ok()) << cp.status();
    ExpectAllKnown(cp->header, "checkpoint header");
    ExpectAllKnown(cp->snapshot, "checkpoint snapshot");
    absl::StatusOr<cell::CellState> state = cell::CellState::FromSnapshot(cp->snapshot);
    ASSERT_TRUE(state.ok()) << state.status();
    for (const v1::Mutation& m : cp->log) {
      ExpectAllKnown(m, "checkpoint mutation");
      ASSERT_TRUE(state->Apply(m).ok()) << m.revision();
    }
    ExpectSameCell(state->ToSnapshot(), Expected(g), g.string() + " " + kCheckpoint);
  }
}

TEST(Compat, TheAgentProtocolAndARunDirectoryDecode) {
  for (const fs::path& g : Generations()) {
    v1::PollRequest req;
    ASSERT_TRUE(req.ParseFromString(Slurp(g / kPollRequest))) << g;
    ExpectAllKnown(req, "PollRequest");
    EXPECT_EQ(req.machine(), "m0") << g;
    EXPECT_FALSE(req.desired().empty()) << g;
    v1::PollResponse resp;
    ASSERT_TRUE(resp.ParseFromString(Slurp(g / kPollResponse))) << g;
    ExpectAllKnown(resp, "PollResponse");
    EXPECT_FALSE(resp.runs().empty()) << g;

    agent::RunDir run((g / kRunDir).string());
    absl::StatusOr<v1::TaskRun> spec = run.ReadSpec();
    ASSERT_TRUE(spec.ok()) << g << ": " << spec.status();
    ExpectAllKnown(*spec, "run.pb");
    EXPECT_EQ(spec->run_id(), req.desired(0).run_id());
    absl::StatusOr<agent::RunState> state = run.ReadState();
    ASSERT_TRUE(state.ok()) << g << ": " << state.status();
    EXPECT_EQ(state->phase, v1::Task::ACTIVE);
    EXPECT_EQ(state->restarts, 2);
    EXPECT_EQ(state->last_exit, "exited with code 3");
    EXPECT_EQ(state->backoff_ms, 2000);
    EXPECT_EQ(state->quick_failures, 1);
  }
}

}  // namespace
}  // namespace herd::compat
