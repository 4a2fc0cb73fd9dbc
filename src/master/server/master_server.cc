#include "master/server/master_server.h"

#include <grpcpp/security/credentials.h>
#include <sys/statvfs.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "base/log.h"
#include "base/signals.h"
#include "base/status.h"
#include "herd/v1/agent.grpc.pb.h"
#include "master/core/admission/audit.h"
#include "master/core/lifecycle.h"
#include "master/core/naming/names.h"
#include "master/core/recovery.h"
#include "master/history/recorder.h"
#include "master/server/dns_server.h"
#include "master/server/frameworks_service.h"
#include "master/server/grpc_api.h"
#include "master/server/read_barrier.h"
#include "master/web/web_ui.h"
#include "https/https_server.h"
#include "rpc/rpc.h"
#include "store/etcd/etcd_client.h"
#include "store/etcd/etcd_log_store.h"
#include "store/etcd/leader_lease.h"
#include "store/sqlite/sqlite_log_store.h"

namespace herd::master {
namespace {

// The master's credential and, if given, the CA it issues user credentials
// with; a clear error if either is missing or is not what it should be.
absl::Status LoadIdentity(const ServerOptions& o, MasterOptions* core) {
  const std::string path =
      o.credentials.empty() ? (std::filesystem::path(o.data_dir) / "credentials.pem").string() : o.credentials;
  absl::StatusOr<pki::Credential> self = pki::LoadCredential(path);
  if (!self.ok()) {
    return absl::Status(self.status().code(),
                        absl::StrCat(self.status().message(),
                                     "; every master needs a credential of role master (herd ca issue --ca DIR "
                                     "--master --out FILE), given with --credentials"));
  }
  if (self->info.subject.role != pki::Role::kMaster) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": the credential is for ", pki::Describe(self->info.subject), ", not a master"));
  }
  core->credential = *self;
  if (!o.ca_dir.empty()) {
    absl::StatusOr<pki::Authority> ca = pki::LoadAuthority(o.ca_dir);
    if (!ca.ok()) return ca.status();
    if (ca->cert_pem != self->ca_pem) {
      return absl::InvalidArgumentError(absl::StrCat("--ca ", o.ca_dir, " is not the CA that signed ", path));
    }
    core->authority = *ca;
  }
  // Every decision on a mutation, an exec or a log read is recorded.
  AuditLog::Options audit;
  audit.path = (std::filesystem::path(o.data_dir) / "audit.log").string();
  std::error_code ec;
  std::filesystem::create_directories(o.data_dir, ec);
  absl::StatusOr<std::unique_ptr<AuditLog>> log = AuditLog::Open(audit, RealClock::Get());
  if (!log.ok()) return log.status();
  core->authorizer = std::make_shared<AuditingAuthorizer>(std::make_shared<CellPolicy>(), std::move(*log));
  return absl::OkStatus();
}

// The history database and its recorder (docs/history.md), if kept. Opened
// before the core (the link hands the recorder each reply) and outliving
// it; the recorder is a part of the master (MasterProcess) that runs from
// Start() to Stop().
struct History {
  std::unique_ptr<history::HistoryDb> db;
  std::unique_ptr<history::Recorder> recorder;
};

absl::StatusOr<History> OpenHistory(ServerOptions& options) {
  History h;
  if (options.history == "none") return h;
  options.history_options.path =
      options.history.empty() ? (std::filesystem::path(options.data_dir) / "history.db").string() : options.history;
  auto db = history::HistoryDb::Open(options.history_options);
  if (!db.ok()) return db.status();
  h.db = std::move(*db);
  h.recorder = std::make_unique<history::Recorder>(h.db.get(), RealClock::Get());
  options.core.link.on_reply = [r = h.recorder.get()](const std::string& machine, const v1::PollResponse& reply) {
    r->OnReply(machine, reply);
  };
  HERD_LOG_INFO("history in {} (recorded up to revision {})", options.history_options.path, h.db->recorded_revision());
  return h;
}

