#include "sched/config/knobs.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "sched/config/flags.h"
#include "sched/framework/profile.h"

namespace herd::sched {
namespace {

// Parses `args` (without the program name) with every scheduler flag.
absl::StatusOr<Options> Parse(std::vector<std::string> args) {
  CLI::App app("test");
  SchedulerFlags flags;
  flags.AddTo(&app);
  std::reverse(args.begin(), args.end());  // CLI11 takes them last first
  try {
    app.parse(args);
  } catch (const CLI::ParseError& e) {
    return absl::InvalidArgumentError(e.what());
  }
  Options o;
  if (absl::Status st = flags.Apply(&o); !st.ok()) return st;
  return o;
}

std::string WriteFile(const std::string& name, const std::string& text) {
  const std::string path = (std::filesystem::path(::testing::TempDir()) / name).string();
  std::ofstream(path) << text;
  return path;
}

TEST(Knobs, EveryRegisteredScoreHasAWeightFlag) {
  std::set<std::string> flags;
  for (const Knob& k : SchedulerKnobs()) {
    EXPECT_TRUE(flags.insert(k.flag).second) << k.flag << " twice";
    for (const std::string& a : k.aliases) EXPECT_TRUE(flags.insert(a).second) << a << " twice";
  }
  for (const ScoreEntry& s : Registry::BuiltIn().scores()) EXPECT_TRUE(flags.contains("--weight-" + s.name)) << s.name;
  // The names earlier releases took keep working.
  for (const char* f : {"--policy", "--order", "--task-order", "--no-equiv", "--no-cache", "--no-random", "--spread",
                        "--spread-weight", "--priority-mix", "--mix-weight", "--reserve", "--sample", "--fullest",
                        "--small-change", "--hybrid-pack-below", "--hybrid-pack-sample", "--shape"}) {
    EXPECT_TRUE(flags.contains(f)) << f;
  }
}

TEST(Knobs, NoFlagsIsTheDefaultProfile) {
  absl::StatusOr<Options> o = Parse({});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->profile, "default");
  EXPECT_EQ(o->policy, PackingPolicy::kHybrid);
  Profile p = MustBuildProfile(*o);
  EXPECT_EQ(p.filters.size(), Registry::BuiltIn().filters().size());
  EXPECT_EQ(p.Weight("packing"), 1.0);
  EXPECT_EQ(p.Weight("spread"), 0.5);
  EXPECT_EQ(p.Weight("preempt-cost"), 10.0);
  EXPECT_EQ(p.Weight("reserve"), 4.0);
}

TEST(Knobs, FlagsSetTheOptions) {
  absl::StatusOr<Options> o =
      Parse({"--policy", "best", "--order", "drf", "--task-order", "largest", "--spread", "0", "--weight-locality", "2",
             "--no-cache", "--sample", "0", "--fullest", "12", "--filters", "machine-up,constraints,resources"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->policy, PackingPolicy::kBestFit);
  EXPECT_EQ(o->order, QueueOrder::kDrf);
  EXPECT_EQ(o->task_order, TaskOrder::kLargest);
  EXPECT_FALSE(o->score_cache);
  EXPECT_TRUE(o->equivalence_classes);
  EXPECT_FALSE(o->relaxed_randomization);
  EXPECT_EQ(o->fullest_candidates, 12);
  Profile p = MustBuildProfile(*o);
  EXPECT_EQ(p.Weight("spread"), 0);
  EXPECT_EQ(p.Weight("locality"), 2);
  ASSERT_EQ(p.filters.size(), 3u);
  EXPECT_EQ(p.filters[1]->Name(), "constraints");
}

TEST(Knobs, BadValuesNameTheFlag) {
  auto message = [](std::vector<std::string> args) {
    absl::StatusOr<Options> o = Parse(std::move(args));
    return o.ok() ? std::string("ok") : std::string(o.status().message());
  };
  EXPECT_EQ(message({"--policy", "tightest"}),
            "--policy: unknown packing policy 'tightest' (worst, best, hybrid, pack, k8s)");
  EXPECT_EQ(message({"--weight-spread", "-1"}), "--weight-spread: '-1' is not a number from 0 to 1e+06");
  EXPECT_EQ(message({"--sample", "many"}), "--sample: 'many' is not a whole number from 0 to 1000000");
  EXPECT_NE(message({"--filters", "machine-up,gpus"}).find("unknown filter plugin 'gpus'"), std::string::npos);
  // A profile without the filters every profile runs would place tasks
  // where they cannot run.
  EXPECT_NE(message({"--filters", "machine-up"}).find("leaves out the filter plugin 'resources'"), std::string::npos);
  EXPECT_EQ(message({"--profile", "fast"}), "--profile: unknown profile 'fast' (built in: default)");
}

TEST(Knobs, ProfileFileChosenByNameAndFlagsOverIt) {
  const std::string path = WriteFile("profiles.yaml", R"(profiles:
  - name: tight
    policy: best
    scores: {spread: 0, priority-mix: 0, packing: 3}
  - name: spread
    policy: worst
    filters: [machine-up, constraints, domain-limits, resources]
)");
  absl::StatusOr<Options> tight = Parse({"--profile-file", path, "--profile", "tight"});
  ASSERT_TRUE(tight.ok()) << tight.status();
  EXPECT_EQ(tight->profile, "tight");
  EXPECT_EQ(tight->policy, PackingPolicy::kBestFit);
  EXPECT_EQ(MustBuildProfile(*tight).Weight("packing"), 3);
  EXPECT_EQ(MustBuildProfile(*tight).Weight("spread"), 0);
  EXPECT_EQ(MustBuildProfile(*tight).Weight("locality"), 0.5);  // not named: its default

  // A flag wins over the profile, whichever comes first on the line.
  absl::StatusOr<Options> over =
      Parse({"--policy", "hybrid", "--weight-packing", "1", "--profile-file", path, "--profile", "tight"});
  ASSERT_TRUE(over.ok()) << over.status();
  EXPECT_EQ(over->policy, PackingPolicy::kHybrid);
  EXPECT_EQ(MustBuildProfile(*over).Weight("packing"), 1);

  absl::StatusOr<Options> spread = Parse({"--profile-file", path, "--profile", "spread"});
  ASSERT_TRUE(spread.ok()) << spread.status();
  EXPECT_EQ(MustBuildProfile(*spread).filters.size(), 4u);

  // Two profiles in the file and none named: which one is not guessed.
  absl::StatusOr<Options> which = Parse({"--profile-file", path});
  ASSERT_FALSE(which.ok());
  EXPECT_EQ(which.status().message(),
            "--profile-file " + path + " defines 2 profiles (tight, spread): choose one with --profile");
  // The built-in one is still there by name.
  EXPECT_TRUE(Parse({"--profile-file", path, "--profile", "default"}).ok());
}

TEST(Knobs, ProfileFileErrorsSayFileLineAndField) {
  auto error = [](const std::string& text) {
    absl::StatusOr<std::vector<ProfileSpec>> p = ParseProfiles(text, "p.yaml");
    return p.ok() ? std::string("ok") : std::string(p.status().message());
  };
  EXPECT_EQ(error("profiles:\n  - name: a\n    polcy: best\n"),
            "p.yaml:3: profiles[0].polcy: unknown key (a profile has name, policy, filters and scores)");
  EXPECT_EQ(error("profiles:\n  - name: a\n    scores:\n      spred: 1\n"),
            "p.yaml:4: profiles[0].scores: unknown score plugin 'spred' (registered: packing, spread, preempt-cost, "
            "locality, priority-mix, soft-constraints, reserve)");
  EXPECT_EQ(error("profiles:\n  - name: a\n    scores: {spread: lots}\n"),
            "p.yaml:3: profiles[0].scores.spread: 'lots' is not a number from 0 to 1e+06");
  EXPECT_EQ(error("profiles:\n  - name: a\n    filters: [machine-up]\n").rfind("p.yaml:2: profiles[0]: ", 0), 0u);
  EXPECT_EQ(error("profiles:\n  - name: a\n  - name: a\n"), "p.yaml:3: profiles[1].name: profile 'a' is defined twice");
  EXPECT_EQ(error("profiles:\n  - policy: best\n"), "p.yaml:2: profiles[0]: a profile needs a name");
  EXPECT_EQ(error("profile:\n  - name: a\n"), "p.yaml:1: profile: unknown key (a profile file has 'profiles')");
  EXPECT_EQ(error("profiles: [\n"), "p.yaml:2: end of sequence flow not found");
  absl::StatusOr<std::vector<ProfileSpec>> missing = ReadProfileFile("/nonexistent/p.yaml");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace herd::sched
