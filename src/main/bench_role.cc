#include "main/bench_role.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

namespace herd {

// `herd bench ...` runs herd-bench from the directory this binary is in, with
// the same arguments: the benchmarks are a tool of their own
// (bench/herd_bench_main.cc), so herd links none of them.
void AddBench(CLI::App& app, int& rc) {
  auto* bench = app.add_subcommand(
      "bench", "Benchmarks (scheduler, cell, colocation): print figures and RESULT name=value lines; "
               "'herd bench --help' lists them");
  bench->fallthrough(false);  // its arguments are herd-bench's, not herd's
  bench->prefix_command();
  bench->allow_extras();
  bench->set_help_flag();  // --help goes to herd-bench
  bench->callback([&rc, bench] {
    std::error_code ec;
    const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
    const std::string path = ec ? std::string("herd-bench") : (self.parent_path() / "herd-bench").string();
    std::vector<std::string> args = bench->remaining();
    std::vector<char*> argv;
    argv.push_back(const_cast<char*>(path.c_str()));
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(path.c_str(), argv.data());
    std::fprintf(stderr, "herd bench: cannot run %s: %s (it is built beside herd: ninja herd-bench)\n",
                 path.c_str(), std::strerror(errno));
    rc = 2;
  });
}

}  // namespace herd