// The alarm rules (--alerts FILE, or the built-in ones).
absl::StatusOr<std::unique_ptr<alerts::AlertManager>> MakeAlerts(const ServerOptions& options) {
  alerts::Rules rules;
  if (!options.alerts.empty()) {
    constexpr std::uintmax_t kMaxBytes = 1 << 20;
    std::error_code ec;
    const std::uintmax_t size = std::filesystem::file_size(options.alerts, ec);
    if (ec) return absl::NotFoundError(absl::StrCat(options.alerts, ": ", ec.message()));
    if (size > kMaxBytes) {
      return absl::InvalidArgumentError(absl::StrCat(options.alerts, ": ", size, " bytes; the limit is ", kMaxBytes));
    }
    std::ifstream in(options.alerts);
    std::stringstream text;
    text << in.rdbuf();
    absl::StatusOr<alerts::Rules> parsed = alerts::ParseRules(text.str(), options.alerts);
    if (!parsed.ok()) return parsed.status();
    rules = std::move(*parsed);
  }
  return std::make_unique<alerts::AlertManager>(std::move(rules), options.core.cell_name, RealClock::Get());
}

// The API of one master: the gRPC server, its rate limiter, and the
// master.addr file (written whole once it listens: `herd up --listen
// HOST:0` and the tests read it to find the port).
struct Api {
  std::unique_ptr<RateLimiter> limiter;
  std::unique_ptr<StreamLimits> streams;  // outlives the server's calls
  std::unique_ptr<StreamLimits> calls;    // unary requests in flight, likewise
  std::unique_ptr<HerdService> service;
  // The Framework API (issue #17): served by every master, answered by the
  // leader's manager (StartFrameworks once this master leads).
  std::unique_ptr<FrameworksService> frameworks_service;
  std::unique_ptr<frameworks::FrameworkManager> frameworks;  // outlives the server's calls
  std::unique_ptr<grpc::Server> server;
  std::string bound;
  std::unique_ptr<web::WebUi> web;                  // with --metrics/--http; outlives the server below
  std::unique_ptr<https::HttpsServer> metrics;  // with --metrics
  std::unique_ptr<DnsServer> dns;                   // with --dns

  // This master leads: the registry is rebuilt from the cell, offers start.
  void StartFrameworks(MasterCore* core) {
    frameworks = std::make_unique<frameworks::FrameworkManager>(&core->committer(), RealClock::Get(), &core->options(),
                                                                core->options().frameworks);
    frameworks->Start();
    frameworks_service->SetManager(frameworks.get());
  }

  // The frameworks' streams end (leader part "frameworks") before this
  // waits for the server's calls.
  void Stop() {
    metrics.reset();  // before the core its gauges read goes
    dns.reset();
    if (server) server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  }
};

