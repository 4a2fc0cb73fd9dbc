// What /proc says of a process, for benchmarks that report another
// process's CPU and memory.
#pragma once

#include <sys/types.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>

namespace herd::bench {

// A field of /proc/PID/status in KiB ("VmRSS", "VmHWM"); pid 0 is this
// process. -1 if unknown.
inline long ProcStatusKib(pid_t pid, const char* field) {
  std::ifstream in(pid == 0 ? std::string("/proc/self/status") : "/proc/" + std::to_string(pid) + "/status");
  std::string line;
  const size_t n = strlen(field);
  while (std::getline(in, line)) {
    if (line.compare(0, n, field) == 0 && line.size() > n && line[n] == ':') return std::atol(line.c_str() + n + 1);
  }
  return -1;
}

// utime + stime of a process, in clock ticks; -1 if unknown.
inline long ProcCpuTicks(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t close = s.rfind(')');
  if (close == std::string::npos || close + 2 > s.size()) return -1;
  std::istringstream rest(s.substr(close + 2));
  std::string f;
  long utime = 0, stime = 0;
  for (int field = 3; rest >> f; ++field) {
    if (field == 14) utime = std::atol(f.c_str());
    if (field == 15) {
      stime = std::atol(f.c_str());
      break;
    }
  }
  return utime + stime;
}

inline double ProcCpuSeconds(pid_t pid) {
  const long ticks = ProcCpuTicks(pid);
  return ticks < 0 ? -1 : static_cast<double>(ticks) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

}  // namespace herd::bench
