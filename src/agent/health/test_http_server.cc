// A tiny HTTP server for health-check tests, run as a task:
//
//   herd-test-http-server PORT [--fail-after N] [--fail-file PATH] [--hang-file PATH]
//
// Answers every request on 127.0.0.1:PORT with 200 "ok", or 500 once it has
// answered N requests or while PATH exists; while the hang file exists it
// accepts connections and never answers. Prints "serving PORT" when ready.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s PORT [--fail-after N] [--fail-file PATH] [--hang-file PATH]\n", argv[0]);
    return 2;
  }
  signal(SIGPIPE, SIG_IGN);
  int port = atoi(argv[1]);
  long fail_after = -1;
  std::string fail_file, hang_file;
  for (int i = 2; i + 1 < argc; i += 2) {
    std::string opt = argv[i];
    if (opt == "--fail-after") fail_after = atol(argv[i + 1]);
    if (opt == "--fail-file") fail_file = argv[i + 1];
    if (opt == "--hang-file") hang_file = argv[i + 1];
  }
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  struct sockaddr_in addr = {};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(fd, reinterpret_cast<struct sockaddr*>(&addr), sizeof(addr)) != 0 || listen(fd, 64) != 0) {
    perror("bind/listen");
    return 1;
  }
  printf("serving %d\n", port);
  fflush(stdout);
  auto exists = [](const std::string& p) {
    struct stat st;
    return !p.empty() && stat(p.c_str(), &st) == 0;
  };
  std::vector<int> hung;
  long served = 0;
  while (true) {
    int c = accept(fd, nullptr, nullptr);
    if (c < 0) continue;
    if (exists(hang_file)) {
      hung.push_back(c);  // never answered (closed when the server dies)
      continue;
    }
    std::string req;
    char buf[1024];
    while (req.find("\r\n\r\n") == std::string::npos) {
      ssize_t n = read(c, buf, sizeof(buf));
      if (n <= 0) break;
      req.append(buf, static_cast<size_t>(n));
    }
    bool fail = (fail_after >= 0 && served >= fail_after) || exists(fail_file);
    ++served;
    std::string body = fail ? "failing\n" : "ok\n";
    std::string resp = std::string(fail ? "HTTP/1.0 500 Internal Server Error" : "HTTP/1.0 200 OK") +
                       "\r\nContent-Type: text/plain\r\nContent-Length: " + std::to_string(body.size()) +
                       "\r\n\r\n" + body;
    (void)!write(c, resp.data(), resp.size());
    close(c);
  }
}
