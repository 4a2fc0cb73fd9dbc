#include "agent/server/agent_server.h"

#include <semaphore.h>
#include <sys/statvfs.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "agent/server/exec.h"
#include "agent/server/extensions.h"
#include "agent/server/logs.h"
#include "agent/supervisor/supervisor.h"
#include "base/log.h"
#include "herd/v1/agent.grpc.pb.h"
#include "herd/v1/api.grpc.pb.h"
#include "rpc/rpc.h"

namespace herd::agent {
namespace {

sem_t g_stop;
void OnSignal(int) { sem_post(&g_stop); }

int64_t MonoMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

class AgentService final : public v1::Agent::Service {
 public:
  AgentService(Supervisor* sup, std::string name, ResourceVector capacity, std::map<std::string, std::string> attrs,
               std::string shim_path = "")
      : sup_(sup),
        name_(std::move(name)),
        capacity_(std::move(capacity)),
        attrs_(std::move(attrs)),
        shim_path_(std::move(shim_path)) {}

  grpc::Status Poll(grpc::ServerContext* ctx, const v1::PollRequest* req, v1::PollResponse* resp) override {
    last_poll_ms_ = MonoMs();
    if (!req->machine().empty() && req->machine() != name_) {
      return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                          absl::StrCat("this agent is ", name_, ", not ", req->machine()));
    }
    std::vector<v1::TaskRun> desired(req->desired().begin(), req->desired().end());
    sup_->SetDesired(desired);
    // Give new runs a moment to start so this reply already shows them
    // running (a start takes milliseconds; the next poll is seconds away).
    uint64_t version = 0;
    std::vector<v1::RunStatus> runs = sup_->Observe(&version);
    auto deadline = MonoMs() + 250;
    while (MonoMs() < deadline) {
      bool starting = false;
      for (const auto& r : runs) starting |= r.phase() == v1::Task::STARTING;
      if (!starting) break;
      version = sup_->WaitForChange(version, deadline - MonoMs());
      runs = sup_->Observe(&version);
    }
    resp->set_machine(name_);
    capacity_.ToProto(resp->mutable_capacity());
    for (const auto& [k, v] : attrs_) (*resp->mutable_attributes())[k] = v;
    for (auto& r : runs) *resp->add_runs() = std::move(r);
    resp->set_agent_started_ms(sup_->started_ms());
    sup_->DescribeMachine(resp);
    return grpc::Status::OK;
  }

  grpc::Status ReadLogs(grpc::ServerContext* ctx, const v1::ReadLogsRequest* req,
                        grpc::ServerWriter<v1::LogChunk>* writer) override {
    return ServeLogs(*sup_, ctx, *req, writer);
  }

  grpc::Status Exec(grpc::ServerContext* ctx, const v1::ExecRequest* req,
                    grpc::ServerWriter<v1::ExecOutput>* writer) override {
    return ServeExec(*sup_, shim_path_, ctx, *req, writer);
  }

  int64_t last_poll_ms() const { return last_poll_ms_.load(); }

