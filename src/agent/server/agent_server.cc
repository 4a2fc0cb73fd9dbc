#include "agent/server/agent_server.h"

#include "agent/server/join_client.h"

#include <sys/statvfs.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "agent/cgroup/cgroup_extension.h"
#include "agent/server/agent_protocol.h"
#include "agent/server/exec.h"
#include "agent/server/agent_metrics.h"
#include "agent/server/extensions.h"
#include "https/https_server.h"
#include "agent/server/logs.h"
#include "agent/server/revocations.h"
#include "agent/supervisor/supervisor.h"
#include "base/clock.h"
#include "base/log.h"
#include "base/signals.h"
#include "base/status.h"
#include "herd/v1/agent.grpc.pb.h"
#include "herd/v1/api.grpc.pb.h"
#include "pki/grant.h"
#include "rpc/rpc.h"

namespace herd::agent {
namespace {

class AgentService final : public v1::Agent::Service {
 public:
  AgentService(Supervisor* sup, PollServer* polls, std::string name, std::string shim_path, Clock* clock,
               std::string ca_pem)
      : sup_(sup),
        polls_(polls),
        name_(std::move(name)),
        ca_pem_(std::move(ca_pem)),
        shim_path_(std::move(shim_path)),
        clock_(clock),
        revocations_(clock) {}

  grpc::Status Poll(grpc::ServerContext* ctx, const v1::PollRequest* req, v1::PollResponse* resp) override {
    grpc::Status st = polls_->Poll(ctx, *req, resp);
    // Only the master's word (Poll refuses anyone else) on who was revoked.
    if (st.ok()) revocations_.Update(req->revoked());
    return st;
  }

  grpc::Status ReadLogs(grpc::ServerContext* ctx, const v1::ReadLogsRequest* req,
                        grpc::ServerWriter<v1::LogChunk>* writer) override {
    std::unique_ptr<Revocations::Stream> stream;
    if (absl::Status st = Admit(ctx, req->grant(), req->run_id(), v1::READ_LOGS, &stream); !st.ok()) {
      return rpc::ToGrpc(st);
    }
    return ServeLogs(*sup_, ctx, *req, writer, stream.get());
  }

  grpc::Status Exec(grpc::ServerContext* ctx, const v1::ExecRequest* req,
                    grpc::ServerWriter<v1::ExecOutput>* writer) override {
    std::unique_ptr<Revocations::Stream> stream;
    if (absl::Status st = Admit(ctx, req->grant(), req->run_id(), v1::EXEC, &stream); !st.ok()) {
      return rpc::ToGrpc(st);
    }
    return ServeExec(*sup_, shim_path_, ctx, *req, writer, stream.get());
  }

 private:
  // The master may read and exec anything here; a user needs the master's
  // grant for this run and action, made out to them, issued (and presented
  // with a credential issued) after any revocation of theirs the master's
  // polls told of. A user's stream is registered in *stream while it lasts,
  // so a later revocation ends it.
  absl::Status Admit(grpc::ServerContext* ctx, const v1::AccessGrant& grant, const std::string& run_id,
                     v1::AccessAction action, std::unique_ptr<Revocations::Stream>* stream) {
    absl::StatusOr<pki::CertInfo> caller = rpc::Caller(ctx);
    if (!caller.ok()) return caller.status();
    if (caller->subject.role == pki::Role::kMaster) return absl::OkStatus();
    absl::Status st = pki::CheckGrant(grant, ca_pem_, caller->subject.name, name_, run_id, action, clock_->NowMs());
    const int64_t issued_ms = pki::GrantIssuedMs(grant);
    if (st.ok()) st = revocations_.Check(caller->subject.name, issued_ms, caller->issued_s());
    if (!st.ok()) {
      HERD_LOG_WARN("refused {} for {}: {}", action == v1::EXEC ? "an exec" : "a log read",
                    pki::Describe(caller->subject), st.message());
      return st;
    }
    *stream = revocations_.Open(caller->subject.name, issued_ms, caller->issued_s(), ctx);
    return absl::OkStatus();
  }

