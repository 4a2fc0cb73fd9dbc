// Helpers for the packages and isolation tests: tar archives made on the
// spot (HTTP servers: testing/http_server.h).
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "agent/packages/fetch.h"
#include "agent/supervisor/testing.h"

namespace herd::agent::testing {

inline std::string BinDir() {
  const char* d = std::getenv("HERD_BIN_DIR");
  if (d != nullptr) return d;
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  std::string exe(buf, n > 0 ? static_cast<size_t>(n) : 0);
  return exe.substr(0, exe.rfind('/'));
}

// Writes a tar archive of `files` (path -> contents; a contents of
// "@FILE" copies FILE, executable) to `archive`; returns its sha256.
inline std::string MakeTar(const std::string& archive, const std::map<std::string, std::string>& files) {
  std::string dir = archive + ".src";
  std::filesystem::remove_all(dir);
  for (const auto& [path, contents] : files) {
    std::string full = dir + "/" + path;
    std::filesystem::create_directories(std::filesystem::path(full).parent_path());
    if (!contents.empty() && contents[0] == '@') {
      std::filesystem::copy_file(contents.substr(1), full);
      std::filesystem::permissions(full, std::filesystem::perms(0755));
    } else {
      std::ofstream(full) << contents;
    }
  }
  std::string cmd = absl::StrCat("tar -cf ", archive, " -C ", dir, " .");
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::filesystem::remove_all(dir);
  return Sha256Hex(Slurp(archive));
}

inline v1::Package MakePackage(const std::string& name, const std::string& sha, const std::string& url) {
  v1::Package p;
  p.set_name(name);
  p.set_sha256(sha);
  p.set_url(url);
  return p;
}

}  // namespace herd::agent::testing
