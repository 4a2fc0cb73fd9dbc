// The worked example of CONTRIBUTING.md ("Adding a score plugin"): a new
// score is one new file and one registration. The part between the
// worked-example markers is what CONTRIBUTING.md shows, word for word
// (cmake/check_doc_paths.sh compares them); the tests below are the proof
// that it works as the text says.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>

#include "absl/strings/numbers.h"
#include "sched/config/flags.h"
#include "sched/framework/pass_context.h"
#include "sched/framework/profile.h"
#include "sched/framework/registry.h"
#include "sched/scheduler.h"
#include "testing/builders.h"

namespace herd::sched {
namespace {

// [worked-example]
// Prefers cheaper machines: each machine's `cost` attribute, a relative
// price from 0 to 100 (spot and on-demand machines in one cell, say).
// A machine without one is as dear as any.
class CostScore final : public ScorePlugin {
 public:
  absl::string_view Name() const override { return "cost"; }
  double Score(const PassContext&, const TaskClass&, const MachineView& m, const Preemption*) const override {
    double cost = 100;
    auto it = m.machine->attributes().find("cost");
    if (it != m.machine->attributes().end() && absl::SimpleAtod(it->second, &cost)) {
      cost = std::clamp(cost, 0.0, 100.0);
    }
    return 100.0 - cost;  // in [0, 100], higher is better
  }
};

// Its registration: a name (the --weight-cost flag and the key in profile
// files), a line of help, the weight it has when nobody sets one (0: off
// until a profile or a flag asks for it), and how to make one.
ScoreEntry CostScoreEntry() {
  return {"cost", "cheaper machines first (machine attribute cost, 0-100)", [](const Options&) { return 0.0; },
          [](const Options&) { return std::make_unique<CostScore>(); }};
}
// In the tree, the registration is one line in plugins/builtin.cc:
//   Must(r.AddScore(CostScoreEntry()));
// [worked-example-end]

using namespace herd::testing;  // NOLINT

// The built-in registry plus the example, as plugins/builtin.cc would have it.
Registry WithCost() {
  Registry r = Registry::BuiltIn();
  EXPECT_TRUE(r.AddScore(CostScoreEntry()).ok());
  return r;
}

// Two machines: "dear" (cost 90) already half full, "cheap" (cost 10) empty.
cell::CellState Cell() {
  cell::CellState s;
  EXPECT_TRUE(s.Apply(Register(MachineBuilder("dear").Cpu(4000).Memory(8LL << 30).Attr("cost", "90").Build())).ok());
  EXPECT_TRUE(s.Apply(Register(MachineBuilder("cheap").Cpu(4000).Memory(8LL << 30).Attr("cost", "10").Build())).ok());
  EXPECT_TRUE(
      s
          .Apply(Submit(
              JobBuilder("base").Cpu(2000).Memory(4LL << 30).Constraint("cost", v1::Constraint::EQ, {"90"}).Build()))
          .ok());
  for (const auto& p : Scheduler(Options{}).RunPass(s).proposals) {
    v1::Mutation m;
    *m.mutable_task_scheduled() = p;
    EXPECT_TRUE(s.Apply(m).ok());
  }
  EXPECT_TRUE(s.Apply(Submit(JobBuilder("web").Cpu(500).Memory(1LL << 30).Build())).ok());
  return s;
}

// Parses `args` as a command with the scheduler flags, into options that
// use `r`.
absl::StatusOr<Options> Parse(const Registry& r, std::vector<std::string> args) {
  CLI::App app("test");
  SchedulerFlags flags(r);
  flags.AddTo(&app);
  std::reverse(args.begin(), args.end());  // CLI11 takes them last first
  app.parse(args);
  Options o;
  o.registry = &r;
  if (absl::Status st = flags.Apply(&o); !st.ok()) return st;
  return o;
}

std::string WhereWebGoes(const Options& o) {
  cell::CellState s = Cell();
  PassResult r = Scheduler(o).RunPass(s);
  for (const auto& p : r.proposals) {
    if (p.job() == "alice/web") return p.machine();
  }
  return "-";
}

TEST(WorkedExample, RegisteredScoreGetsAFlagAndAProfileKey) {
  const Registry r = WithCost();
  ASSERT_NE(r.FindScore("cost"), nullptr);
  bool flag = false;
  for (const Knob& k : SchedulerKnobs(r)) flag |= k.flag == "--weight-cost";
  EXPECT_TRUE(flag);
  // Without the registration the name is unknown, in a flag and in a file.
  for (const Knob& k : SchedulerKnobs()) EXPECT_NE(k.flag, "--weight-cost");
  const std::string file = "profiles:\n  - name: frugal\n    scores: {cost: 50}\n";
  EXPECT_TRUE(ParseProfiles(file, "frugal.yaml", r).ok());
  absl::StatusOr<std::vector<ProfileSpec>> unknown = ParseProfiles(file, "frugal.yaml");
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("frugal.yaml:3: profiles[0].scores: unknown score plugin 'cost'"),
            std::string::npos)
      << unknown.status();
}

TEST(WorkedExample, OffByDefaultAndSteersPlacementOnceWeighted) {
  const Registry r = WithCost();
  // Off by default: best fit puts the task on the fuller, dearer machine.
  absl::StatusOr<Options> plain = Parse(r, {"--policy", "best", "--weight-spread", "0"});
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(MustBuildProfile(*plain).Weight("cost"), 0);
  EXPECT_EQ(WhereWebGoes(*plain), "dear");
  // Weighted: the cheap machine, against best fit's preference.
  absl::StatusOr<Options> frugal = Parse(r, {"--policy", "best", "--weight-spread", "0", "--weight-cost", "20"});
  ASSERT_TRUE(frugal.ok()) << frugal.status();
  EXPECT_EQ(MustBuildProfile(*frugal).Weight("cost"), 20);
  EXPECT_EQ(WhereWebGoes(*frugal), "cheap");
}

}  // namespace
}  // namespace herd::sched