// The web UI's log tail: read from the task's agent as the master (which
// needs no grant, but passes the user's), one channel per machine, kept.
web::ReadLogsFn ReadLogsVia(const pki::Credential& self) {
  struct Channels {
    absl::Mutex mu;
    std::map<std::string, std::shared_ptr<grpc::Channel>> by_address ABSL_GUARDED_BY(mu);
  };
  auto channels = std::make_shared<Channels>();
  return [channels, self](const v1::GetTaskResponse& task, const v1::AccessGrant& grant, bool stderr,
                          int64_t tail_bytes) -> absl::StatusOr<std::string> {
    constexpr size_t kMaxChannels = 256;
    std::shared_ptr<grpc::Channel> channel;
    {
      absl::MutexLock lock(&channels->mu);
      auto& by = channels->by_address;
      auto it = by.find(task.machine().address());
      if (it == by.end()) {
        if (by.size() >= kMaxChannels) by.erase(by.begin());
        it = by.emplace(task.machine().address(),
                        rpc::Channel(task.machine().address(), self, rpc::MachineIdentity(task.machine().name())))
                 .first;
      }
      channel = it->second;
    }
    auto agent = v1::Agent::NewStub(channel);
    v1::ReadLogsRequest req;
    req.set_run_id(task.run_id());
    req.set_stderr(stderr);
    req.set_tail_bytes(tail_bytes);
    *req.mutable_grant() = grant;
    auto ctx = rpc::Context("", 5'000);
    auto reader = agent->ReadLogs(ctx.get(), req);
    std::string out;
    v1::LogChunk chunk;
    while (reader->Read(&chunk)) {
      if (out.size() < static_cast<size_t>(tail_bytes)) out += chunk.data();
    }
    grpc::Status st = reader->Finish();
    if (!st.ok()) return rpc::FromGrpc(st);
    return out;
  };
}

// --metrics: the registry over HTTPS. A scraper's certificate goes through
// the master's Authorizer like any request (action read-metrics, revoked
// users refused); the bearer token is the operator's own secret.
absl::StatusOr<std::unique_ptr<https::HttpsServer>> StartMetrics(const ServerOptions& options, MasterCore* core,
                                                                     web::WebUi* web) {
  https::HttpsServerOptions mo;
  mo.threads = 4;
  mo.pages = [web](const https::HttpRequest& req) { return web->Handle(req); };
  mo.address = options.metrics;
  mo.identity = *options.core.credential;
  mo.token_file = options.metrics_token_file;
  mo.authorize = [core](const https::Scraper& s) -> absl::Status {
    if (s.token) return absl::OkStatus();
    if (!s.cert) {
      return absl::UnauthenticatedError("a client certificate of the cell or the metrics bearer token is needed");
    }
    absl::StatusOr<Principal> who = Identify(*s.cert, "", core->Users());
    if (!who.ok()) return who.status();
    return core->access().ReadMetrics(*who);
  };
  auto server = https::HttpsServer::Start(std::move(mo), options.core.metrics);
  if (!server.ok()) return server.status();
  HERD_LOG_INFO("web UI on https://{}/ and metrics on https://{}/metrics (TLS server name {})", (*server)->address(),
                (*server)->address(), (*server)->server_name());
  return server;
}

// --dns: tasks' names from this replica's state (a follower answers too:
// the names follow the committed log).
absl::StatusOr<std::unique_ptr<DnsServer>> StartDns(const ServerOptions& options, MasterCore* core) {
  const std::string domain = options.core.dns_domain;
  auto server = DnsServer::Start(DnsServerOptions{.address = options.dns}, [core, domain](const dns::Question& q) {
    return core->committer().Read([&](const cell::CellState& s) { return AnswerDns(s, q, domain, s.revision()); });
  });
  if (!server.ok()) return server.status();
  HERD_LOG_INFO("DNS for {}.{} on {} (UDP and TCP, no TLS: names only)", options.core.cell_name, domain,
                (*server)->address());
  return server;
}

absl::StatusOr<Api> StartApi(const ServerOptions& options, MasterCore* core, History* history,
                             alerts::AlertManager* alerts, Forwarder* forwarder, const std::string& store_name,
                             std::function<void()> read_barrier = nullptr) {
  Api api;
  api.limiter = std::make_unique<RateLimiter>(
      RealClock::Get(), RateLimiter::Options{.per_second = options.user_rate, .burst = 2 * options.user_rate});
  api.streams = std::make_unique<StreamLimits>(
      StreamLimits::Options{.per_user = options.max_streams_per_user, .total = options.max_streams});
  // A revoked credential's open streams end within a quarter second (#33 L4).
  api.streams->SweepRevoked([core](const Principal& p) {
    std::optional<v1::User> rec = core->Users()(p.acting_user.empty() ? p.name : p.acting_user);
    return rec.has_value() && p.credential_issued_s < rec->revoked_before_s();
  });
  api.service = std::make_unique<HerdService>(core, api.limiter.get(), forwarder);
  api.service->SetStreamLimits(api.streams.get());
  api.calls = std::make_unique<StreamLimits>(StreamLimits::Options{.per_user = options.max_requests_per_user,
                                                                   .total = 0,
                                                                   .counted = "requests in flight",
                                                                   .per_user_flag = "--max-requests-per-user",
                                                                   .total_flag = ""});
  api.service->SetCallLimits(api.calls.get());
  api.frameworks_service = std::make_unique<FrameworksService>(
      [service = api.service.get()](const grpc::ServerContextBase* ctx) { return service->Admit(ctx); },
      api.service->pump(), api.streams.get());
  api.service->SetReadBarrier(std::move(read_barrier));
  api.service->SetHistory(history->db.get());
  api.service->SetAlerts(alerts);
  // The DNS and HTTPS endpoints first, so GetCell reports them from the
  // first call.
  if (!options.dns.empty()) {
    auto dns = StartDns(options, core);
    if (!dns.ok()) return dns.status();
    api.dns = std::move(*dns);
    api.service->SetDns(api.dns->address());
  }
  if (!options.metrics.empty()) {
    web::WebUiOptions wo;
    wo.core = core;
    wo.history = history->db.get();
    wo.alerts = alerts;
    wo.limiter = api.limiter.get();
    wo.read_logs = ReadLogsVia(*options.core.credential);
    HerdService* service = api.service.get();
    wo.describe = [service](v1::CellInfo* info) { service->Describe(info); };
    api.web = std::make_unique<web::WebUi>(std::move(wo));
    api.service->SetWeb(api.web.get());
    auto metrics = StartMetrics(options, core, api.web.get());
    if (!metrics.ok()) return metrics.status();
    api.metrics = std::move(*metrics);
    api.service->SetHttp(api.metrics->address());
  }
  // Machines joining with a token call before they have a certificate
  // (GetJoinInfo, Join); every other method refuses a caller without one.
  std::vector<std::string> ports;
  auto server = rpc::StartServer({rpc::Listener{.address = options.listen,
                                                .identities = {*options.core.credential},
                                                .client_cert_optional = true}},
                                 {api.service.get(), api.frameworks_service.get()}, &ports);
  if (!server.ok()) {
    api.Stop();
    return server.status();
  }
  api.bound = ports[0];
  api.server = std::move(*server);
  api.service->SetIdentity(api.bound, store_name);
  const std::filesystem::path addr = std::filesystem::path(options.data_dir) / "master.addr";
  std::ofstream(addr.string() + ".tmp") << api.bound << "\n";
  std::error_code ec;
  std::filesystem::rename(addr.string() + ".tmp", addr, ec);
  return api;
}

void LogStats(MasterCore* core) {
  if (auto* loop = core->scheduler()) {
    auto s = loop->stats();
    HERD_LOG_INFO("scheduler stats: passes {}, proposed {}, accepted {}, rejected {}", s.passes, s.proposed, s.accepted,
                  s.rejected);
  }
}

// Every part of one master process in its MasterLifecycle (docs/design.md
// §11): the history recorder and the API on every replica; on the leader,
// the core's parts and then the alert evaluator and the Framework API's
// offers. The single master and the replica differ only in how the core
// comes to lead (at once, or after winning the lease).
class MasterProcess {
 public:
  struct Serving {
    store::LogStore* store = nullptr;  // the history recorder reads past revisions here
    std::string store_name;
    Forwarder* forwarder = nullptr;      // a replica's: changes go to the leader
    std::function<void()> read_barrier;  // a replica's: reads as of the log's head
  };

  MasterProcess(const ServerOptions& options, MasterCore* core, History* history, alerts::AlertManager* alerts,
                Serving serving)
      : options_(options), core_(core), life_(core) {
    core->SetFatalHandler([](const absl::Status& st) {
      HERD_LOG_ERROR("store failure, exiting so that recovery can rebuild from disk: {}", st.ToString());
      std::_Exit(3);
    });
    if (history->recorder != nullptr) {
      history::Recorder* r = history->recorder.get();
      life_.AddPart({"history",
                     [r, core, store = serving.store] {
                       r->Start(&core->committer(), store);
                       return absl::OkStatus();
                     },
                     [r] { r->Stop(); }, nullptr});
    }
    life_.AddPart({"api",
                   [this, history, alerts, serving] {
                     absl::StatusOr<Api> api = StartApi(options_, core_, history, alerts, serving.forwarder,
                                                        serving.store_name, serving.read_barrier);
                     if (!api.ok()) return api.status();
                     api_ = std::move(*api);
                     return absl::OkStatus();
                   },
                   [this] { api_.Stop(); }, nullptr});
    // The leader evaluates the alarms and offers to the frameworks.
    life_.AddLeaderPart({"alerts",
                         [alerts, core] {
                           alerts->Start(&core->committer());
                           return absl::OkStatus();
                         },
                         [alerts] { alerts->Stop(); }, nullptr});
    life_.AddLeaderPart({"frameworks",
                         [this] {
                           api_.StartFrameworks(core_);
                           return absl::OkStatus();
                         },
                         [this] { api_.frameworks->Stop(); }, nullptr});
  }
  ~MasterProcess() { Stop(); }

  MasterLifecycle& life() { return life_; }
  const std::string& bound() const { return api_.bound; }

  absl::Status Promote(store::LogStore* writer = nullptr, AgentLink* link = nullptr) {
    HERD_RETURN_IF_ERROR(life_.Promote(writer, link));
    HERD_LOG_INFO("leader-only parts running: {}", absl::StrJoin(life_.LeaderPartNames(), ", "));
    return absl::OkStatus();
  }

  void Stop() {
    if (life_.phase() == MasterLifecycle::Phase::kStopped) return;
    HERD_LOG_INFO("master stopping");
    life_.Stop();
    LogStats(core_);
  }

 private:
  const ServerOptions& options_;
  MasterCore* const core_;
  Api api_;  // before life_: the parts' stops use it
  MasterLifecycle life_;
};

// One master on SQLite: serves `core` until a stop signal.
int Serve(const ServerOptions& options, MasterCore* core, History* history, alerts::AlertManager* alerts,
          store::LogStore* store, const std::string& store_name, double recover_ms) {
  MasterProcess master(options, core, history, alerts, {.store = store, .store_name = store_name});
  absl::Status st = master.life().Start();
  if (st.ok()) st = master.Promote();
  if (!st.ok()) {
    HERD_LOG_ERROR("{}", st.message());
    return 1;
  }
  HERD_LOG_INFO("master of cell '{}' listening on {} (store {}, recovered in {:.1f} ms, scheduler {})",
                options.core.cell_name, master.bound(), store_name, recover_ms,
                options.core.run_scheduler ? "internal" : "external: placements come from 'herd scheduler'");
  WaitForStopSignal();
  master.Stop();
  return 0;
}

void SetFreeBytes(ServerOptions& options) {
  // The disk the store is on: changes stop, reads go on, below the reserve.
  // (With etcd the disk is etcd's, which has its own quota and alarm.)
  options.core.committer.free_bytes = [dir = options.data_dir]() -> int64_t {
    struct statvfs vfs;
    if (statvfs(dir.c_str(), &vfs) != 0) return -1;
    return static_cast<int64_t>(vfs.f_bavail) * static_cast<int64_t>(vfs.f_frsize);
  };
}

// A follower applies the leader's log up to `revision`; if that log was
// compacted past it (it was away too long), it starts again from the
// newest snapshot.
absl::Status FollowTo(store::LogStore& reader, MasterCore& core, int64_t revision, const std::string& cell) {
  const int64_t from = core.committer().revision();
  if (from >= revision) return absl::OkStatus();
  std::vector<v1::Mutation> tail;
  absl::Status st = reader.ReadLog(from + 1, revision, [&](const v1::Mutation& m) {
    tail.push_back(m);
    return absl::OkStatus();
  });
  if (st.ok()) return core.committer().Follow(tail);
  if (st.code() != absl::StatusCode::kOutOfRange) return st;
  absl::StatusOr<cell::CellState> fresh = Recover(reader, 0, cell);
  if (!fresh.ok()) return fresh.status();
  core.committer().Reset(std::move(*fresh));
  return absl::OkStatus();
}

// The etcd a replica keeps the cell in (--store etcd://..., and
// --etcd-credentials for TLS). INVALID_ARGUMENT for a bad setting (exit 2).
struct Etcd {
  std::unique_ptr<store::etcd::Client> client;
  store::etcd::StoreOptions store;
  std::string name;  // for logs: etcd://ENDPOINTS/PREFIX (TLS|plaintext)
};

absl::StatusOr<Etcd> ConnectEtcd(const ServerOptions& options) {
  absl::StatusOr<store::etcd::EtcdUrl> url = store::etcd::ParseEtcdUrl(options.store);
  if (!url.ok()) return absl::InvalidArgumentError(absl::StrCat("--store: ", url.status().message()));
  if (absl::EndsWith(options.listen, ":0")) {
    return absl::InvalidArgumentError(
        absl::StrCat("--listen ", options.listen,
                     ": a replicated master needs a fixed port (followers and clients find the leader by it)"));
  }
  Etcd etcd;
  etcd.store.prefix = url->prefix.empty() ? absl::StrCat("/herd/", options.core.cell_name, "/") : url->prefix;
  if (etcd.store.prefix.back() != '/') etcd.store.prefix += '/';
  store::etcd::ClientOptions co;
  co.endpoints = url->endpoints;
  if (options.etcd_credentials.empty()) {
    // Secure by default: the cell's whole state must not cross a network in
    // the clear. Plaintext only to an etcd on this host's loopback.
    for (const std::string& ep : url->endpoints) {
      const std::string host = ep.substr(0, ep.rfind(':'));
      if (host != "127.0.0.1" && host != "localhost" && host != "[::1]") {
        return absl::InvalidArgumentError(
            absl::StrCat("--store ", options.store, ": etcd at ", ep,
                         " is not on loopback; give --etcd-credentials (TLS) to reach it"));
      }
    }
  } else {
    absl::StatusOr<pki::Credential> c = pki::LoadCredential(options.etcd_credentials);
    if (!c.ok()) return absl::InvalidArgumentError(absl::StrCat("--etcd-credentials: ", c.status().message()));
    if (c->ca_pem == options.core.credential->ca_pem) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--etcd-credentials ", options.etcd_credentials,
          " is issued by the cell's CA: etcd needs a CA of its own, or every user of the cell could write to it"));
    }
    grpc::SslCredentialsOptions tls;
    tls.pem_root_certs = c->ca_pem;
    tls.pem_private_key = c->key_pem;
    tls.pem_cert_chain = c->cert_pem;
    co.credentials = grpc::SslCredentials(tls);
  }
  absl::StatusOr<std::unique_ptr<store::etcd::Client>> client = store::etcd::Client::Connect(co);
  if (!client.ok()) return absl::UnavailableError(absl::StrCat("etcd: ", client.status().ToString()));
  etcd.client = std::move(*client);
  etcd.name = absl::StrCat("etcd://", absl::StrJoin(url->endpoints, ","), etcd.store.prefix,
                           co.credentials ? " (TLS)" : " (plaintext)");
  return etcd;
}

