#include "sim/trace/google2011.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <cstdlib>
#include <filesystem>

namespace herd::sim {
namespace {

std::string WriteGz(const std::string& name, const std::string& text) {
  std::string path = (std::filesystem::temp_directory_path() / name).string();
  gzFile f = gzopen(path.c_str(), "wb");
  gzwrite(f, text.data(), static_cast<unsigned>(text.size()));
  gzclose(f);
  return path;
}

TEST(Google2011, AddRemoveUpdateAndMissingFields) {
  std::string path = WriteGz("herd_me_test.csv.gz",
                             "0,1,0,pA,0.5,0.25\n"
                             "0,2,0,pB,1,1\n"
                             "0,3,0,pA,,\n"          // capacity unknown: skipped
                             "10,2,2,pB,1,0.5\n"     // update
                             "20,1,1,,,\n"           // remove
                             "30,4,0,pA,0.25,0.25\n");
  auto at0 = LoadGoogle2011Machines(path, 0);
  ASSERT_TRUE(at0.ok()) << at0.status();
  ASSERT_EQ(at0->size(), 2u);
  EXPECT_EQ((*at0)[0].id, 1);
  EXPECT_EQ((*at0)[1].memory, 1.0);
  auto at25 = LoadGoogle2011Machines(path, 25);
  ASSERT_TRUE(at25.ok());
  ASSERT_EQ(at25->size(), 1u);
  EXPECT_EQ((*at25)[0].id, 2);
  EXPECT_EQ((*at25)[0].memory, 0.5);
  std::remove(path.c_str());
}

TEST(Google2011, BadRowsSayWhere) {
  std::string path = WriteGz("herd_me_bad.csv.gz", "0,1,0,pA,0.5,0.25\nnot,a,row\n");
  auto r = LoadGoogle2011Machines(path);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(std::string(r.status().message()).find("herd_me_bad.csv.gz:2: not a machine_events row"),
            std::string::npos)
      << r.status();
  EXPECT_EQ(LoadGoogle2011Machines("/nonexistent.gz").status().code(), absl::StatusCode::kNotFound);
  std::remove(path.c_str());
}

TEST(Google2011, TheRealMachineTable) {
  const char* dir = std::getenv("HERD_TRACES");
  std::string path = std::string(dir ? dir : "") + "/google-2011/machine_events/part-00000-of-00001.csv.gz";
  if (!dir || !std::filesystem::exists(path)) GTEST_SKIP() << "trace not found at " << path;
  auto r = LoadGoogle2011Machines(path);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->size(), 12477u);  // the machines present when the trace began
  int half = 0;
  for (const auto& m : *r) half += m.cpu == 0.5;
  EXPECT_GT(half, 11000);
}

}  // namespace
}  // namespace herd::sim
