// Tests: a temporary directory standing in for a kernel file tree
// (/sys/fs/cgroup, /sys/devices/system), with helpers to write and read
// files in it. Removed after each test.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace herd::agent::testing {

class FakeFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/herd-fake-files-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(root_); }

  void Put(const std::string& rel, const std::string& content) {
    std::filesystem::create_directories(std::filesystem::path(root_ + "/" + rel).parent_path());
    std::ofstream(root_ + "/" + rel) << content;
  }
  std::string Get(const std::string& rel) {
    std::ifstream in(root_ + "/" + rel);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }

  std::string root_;
};

}  // namespace herd::agent::testing
