#include "agent/server/hollow_agents.h"

#include <time.h>

#include <chrono>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/log.h"
#include "herd/v1/agent.grpc.pb.h"
#include "herd/v1/api.grpc.pb.h"
#include "rpc/rpc.h"

namespace herd::agent {

struct HollowAgents::Agent {
  std::string name;
  pki::Credential credential;
  std::unique_ptr<HollowRunTable> table;
  std::unique_ptr<PollServer> polls;
  std::unique_ptr<v1::Herd::Stub> master;
  std::unique_ptr<Registrar> registrar;
  std::unique_ptr<Doorbell> doorbell;
};

// The Agent service for every hollow machine: a poll goes to the machine
// it names (the master reached this port as that machine: the TLS handshake
// presented that machine's certificate).
class HollowAgents::Service final : public v1::Agent::Service {
 public:
  void Add(const std::string& name, PollServer* polls) { polls_[name] = polls; }
  grpc::Status Poll(grpc::ServerContext* ctx, const v1::PollRequest* req, v1::PollResponse* resp) override {
    auto it = polls_.find(req->machine());
    if (it == polls_.end()) {
      return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, absl::StrCat("no hollow machine ", req->machine()));
    }
    return it->second->Poll(ctx, *req, resp);
  }
  grpc::Status ReadLogs(grpc::ServerContext*, const v1::ReadLogsRequest*,
                        grpc::ServerWriter<v1::LogChunk>*) override {
    return grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "hollow agents run no processes and keep no logs");
  }
  grpc::Status Exec(grpc::ServerContext*, const v1::ExecRequest*, grpc::ServerWriter<v1::ExecOutput>*) override {
    return grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "hollow agents run no processes");
  }

 private:
  absl::flat_hash_map<std::string, PollServer*> polls_;  // filled before serving, read-only after
};

HollowAgents::HollowAgents(const HollowOptions& options)
    : options_(options), runtime_(options.runtime, options.clock) {}

absl::StatusOr<std::unique_ptr<HollowAgents>> HollowAgents::Start(const HollowOptions& o, const pki::Authority& ca) {
  if (o.agents < 1 || o.agents_per_port < 1 || o.contact_threads < 1) {
    return absl::InvalidArgumentError("hollow agents: agents, agents_per_port and contact_threads must be positive");
  }
  std::unique_ptr<HollowAgents> h(new HollowAgents(o));
  const int64_t now_s = time(nullptr);
  const int width = o.width > 0 ? o.width : static_cast<int>(absl::StrCat(o.first + o.agents - 1).size());
  h->service_ = std::make_unique<Service>();
  std::vector<rpc::Listener> listeners;
  for (int i = 0; i < o.agents; ++i) {
    auto a = std::make_unique<Agent>();
    a->name = absl::StrCat(o.name_prefix, absl::StrFormat("%0*d", width, o.first + i));
    absl::StatusOr<pki::Credential> cred =
        pki::IssueCredential(ca, rpc::MachineIdentity(a->name), now_s - 60, 7 * 24 * 3600);
    if (!cred.ok()) return cred.status();
    a->credential = std::move(*cred);
    a->table = std::make_unique<HollowRunTable>(&h->runtime_);
    // No wait for starts in the reply: hollow starts are quick, and the
    // doorbell tells the master when they are done; a wait would hold one of
    // the shared server's threads per busy machine.
    a->polls = std::make_unique<PollServer>(a->table.get(), MachineFacts{a->name, o.capacity, o.attributes}, o.clock,
                                            /*start_wait_ms=*/0);
    h->service_->Add(a->name, a->polls.get());
    if (i % o.agents_per_port == 0) listeners.push_back(rpc::Listener{absl::StrCat(o.listen_host, ":0"), {}});
    listeners.back().identities.push_back(a->credential);
    h->agents_.push_back(std::move(a));
  }
  auto server = rpc::StartServer(listeners, {h->service_.get()}, &h->ports_);
  if (!server.ok()) return server.status();
  h->server_ = std::move(*server);
  for (int i = 0; i < o.agents; ++i) {
    Agent& a = *h->agents_[i];
    const std::string& address = h->ports_[i / o.agents_per_port];
    a.master =
        v1::Herd::NewStub(rpc::Channel(o.master, a.credential, rpc::MasterIdentity(), o.master_idle_timeout_ms));
    a.registrar = std::make_unique<Registrar>(a.master.get(), *a.polls, address, o.clock, o.master);
    a.doorbell = std::make_unique<Doorbell>(a.master.get(), *a.table, a.name);
  }
  h->runtime_.Start();
  for (int t = 0; t < o.contact_threads; ++t) h->threads_.emplace_back([p = h.get(), t] { p->Contact(t); });
  return h;
}

HollowAgents::~HollowAgents() {
  stop_ = true;
  for (auto& t : threads_) t.join();
  if (server_) server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
}

void HollowAgents::Contact(int thread) {
  const int n = static_cast<int>(agents_.size());
  const int threads = options_.contact_threads;
  int64_t last_registration_round = 0;
  while (!stop_) {
    const int64_t now = options_.clock->MonotonicMs();
    const bool register_round = now - last_registration_round >= 1000;
    if (register_round) last_registration_round = now;
    for (int i = thread; i < n && !stop_; i += threads) {
      Agent& a = *agents_[i];
      if (register_round) a.registrar->Tick();
      if (a.registrar->registered() && a.doorbell->Tick()) ++rings_;
    }
    // A burst of changes gathers between rounds, as the real agent lets it
    // for Doorbell::kMinRingMs.
    std::this_thread::sleep_for(std::chrono::milliseconds(Doorbell::kMinRingMs));
  }
}

int HollowAgents::registered() const {
  int n = 0;
  for (const auto& a : agents_) n += a->registrar->registered();
  return n;
}

int64_t HollowAgents::starts() const {
  int64_t n = 0;
  for (const auto& a : agents_) n += a->table->starts();
  return n;
}

int64_t HollowAgents::live() const {
  int64_t n = 0;
  for (const auto& a : agents_) n += a->table->live();
  return n;
}

}  // namespace herd::agent
