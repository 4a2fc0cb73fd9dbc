// herd-root-probe: a static program for tests of tasks inside a root built
// from packages, where nothing of the machine (no shell, no libc) exists.
// Prints, and writes to ./probe.out, what it sees:
//   pid=P host=H cwd=C root=ENTRY,ENTRY,... data=<contents of /data.txt>
// then exits 0, or with "sleep" as its argument sleeps until killed.
#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  char cwd[4096] = {0};
  if (getcwd(cwd, sizeof(cwd) - 1) == nullptr) strcpy(cwd, "?");
  std::vector<std::string> entries;
  if (DIR* d = opendir("/")) {
    while (struct dirent* e = readdir(d)) {
      if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) entries.push_back(e->d_name);
    }
    closedir(d);
  }
  std::sort(entries.begin(), entries.end());
  std::string root;
  for (const std::string& e : entries) root += (root.empty() ? "" : ",") + e;
  std::string data;
  if (FILE* f = fopen("/data.txt", "r")) {
    char buf[256];
    size_t n = fread(buf, 1, sizeof(buf), f);
    data.assign(buf, n);
    fclose(f);
    while (!data.empty() && data.back() == '\n') data.pop_back();
  }
  char line[8192];
  snprintf(line, sizeof(line), "pid=%d host=%s cwd=%s root=%s data=%s\n", static_cast<int>(getpid()), host, cwd,
           root.c_str(), data.c_str());
  fputs(line, stdout);
  fflush(stdout);
  if (FILE* f = fopen("probe.out", "w")) {
    fputs(line, f);
    fclose(f);
  }
  if (argc > 1 && strcmp(argv[1], "sleep") == 0) {
    while (true) pause();
  }
  return 0;
}