// A follower's thread: applies what the leader appends to the log as it
// lands, until Stop() (the replica won the lease, or stops).
class LogFollower {
 public:
  LogFollower(store::etcd::EtcdLogStore* reader, MasterCore* core, std::string cell, std::string store_name)
      : reader_(reader), core_(core), cell_(std::move(cell)), store_name_(std::move(store_name)), thread_([this] {
          Run();
        }) {}
  ~LogFollower() { Stop(); }
  void Stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }

 private:
  void Run() {
    // Watch the head from where it is now (not from etcd's first revision:
    // that would walk the whole history), after applying up to it.
    store::etcd::EtcdLogStore::Head head{core_->committer().revision(), 0};
    while (!stop_.load()) {
      auto now = reader_->ReadHead();
      absl::Status st = now.ok() ? FollowTo(*reader_, *core_, now->revision, cell_) : now.status();
      if (st.ok()) {
        head = {core_->committer().revision(), now->etcd_revision};
        break;
      }
      HERD_LOG_WARN("following {}: {}", store_name_, st.ToString());
      absl::SleepFor(absl::Milliseconds(200));
    }
    while (!stop_.load()) {
      auto next = reader_->WaitForAppend(head, absl::Milliseconds(500));
      if (stop_.load()) return;
      if (!next.ok()) {
        HERD_LOG_WARN("following {}: {}", store_name_, next.status().ToString());
        absl::SleepFor(absl::Milliseconds(200));
        auto h = reader_->ReadHead();
        if (h.ok()) head.etcd_revision = h->etcd_revision;
        continue;
      }
      absl::Status st = FollowTo(*reader_, *core_, next->revision, cell_);
      if (!st.ok()) {
        HERD_LOG_WARN("following {}: {}", store_name_, st.ToString());
        continue;
      }
      head = {core_->committer().revision(), next->etcd_revision};
    }
  }

  store::etcd::EtcdLogStore* const reader_;
  MasterCore* const core_;
  const std::string cell_;
  const std::string store_name_;
  std::atomic<bool> stop_{false};
  std::thread thread_;  // last: starts once the rest is set
};

