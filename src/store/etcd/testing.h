// Real etcd members for tests and benchmarks: EtcdCluster starts N `etcd`
// processes (Debian's etcd-server) on loopback with ports the kernel picked
// and a data directory of their own, waits until they serve, and can kill
// and restart members. Members die with the process that started them
// (PR_SET_PDEATHSIG). Options place members elsewhere (the fault suite runs
// each in a network namespace of its own: an argv prefix and an address per
// member) and give the cluster TLS the way `herd up --ha` does (etcd_tls.h),
// which masters need for an etcd off loopback. Not part of any library;
// header-only.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/security/credentials.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/ports.h"
#include "pki/pki.h"
#include "store/etcd/etcd_client.h"
#include "store/etcd/etcd_tls.h"
#include "testing/eventually.h"

extern char** environ;

namespace herd::store::etcd::testing {

// The etcd binary: $HERD_ETCD, else `etcd` on PATH.
inline std::string EtcdBinary() {
  const char* e = std::getenv("HERD_ETCD");
  if (e && *e) return e;
  for (const char* dir : {"/usr/bin", "/usr/local/bin", "/usr/sbin"}) {
    std::string p = std::string(dir) + "/etcd";
    if (access(p.c_str(), X_OK) == 0) return p;
  }
  return "";
}

class EtcdCluster {
 public:
  struct Member {
    std::string name;
    int client_port = 0;
    int peer_port = 0;
    std::string data_dir;
    pid_t pid = -1;
    std::string host = "127.0.0.1";  // the address it listens on
    std::vector<std::string> wrapper;  // put before its argv
  };
  struct Options {
    // Member i runs as wrappers[i] + its argv (e.g. nsenter --net=... --)
    // and listens on hosts[i]; members past the end of either run as they
    // are, on 127.0.0.1.
    std::vector<std::vector<std::string>> wrappers;
    std::vector<std::string> hosts;
    // TLS on every port, with a CA of etcd's own (DIR/pki-etcd, files in
    // DIR/tls); clients then need MasterCredential() (`herd master
    // --etcd-credentials`).
    bool tls = false;
  };

  // `dir` must exist and outlive the cluster.
  EtcdCluster(std::string dir, int members) : EtcdCluster(std::move(dir), members, Options()) {}
  EtcdCluster(std::string dir, int members, Options options) : dir_(std::move(dir)), tls_(options.tls) {
    for (int i = 0; i < members; ++i) {
      Member m;
      m.name = absl::StrCat("e", i);
      if (static_cast<size_t>(i) < options.hosts.size()) m.host = options.hosts[i];
      if (static_cast<size_t>(i) < options.wrappers.size()) m.wrapper = options.wrappers[i];
      m.client_port = herd::FreePort();
      m.peer_port = herd::FreePort();
      m.data_dir = absl::StrCat(dir_, "/", m.name);
      members_.push_back(m);
    }
  }
  ~EtcdCluster() {
    for (size_t i = 0; i < members_.size(); ++i) Kill(i);
  }

  // Starts every member and waits until the cluster answers a linearizable
  // read (so it has a leader).
  absl::Status Start() {
    if (EtcdBinary().empty()) return absl::NotFoundError("etcd is not installed (apt-get install etcd-server)");
    if (tls_) {
      std::vector<std::string> sans;
      for (const auto& m : members_) sans.push_back(absl::StrCat("IP:", m.host));
      if (auto s = EnsureTls(dir_ + "/pki-etcd", TlsDir(), sans); !s.ok()) return s;
    }
    for (size_t i = 0; i < members_.size(); ++i) {
      if (auto s = Spawn(i); !s.ok()) return s;
    }
    return WaitReady();
  }