 private:
  Supervisor* const sup_;
  const std::string name_;
  const ResourceVector capacity_;
  const std::map<std::string, std::string> attrs_;
  const std::string shim_path_;  // for herd-shim --enter; empty: next to herd
  std::atomic<int64_t> last_poll_ms_{0};
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

int RunAgent(AgentOptions o) {
  if (o.name.empty()) o.name = HostName();
  InitLogging(absl::StrCat("agent ", o.name), o.log_file);
  if (o.root_dir.empty()) o.root_dir = absl::StrCat("/var/lib/herd/agent/", o.name);
  std::error_code ec;
  std::filesystem::create_directories(o.root_dir, ec);
  if (ec) {
    HERD_LOG_ERROR("cannot create {}: {}", o.root_dir, ec.message());
    return 1;
  }
  ResourceVector capacity = o.capacity_given ? o.capacity : DetectCapacity(o.root_dir);
  if (o.capacity_given) {
    ResourceVector detected = DetectCapacity(o.root_dir);
    if (capacity.disk_bytes == 0) capacity.disk_bytes = detected.disk_bytes;
    if (capacity.ports == 0) capacity.ports = detected.ports;
  }
  std::map<std::string, std::string> attrs = DetectAttributes();
  for (const auto& [k, v] : o.attributes) attrs[k] = v;

  if (o.port_min < 1 || o.port_max > 65535 || o.port_min > o.port_max) {
    HERD_LOG_ERROR("bad port range {}-{}", o.port_min, o.port_max);
    return 1;
  }
  capacity.ports = o.port_max - o.port_min + 1;
  if (o.package_dir.empty()) o.package_dir = o.root_dir + "/packages";
  o.capacity = capacity;  // what extensions size themselves by (memory for eviction)
  absl::StatusOr<std::vector<std::shared_ptr<Extension>>> extensions = BuildExtensions(o);
  if (!extensions.ok()) {
    HERD_LOG_ERROR("cannot start the agent: {}", extensions.status().ToString());
    return 1;
  }
  Supervisor::Options so;
  so.root_dir = o.root_dir;
  so.shim_path = o.shim_path;
  so.log_max_bytes = o.log_max_bytes;
  so.log_keep = o.log_keep;
  so.log_retention_ms = o.log_retention_ms;
  so.crash_loop_failures = o.crash_loop_failures;
  so.extensions = *std::move(extensions);
  auto sup = Supervisor::Create(so);
  if (!sup.ok()) {
    HERD_LOG_ERROR("cannot start the supervisor in {}: {}", o.root_dir, sup.status().ToString());
    return 1;
  }
  AgentService service(sup->get(), o.name, capacity, attrs, o.shim_path);
  std::string bound;
  auto server = rpc::StartServer(o.listen, {&service}, &bound);
  if (!server.ok()) {
    HERD_LOG_ERROR("{}", server.status().message());
    return 1;
  }
  HERD_LOG_INFO("agent {} listening on {} with {} (runs in {})", o.name, bound, capacity.ToString(), o.root_dir);

  // Register, and register again whenever the master stops polling us (it
  // may have lost us, or been replaced).
  std::atomic<bool> stop{false};
  std::thread registrar([&] {
    auto stub = v1::Herd::NewStub(rpc::Channel(o.master));
    int64_t interval_ms = 2000;
    int64_t registered_at = 0;
    bool warned = false;
    while (!stop) {
      bool need = registered_at == 0 ||
                  (MonoMs() - std::max(registered_at, service.last_poll_ms()) > 5 * interval_ms);
      if (need) {
        v1::RegisterMachineRequest req;
        v1::Machine* m = req.mutable_machine();
        m->set_name(o.name);
        m->set_address(bound);
        capacity.ToProto(m->mutable_capacity());
        for (const auto& [k, v] : attrs) (*m->mutable_attributes())[k] = v;
        v1::RegisterMachineResponse resp;
        auto ctx = rpc::Context("", 5000);
        grpc::Status st = stub->RegisterMachine(ctx.get(), req, &resp);
        if (st.ok()) {
          interval_ms = std::max<int64_t>(100, resp.poll_interval_ms());
          registered_at = MonoMs();
          HERD_LOG_INFO("registered with the master at {}", o.master);
          warned = false;
        } else if (!warned) {
          HERD_LOG_WARN("cannot register with the master at {}: {} (will keep trying)", o.master, st.error_message());
          warned = true;
        }
      }
      for (int i = 0; i < 10 && !stop; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });

  sem_init(&g_stop, 0, 0);
  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);
  std::signal(SIGPIPE, SIG_IGN);
  while (sem_wait(&g_stop) != 0) {
  }
  stop = true;
  registrar.join();
  if (o.stop_tasks_on_exit) {
    HERD_LOG_INFO("stopping every task before exiting");
    (*sup)->SetDesired({});
    uint64_t version = 0;
    auto runs = (*sup)->Observe(&version);
    auto deadline = MonoMs() + 60'000;
    while (!runs.empty() && MonoMs() < deadline) {
      version = (*sup)->WaitForChange(version, 1000);
      runs = (*sup)->Observe(&version);
    }
  } else {
    HERD_LOG_INFO("agent stopping; tasks keep running and will be re-adopted");
  }
  (*server)->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  sup->reset();
  return 0;
}

}  // namespace herd::agent
