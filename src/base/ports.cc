#include "base/ports.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace herd {

int FreePort(const std::string& host) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return 0;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  if (inet_pton(AF_INET, host.c_str(), &a.sin_addr) != 1 ||
      bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    close(fd);
    return 0;
  }
  socklen_t len = sizeof a;
  const int ok = getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ok == 0 ? ntohs(a.sin_port) : 0;
}

}  // namespace herd
