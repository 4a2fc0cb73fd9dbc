#include "cell/checkpoint_codec.h"

#include <gtest/gtest.h>

#include <sstream>

#include "cell/cell_state.h"
#include "testing/builders.h"

namespace herd::cell {
namespace {

using namespace herd::testing;  // NOLINT

std::string Write(const v1::CellSnapshot& snap, const std::vector<v1::Mutation>& log) {
  std::ostringstream out;
  CheckpointWriter w(&out);
  v1::CheckpointRecord h;
  h.mutable_header()->set_cell("test");
  h.mutable_header()->set_snapshot_revision(snap.revision());
  EXPECT_TRUE(w.Write(h).ok());
  v1::CheckpointRecord s;
  *s.mutable_snapshot() = snap;
  EXPECT_TRUE(w.Write(s).ok());
  for (const auto& m : log) {
    v1::CheckpointRecord r;
    *r.mutable_mutation() = m;
    EXPECT_TRUE(w.Write(r).ok());
  }
  return out.str();
}

TEST(CheckpointCodec, RoundTripsAndReplays) {
  CellState a;
  ASSERT_TRUE(a.Apply(Register(MachineBuilder("m1").Build())).ok());
  v1::CellSnapshot snap = a.ToSnapshot();
  std::vector<v1::Mutation> log;
  for (auto m : {Submit(JobBuilder("x").Tasks(2).Build()), Schedule("alice/x", 0, "m1")}) {
    m.set_revision(a.revision() + 1);
    ASSERT_TRUE(a.Apply(m).ok());
    log.push_back(m);
  }
  std::istringstream in(Write(snap, log));
  auto cp = ReadCheckpoint(in, "t.ckpt");
  ASSERT_TRUE(cp.ok()) << cp.status();
  EXPECT_EQ(cp->header.cell(), "test");
  ASSERT_EQ(cp->log.size(), 2u);
  auto b = CellState::FromSnapshot(cp->snapshot);
  ASSERT_TRUE(b.ok());
  for (const auto& m : cp->log) ASSERT_TRUE(b->Apply(m).ok());
  EXPECT_EQ(b->revision(), a.revision());
  EXPECT_EQ(b->FindTask("alice/x", 0)->state(), v1::Task::RUNNING);
}

TEST(CheckpointCodec, RejectsWhatIsNotACheckpoint) {
  std::istringstream junk("hello world");
  EXPECT_EQ(ReadCheckpoint(junk, "junk").status().code(), absl::StatusCode::kInvalidArgument);
  CellState a;
  std::string ok = Write(a.ToSnapshot(), {});
  std::istringstream truncated(ok.substr(0, ok.size() - 3));
  EXPECT_EQ(ReadCheckpoint(truncated, "t").status().code(), absl::StatusCode::kDataLoss);
  v1::Mutation gap = Register(MachineBuilder("m").Build());
  gap.set_revision(5);
  std::istringstream gapped(Write(a.ToSnapshot(), {gap}));
  auto r = ReadCheckpoint(gapped, "g.ckpt");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(std::string(r.status().message()).find("g.ckpt: revision 5 where 1 was expected"), std::string::npos);
}

}  // namespace
}  // namespace herd::cell