// A replica on etcd: follow the log (state kept hot) while campaigning for
// the leader lease; once leader, take over from the hot state and serve.
// Losing the lease ends the process (exit 4): it must stop writing and stop
// commanding agents at once, and a restart makes it a follower again.
int RunReplica(ServerOptions options, History* history, alerts::AlertManager* alerts) {
  absl::StatusOr<Etcd> connected = ConnectEtcd(options);
  if (!connected.ok()) {
    HERD_LOG_ERROR("{}", connected.status().message());
    return connected.status().code() == absl::StatusCode::kInvalidArgument ? 2 : 1;
  }
  store::etcd::Client* etcd = connected->client.get();
  const store::etcd::StoreOptions& so = connected->store;
  const std::string& store_name = connected->name;

  // Follow: recover once, serve reads, and apply what the leader appends as
  // it lands.
  absl::StatusOr<std::unique_ptr<store::etcd::EtcdLogStore>> reader;
  while (true) {
    reader = store::etcd::EtcdLogStore::OpenReadOnly(etcd, so);
    if (reader.ok() || StopSignalReceived()) break;
    HERD_LOG_WARN("etcd at {} does not answer yet: {}", store_name, reader.status().ToString());
    if (WaitForStopSignal(1000) != 0) break;
  }
  if (!reader.ok()) return StopSignalReceived() ? 0 : 1;
  const auto t0 = std::chrono::steady_clock::now();
  absl::StatusOr<cell::CellState> hot = Recover(**reader, 0, options.core.cell_name);
  if (!hot.ok()) {
    HERD_LOG_ERROR("cannot read the cell from {}: {}", store_name, hot.status().ToString());
    return 1;
  }
  auto core = MasterCore::CreateFollower(reader->get(), RealClock::Get(), options.core, std::move(*hot));
  if (!core.ok()) {
    HERD_LOG_ERROR("{}", core.status().ToString());
    return 1;
  }
  const std::string lease_key = so.prefix + "leader";
  Forwarder forwarder(
      *options.core.credential, options.listen,
      [etcd, lease_key] { return store::etcd::LeaderLease::Holder(etcd, lease_key); },
      [c = core->get()] { return c->leading(); });
  // Reads as of the log's head (read_barrier.h): one quorum read from etcd
  // per round, shared by the reads that arrive meanwhile; if etcd cannot say
  // within a second, reads are answered from what this replica has.
  ReadBarrier barrier(
      [&]() -> absl::StatusOr<int64_t> {
        auto head = (*reader)->ReadHead(absl::Now() + absl::Seconds(1));
        if (!head.ok()) return head.status();
        return head->revision;
      },
      [&](int64_t revision) { return (*core)->committer().WaitApplied(revision, absl::Seconds(1)); });
  MasterProcess master(
      options, core->get(), history, alerts,
      {.store = reader->get(), .store_name = store_name, .forwarder = &forwarder, .read_barrier = [&barrier] {
         (void)barrier.Wait();
       }});
  if (absl::Status st = master.life().Start(); !st.ok()) {
    HERD_LOG_ERROR("{}", st.message());
    return 1;
  }
  HERD_LOG_INFO("following cell '{}' in {} from revision {}; serving reads on {} (changes go to the leader)",
                options.core.cell_name, store_name, (*core)->committer().revision(), master.bound());
  LogFollower follower(reader->get(), core->get(), options.core.cell_name, store_name);

  store::etcd::LeaseOptions lo{lease_key, options.listen, absl::Seconds(options.lease_ttl_s)};
  lo.on_holder = [&forwarder](const std::string& holder) { forwarder.SetLeader(holder); };
  absl::StatusOr<std::unique_ptr<store::etcd::LeaderLease>> lease =
      store::etcd::LeaderLease::Campaign(etcd, std::move(lo), [] { return StopSignalReceived(); });
  follower.Stop();
  if (!lease.ok()) {
    master.Stop();
    if (StopSignalReceived()) return 0;
    HERD_LOG_ERROR("campaign for leader: {}", lease.status().ToString());
    return 1;
  }
  const auto won_at = std::chrono::steady_clock::now();
  forwarder.SetLeader(options.listen);  // changes forwarded to us now wait for the takeover
  (*lease)->OnLost([] {
    HERD_LOG_ERROR("lost the leader lease: stopping at once (a new leader may act now)");
    std::_Exit(4);
  });
  auto writer = store::etcd::EtcdLogStore::Open(etcd, so, (*lease)->fence());
  if (!writer.ok()) {
    HERD_LOG_ERROR("cannot open {} as the leader: {}", store_name, writer.status().ToString());
    return 1;
  }
  GrpcAgentLink link(*options.core.credential);
  link.SetMayCommand([l = lease->get()] { return l->held(); });
  // No disk reserve check: the disk is etcd's, which has its own quota.
  if (absl::Status st = master.Promote(writer->get(), &link); !st.ok()) {
    HERD_LOG_ERROR("taking over failed: {}", st.ToString());
    return 1;
  }
  forwarder.SetPromoted();  // changes waiting here are served here now
  const double takeover_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - won_at).count();
  HERD_LOG_INFO("won the leader lease; took over in {:.1f} ms (followed for {:.1f} s); leading cell '{}' on {}",
                takeover_ms, std::chrono::duration<double>(won_at - t0).count(), options.core.cell_name,
                master.bound());
  WaitForStopSignal();
  master.Stop();
  // Hand over at once rather than after a TTL.
  (*lease)->Resign();
  return 0;
}

}  // namespace

