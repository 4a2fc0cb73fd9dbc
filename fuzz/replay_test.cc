// Replays every saved fuzz input through its target, built with the normal
// compiler (no libFuzzer): the seed corpus (fuzz/corpus/TARGET) so the
// targets and the properties they check keep compiling and holding, and
// every input that once broke something (fuzz/regressions/TARGET) so the
// bug stays fixed. A property violation aborts the process, which fails
// the test and names the input on stderr.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "fuzz_targets.h"  // HERD_FUZZ_TARGETS(X), written by fuzz/CMakeLists.txt

#define DECLARE_TARGET(t) extern "C" int HerdFuzz_##t(const uint8_t* data, size_t size);
HERD_FUZZ_TARGETS(DECLARE_TARGET)

namespace {

namespace fs = std::filesystem;

struct Target {
  const char* name;
  int (*run)(const uint8_t*, size_t);
};

#define TARGET_ENTRY(t) Target{#t, &HerdFuzz_##t},
const Target kTargets[] = {HERD_FUZZ_TARGETS(TARGET_ENTRY)};

std::vector<fs::path> Inputs(const fs::path& dir) {
  std::vector<fs::path> out;
  if (!fs::is_directory(dir)) return out;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.is_regular_file() && e.path().filename().string()[0] != '.') out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

class ReplayTest : public ::testing::TestWithParam<Target> {};

TEST_P(ReplayTest, CorpusAndRegressions) {
  const Target& t = GetParam();
  const fs::path root(HERD_FUZZ_DIR);
  std::vector<fs::path> seeds = Inputs(root / "corpus" / t.name);
  ASSERT_FALSE(seeds.empty()) << "no seed inputs under " << (root / "corpus" / t.name);
  std::vector<fs::path> all = seeds;
  for (const fs::path& p : Inputs(root / "regressions" / t.name)) all.push_back(p);
  for (const fs::path& p : all) {
    std::ifstream in(p, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    fprintf(stderr, "%s <- %s\n", t.name, p.c_str());
    EXPECT_EQ(t.run(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()), 0) << p;
  }
}

INSTANTIATE_TEST_SUITE_P(Targets, ReplayTest, ::testing::ValuesIn(kTargets),
                         [](const ::testing::TestParamInfo<Target>& i) { return std::string(i.param.name); });

}  // namespace