  Supervisor* const sup_;
  PollServer* const polls_;
  const std::string name_;
  const std::string ca_pem_;
  const std::string shim_path_;  // for herd-shim --enter; empty: next to herd
  Clock* const clock_;
  Revocations revocations_;
};

std::string HostName() {
  char buf[256] = {0};
  gethostname(buf, sizeof(buf) - 1);
  return buf[0] ? buf : "localhost";
}

}  // namespace

ResourceVector DetectCapacity(const std::string& root_dir) {
  ResourceVector r;
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  r.cpu_millis = std::max<long>(1, cpus) * 1000;
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  int64_t kb = 0;
  while (meminfo >> key >> kb) {
    if (key == "MemTotal:") {
      r.memory_bytes = kb * 1024;
      break;
    }
    meminfo.ignore(256, '\n');
  }
  struct statvfs vfs;
  if (statvfs(root_dir.c_str(), &vfs) == 0) r.disk_bytes = static_cast<int64_t>(vfs.f_bavail) * vfs.f_frsize;
  r.ports = 1000;
  return r;
}

std::map<std::string, std::string> DetectAttributes() {
  std::map<std::string, std::string> a;
  a["hostname"] = HostName();
  struct utsname u;
  if (uname(&u) == 0) {
    std::string arch = u.machine;
    a["arch"] = arch == "x86_64" ? "amd64" : (arch == "aarch64" ? "arm64" : arch);
    std::string kernel = u.release;
    a["kernel"] = kernel.substr(0, kernel.find('-'));
  }
  a["os"] = "linux";
  return a;
}

namespace {

// Fills in the defaults of `o` and checks it; the capacity the machine
// registers with (detected unless given; disk and ports always detected or
// derived) and its attributes (detected, then the flags').
absl::Status ResolveOptions(AgentOptions& o, std::map<std::string, std::string>* attrs) {
  // Who this agent is: its machine credential, and the name in it.
  if (o.credentials.empty()) {
    const std::string root =
        o.root_dir.empty() ? absl::StrCat("/var/lib/herd/agent/", o.name.empty() ? HostName() : o.name) : o.root_dir;
    o.credentials = absl::StrCat(root, "/credentials.pem");
  }
  if (!o.join_token.empty() && !std::filesystem::exists(o.credentials)) {
    JoinOptions j{.masters = o.master, .token = o.join_token, .ca_hash = o.ca_hash,
                  .machine = o.name.empty() ? HostName() : o.name};
    absl::StatusOr<pki::Credential> joined = JoinCell(j);
    if (!joined.ok()) {
      return absl::Status(joined.status().code(), absl::StrCat("--join: ", joined.status().message()));
    }
    HERD_RETURN_IF_ERROR(pki::SaveCredential(o.credentials, *joined));
    HERD_LOG_INFO("joined the cell as machine {} with join token {}; credential in {}", j.machine,
                  j.token.substr(0, j.token.find('.')), o.credentials);
  }
  absl::StatusOr<pki::Credential> self = pki::LoadCredential(o.credentials);
  if (!self.ok()) {
    return absl::Status(self.status().code(),
                        absl::StrCat(self.status().message(), "; an agent needs its machine's credential (herd ca "
                                                              "issue --ca DIR --machine NAME --out FILE, or herd "
                                                              "agent --join TOKEN --ca-hash HASH)"));
  }
  if (self->info.subject.role != pki::Role::kMachine) {
    return absl::InvalidArgumentError(absl::StrCat(o.credentials, ": the credential is for ",
                                                   pki::Describe(self->info.subject), ", not a machine"));
  }
  if (o.name.empty()) o.name = self->info.subject.name;
  if (o.name != self->info.subject.name) {
    return absl::InvalidArgumentError(absl::StrCat("--name ", o.name, ": the credential ", o.credentials,
                                                   " is for machine ", self->info.subject.name));
  }
  o.identity = *self;
  if (o.root_dir.empty()) o.root_dir = absl::StrCat("/var/lib/herd/agent/", o.name);
  std::error_code ec;
  std::filesystem::create_directories(o.root_dir, ec);
  if (ec) return absl::FailedPreconditionError(absl::StrCat("cannot create ", o.root_dir, ": ", ec.message()));
  if (o.port_min < 1 || o.port_max > 65535 || o.port_min > o.port_max) {
    return absl::InvalidArgumentError(absl::StrCat("bad port range ", o.port_min, "-", o.port_max));
  }
  const ResourceVector detected = DetectCapacity(o.root_dir);
  if (!o.capacity_given) o.capacity = detected;
  if (o.capacity.disk_bytes == 0) o.capacity.disk_bytes = detected.disk_bytes;
  o.capacity.ports = o.port_max - o.port_min + 1;
  if (o.package_dir.empty()) o.package_dir = o.root_dir + "/packages";
  *attrs = DetectAttributes();
  for (const auto& [k, v] : o.attributes) (*attrs)[k] = v;
  return absl::OkStatus();
}

// The extensions (containers, ports, health, packages) and the supervisor
// over them, which re-adopts the runs it finds under the root directory.
absl::StatusOr<std::unique_ptr<Supervisor>> StartSupervisor(const AgentOptions& o, metrics::Registry* registry) {
  HERD_ASSIGN_OR_RETURN(std::vector<std::shared_ptr<Extension>> extensions, BuildExtensions(o));
  // Last: it counts what the others have said of an attempt (an OOM kill).
  if (registry != nullptr) extensions.push_back(std::make_shared<MetricsExtension>(*registry));
  Supervisor::Options so;
  so.root_dir = o.root_dir;
  so.shim_path = o.shim_path;
  so.clock = o.clock;
  so.log_max_bytes = o.log_max_bytes;
  so.log_keep = o.log_keep;
  so.log_retention_ms = o.log_retention_ms;
  so.crash_loop_failures = o.crash_loop_failures;
  // The colocation control reacts within a second (CgroupOptions::control_interval_ms).
  so.tick_ms = CgroupOptions().control_interval_ms;
  so.extensions = std::move(extensions);
  absl::StatusOr<std::unique_ptr<Supervisor>> sup = Supervisor::Create(so);
  if (!sup.ok()) {
    return absl::Status(sup.status().code(),
                        absl::StrCat("cannot start the supervisor in ", o.root_dir, ": ", sup.status().message()));
  }
  return sup;
}

// Drives the agent's Registrar (about once a second) and Doorbell (on every
// change, after letting a burst gather) on two threads, until destroyed.
class MasterContact {
 public:
  MasterContact(const AgentOptions& o, const Supervisor& sup, const PollServer& polls, std::string address,
                std::string http)
      : stub_(v1::Herd::NewStub(rpc::Channel(o.master, o.identity, rpc::MasterIdentity()))),
        registrar_(stub_.get(), polls, std::move(address), o.clock, o.master, std::move(http)),
        doorbell_(stub_.get(), sup, o.name),
        sup_(sup) {
    registering_ = std::thread([this] {
      while (!stop_) {
        registrar_.Tick();
        for (int i = 0; i < 10 && !stop_; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
    });
    ringing_ = std::thread([this] {
      while (!stop_) {
        const uint64_t before = doorbell_.version();
        if (sup_.WaitForChange(before, 200) == before) continue;
        // Let a burst of changes gather (and keep Observe, which copies every
        // run, to a few dozen calls a second).
        std::this_thread::sleep_for(std::chrono::milliseconds(Doorbell::kMinRingMs));
        doorbell_.Tick();
      }
    });
  }
  ~MasterContact() {
    stop_ = true;
    registering_.join();
    ringing_.join();
  }

 private:
  std::unique_ptr<v1::Herd::Stub> stub_;
  Registrar registrar_;
  Doorbell doorbell_;
  const Supervisor& sup_;
  std::atomic<bool> stop_{false};
  std::thread registering_, ringing_;
};

// `herd up`'s agents stop their tasks when they stop (a local cell leaves
// nothing behind); a real agent leaves them to the next agent.
void StopEveryTask(Supervisor& sup, Clock* clock) {
  HERD_LOG_INFO("stopping every task before exiting");
  sup.SetDesired({});
  uint64_t version = 0;
  std::vector<v1::RunStatus> runs = sup.Observe(&version);
  const int64_t deadline = clock->MonotonicMs() + 60'000;
  while (!runs.empty() && clock->MonotonicMs() < deadline) {
    version = sup.WaitForChange(version, 1000);
    runs = sup.Observe(&version);
  }
}

}  // namespace

int RunAgent(AgentOptions o) {
  InitLogging(absl::StrCat("agent ", o.name.empty() ? HostName() : o.name), o.log_file);
  InstallStopSignalHandlers();
  if (o.clock == nullptr) o.clock = RealClock::Get();
  std::map<std::string, std::string> attrs;
  if (absl::Status st = ResolveOptions(o, &attrs); !st.ok()) {
    HERD_LOG_ERROR("{}", st.message());
    return 1;
  }
  // Outlives the supervisor (whose extension updates it) and the server.
  metrics::Registry registry;
  metrics::Registry* const reg = o.metrics.empty() ? nullptr : &registry;
  absl::StatusOr<std::unique_ptr<Supervisor>> sup = StartSupervisor(o, reg);
  if (!sup.ok()) {
    HERD_LOG_ERROR("cannot start the agent: {}", sup.status().message());
    return 1;
  }
  PollServer polls(sup->get(), MachineFacts{o.name, o.capacity, attrs}, o.clock);
  AgentService service(sup->get(), &polls, o.name, o.shim_path, o.clock, o.identity.ca_pem);
  std::string bound;
  auto server = rpc::StartServer(o.listen, {&service}, o.identity, &bound);
  if (!server.ok()) {
    HERD_LOG_ERROR("{}", server.status().message());
    return 1;
  }
  HERD_LOG_INFO("agent {} listening on {} with {} (runs in {})", o.name, bound, o.capacity.ToString(), o.root_dir);
  std::unique_ptr<https::HttpsServer> metrics_server;
  if (reg != nullptr) {
    AddTaskUsageGauges(*reg, sup->get());
    https::HttpsServerOptions mo;
    mo.address = o.metrics;
    mo.identity = o.identity;
    mo.token_file = o.metrics_token_file;
    auto started = https::HttpsServer::Start(std::move(mo), reg);
    if (!started.ok()) {
      HERD_LOG_ERROR("{}", started.status().message());
      (*server)->Shutdown(std::chrono::system_clock::now());
      return 1;
    }
    metrics_server = std::move(*started);
    HERD_LOG_INFO("metrics on https://{}/metrics (TLS server name {})", metrics_server->address(),
                  metrics_server->server_name());
  }
  {
    MasterContact contact(o, **sup, polls, bound, metrics_server ? metrics_server->address() : "");
    WaitForStopSignal();
  }
  if (o.stop_tasks_on_exit) {
    polls.Drain();
    StopEveryTask(**sup, o.clock);
  } else {
    HERD_LOG_INFO("agent stopping; tasks keep running and will be re-adopted");
  }
  metrics_server.reset();  // its gauges read the supervisor
  (*server)->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  sup->reset();
  return 0;
}

}  // namespace herd::agent
