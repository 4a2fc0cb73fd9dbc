// Helpers for the packages and isolation tests: tar archives made on the
// spot, and a tiny HTTP server.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <thread>

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

// Serves one file's bytes for GET /NAME (404 for anything else), counting
// requests, on 127.0.0.1 and a port of its choosing.
class TinyHttpServer {
 public:
  TinyHttpServer(std::string name, std::string body) : name_(std::move(name)), body_(std::move(body)) {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in addr = {};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    socklen_t len = sizeof(addr);
    getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    listen(fd_, 16);
    thread_ = std::thread([this] { Serve(); });
  }
  ~TinyHttpServer() {
    stop_ = true;
    shutdown(fd_, SHUT_RDWR);
    close(fd_);
    thread_.join();
  }
  std::string Url(const std::string& name) const { return absl::StrCat("http://127.0.0.1:", port_, "/", name); }
  int requests() const { return requests_.load(); }

 private:
  void Serve() {
    while (!stop_) {
      int c = accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) return;
      std::string req;
      char buf[4096];
      while (req.find("\r\n\r\n") == std::string::npos) {
        ssize_t n = read(c, buf, sizeof(buf));
        if (n <= 0) break;
        req.append(buf, static_cast<size_t>(n));
      }
      ++requests_;
      std::string resp;
      if (req.rfind("GET /" + name_ + " ", 0) == 0) {
        resp = absl::StrCat("HTTP/1.0 200 OK\r\nContent-Length: ", body_.size(), "\r\n\r\n", body_);
      } else {
        resp = "HTTP/1.0 404 Not Found\r\nContent-Length: 0\r\n\r\n";
      }
      (void)!write(c, resp.data(), resp.size());
      close(c);
    }
  }
  std::string name_, body_;
  int fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> requests_{0};
  std::thread thread_;
};

}  // namespace herd::agent::testing