  absl::Status WaitReady() {
    ClientOptions o;
    o.endpoints = Endpoints();
    o.attempt_timeout = absl::Milliseconds(500);
    o.call_timeout = absl::Seconds(1);
    if (tls_) {
      absl::StatusOr<pki::Credential> c = pki::LoadCredential(MasterCredential());
      if (!c.ok()) return c.status();
      grpc::SslCredentialsOptions t;
      t.pem_root_certs = c->ca_pem;
      t.pem_private_key = c->key_pem;
      t.pem_cert_chain = c->cert_pem;
      o.credentials = grpc::SslCredentials(t);
    }
    auto c = Client::Connect(o);
    if (!c.ok()) return c.status();
    pb::RangeRequest req;
    req.set_key("ready");
    absl::Status last;
    bool ok = herd::testing::Eventually([&] {
      auto r = (*c)->Range(req);
      last = r.status();
      return r.ok();
    }, std::chrono::seconds(60), std::chrono::milliseconds(100));
    return ok ? absl::OkStatus() : absl::UnavailableError(absl::StrCat("etcd never answered: ", last.ToString()));
  }

  // SIGKILL a member (no-op if not running).
  void Kill(size_t i) {
    Member& m = members_[i];
    if (m.pid <= 0) return;
    kill(m.pid, SIGKILL);
    waitpid(m.pid, nullptr, 0);
    m.pid = -1;
  }
  // Starts a killed member again on its data directory.
  absl::Status Restart(size_t i) { return Spawn(i); }

  std::vector<std::string> Endpoints() const {
    std::vector<std::string> out;
    for (const auto& m : members_) out.push_back(absl::StrCat(m.host, ":", m.client_port));
    return out;
  }
  std::string Url(const std::string& prefix = "") const {
    return absl::StrCat("etcd://", absl::StrJoin(Endpoints(), ","), prefix);
  }
  const std::vector<Member>& members() const { return members_; }
  // With Options::tls: the credential clients present (and trust etcd by).
  std::string MasterCredential() const { return MasterCredentialPath(TlsDir()); }

 private:
  absl::Status Spawn(size_t i) {
    Member& m = members_[i];
    std::vector<std::string> peers;
    const char* scheme = tls_ ? "https://" : "http://";
    for (const auto& p : members_) peers.push_back(absl::StrCat(p.name, "=", scheme, p.host, ":", p.peer_port));
    std::string client = absl::StrCat(scheme, m.host, ":", m.client_port);
    std::string peer = absl::StrCat(scheme, m.host, ":", m.peer_port);
    std::string log = absl::StrCat(dir_, "/", m.name, ".log");
    std::vector<std::string> args = m.wrapper;
    args.insert(args.end(), {
        EtcdBinary(), "--name", m.name, "--data-dir", m.data_dir,
        "--listen-client-urls", client, "--advertise-client-urls", client,
        "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
        "--initial-cluster", absl::StrJoin(peers, ","), "--initial-cluster-state", "new",
        "--initial-cluster-token", "herd-test", "--logger", "zap", "--log-level", "warn",
        "--log-outputs", log, "--max-request-bytes", "33554432"});
    if (tls_) {
      for (std::string& f : MemberTlsFlags(TlsDir(), static_cast<int>(i))) args.push_back(std::move(f));
    }
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    const pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) return absl::InternalError(absl::StrCat("cannot fork: ", strerror(errno)));
    if (pid == 0) {
      // Only async-signal-safe calls until exec. The member dies with the
      // test or benchmark that started it, however that ends.
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent) _exit(1);
      int in = open("/dev/null", O_RDONLY);
      int out = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      if (in < 0 || out < 0) _exit(1);
      dup2(in, 0);
      dup2(out, 1);
      dup2(out, 2);
      execve(argv[0], argv.data(), environ);
      _exit(127);
    }
    m.pid = pid;
    return absl::OkStatus();
  }

  std::string TlsDir() const { return dir_ + "/tls"; }

  std::string dir_;
  bool tls_ = false;
  std::vector<Member> members_;
};

}  // namespace herd::store::etcd::testing
