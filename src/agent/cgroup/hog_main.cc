// cgroup_hog: a test helper for the cgroup extension's tests.
//
//   cgroup_hog [--memory-mib N] [--cpu] [--pin CPU] [--fork-escape FILE] [--ready FILE]
//
//   --memory-mib N      allocate N MiB, touch every page, and hold it
//   --cpu               spin forever (after the other steps)
//   --pin CPU           run only on that CPU (sched_setaffinity)
//   --fork-escape FILE  fork a child that leaves the process group and
//                       session (setsid) and sleeps; its pid goes to FILE
//   --ready FILE        create FILE once everything above is set up
// Without --cpu it sleeps until killed.
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <string>
#include <vector>

int main(int argc, char** argv) {
  long memory_mib = 0;
  bool spin = false;
  int pin = -1;
  std::string escape_file, ready_file;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) {
        fprintf(stderr, "cgroup_hog: %s needs a value\n", a.c_str());
        exit(2);
      }
      return argv[++i];
    };
    if (a == "--memory-mib") {
      memory_mib = atol(next());
    } else if (a == "--cpu") {
      spin = true;
    } else if (a == "--pin") {
      pin = atoi(next());
    } else if (a == "--fork-escape") {
      escape_file = next();
    } else if (a == "--ready") {
      ready_file = next();
    } else {
      fprintf(stderr, "cgroup_hog: unknown flag %s\n", a.c_str());
      return 2;
    }
  }
  if (pin >= 0) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(pin, &set);
    if (sched_setaffinity(0, sizeof(set), &set) != 0) {
      perror("sched_setaffinity");
      return 1;
    }
  }
  if (!escape_file.empty()) {
    if (fork() == 0) {
      // Out of the task's process group and session first, then tell.
      setsid();
      FILE* f = fopen((escape_file + ".tmp").c_str(), "w");
      fprintf(f, "%d\n", getpid());
      fclose(f);
      rename((escape_file + ".tmp").c_str(), escape_file.c_str());
      while (true) pause();
    }
  }
  if (memory_mib > 0) {
    const size_t bytes = static_cast<size_t>(memory_mib) << 20;
    char* p = static_cast<char*>(malloc(bytes));
    if (p == nullptr) {
      perror("malloc");
      return 1;
    }
    const long page = sysconf(_SC_PAGESIZE);
    for (size_t off = 0; off < bytes; off += static_cast<size_t>(page)) p[off] = 1;
    fprintf(stderr, "cgroup_hog: holding %ld MiB\n", memory_mib);
  }
  if (!ready_file.empty()) {
    FILE* f = fopen(ready_file.c_str(), "w");
    if (f) fclose(f);
  }
  if (spin) {
    volatile unsigned long x = 0;
    while (true) ++x;
  }
  while (true) pause();
}