int RunMaster(const ServerOptions& o) {
  InitLogging("master", o.log_file);
  ServerOptions options = o;
  // Outlives the core (whose parts update it) and the metrics server.
  metrics::Registry registry;
  if (!options.metrics.empty()) options.core.metrics = &registry;
  if (absl::Status st = LoadIdentity(options, &options.core); !st.ok()) {
    HERD_LOG_ERROR("{}", st.message());
    return 1;
  }
  std::error_code ec;
  std::filesystem::create_directories(options.data_dir, ec);
  if (ec) {
    HERD_LOG_ERROR("cannot create data directory {}: {}", options.data_dir, ec.message());
    return 1;
  }
  // The cell's state (env values, secrets among them), the audit log and
  // the master's key: the master's alone, whatever the umask made.
  std::filesystem::permissions(options.data_dir, std::filesystem::perms::owner_all, ec);
  if (ec) {
    HERD_LOG_ERROR("cannot make data directory {} private: {}", options.data_dir, ec.message());
    return 1;
  }
  absl::StatusOr<History> history = OpenHistory(options);
  if (!history.ok()) {
    HERD_LOG_ERROR("--history: {}", history.status().ToString());
    return 1;
  }
  absl::StatusOr<std::unique_ptr<alerts::AlertManager>> alerts = MakeAlerts(options);
  if (!alerts.ok()) {
    HERD_LOG_ERROR("--alerts: {}", alerts.status().message());
    return 1;
  }
  if (!options.store.empty()) return RunReplica(std::move(options), &*history, alerts->get());
  std::string db = (std::filesystem::path(options.data_dir) / "cell.db").string();
  auto store = store::SqliteLogStore::Open(db);
  if (!store.ok()) {
    HERD_LOG_ERROR("cannot open the store {}: {}", db, store.status().ToString());
    return 1;
  }
  auto t0 = std::chrono::steady_clock::now();
  GrpcAgentLink link(*options.core.credential);
  SetFreeBytes(options);
  auto core = MasterCore::Create(store->get(), &link, RealClock::Get(), options.core);
  if (!core.ok()) {
    HERD_LOG_ERROR("recovery failed: {}", core.status().ToString());
    return 1;
  }
  double recover_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  int rc = Serve(options, core->get(), &*history, alerts->get(), store->get(), absl::StrCat("sqlite:", db), recover_ms);
  core->reset();
  return rc;
}

}  // namespace herd::master
