#include "base/signals.h"
#include "master/server/master_server.h"

#include <sys/statvfs.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "base/log.h"
#include "master/core/admission/audit.h"
#include "master/server/grpc_api.h"
#include "rpc/rpc.h"
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

}  // namespace

int RunMaster(const ServerOptions& o) {
  InitLogging("master", o.log_file);
  ServerOptions options = o;
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
  std::string db = (std::filesystem::path(options.data_dir) / "cell.db").string();
  auto store = store::SqliteLogStore::Open(db);
  if (!store.ok()) {
    HERD_LOG_ERROR("cannot open the store {}: {}", db, store.status().ToString());
    return 1;
  }
  auto t0 = std::chrono::steady_clock::now();
  GrpcAgentLink link(*options.core.credential);
  // The disk the store is on: changes stop, reads go on, below the reserve.
  options.core.committer.free_bytes = [dir = options.data_dir]() -> int64_t {
    struct statvfs vfs;
    if (statvfs(dir.c_str(), &vfs) != 0) return -1;
    return static_cast<int64_t>(vfs.f_bavail) * static_cast<int64_t>(vfs.f_frsize);
  };
  auto core = MasterCore::Create(store->get(), &link, RealClock::Get(), options.core);
  if (!core.ok()) {
    HERD_LOG_ERROR("recovery failed: {}", core.status().ToString());
    return 1;
  }
  double recover_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  (*core)->SetFatalHandler([](const absl::Status& st) {
    HERD_LOG_ERROR("store failure, exiting so that recovery can rebuild from disk: {}", st.ToString());
    std::_Exit(3);
  });
  RateLimiter limiter(RealClock::Get(), {.per_second = options.user_rate, .burst = 2 * options.user_rate});
  HerdService service(core->get(), &limiter);
  std::string bound;
  auto server = rpc::StartServer(options.listen, {&service}, *options.core.credential, &bound);
  if (!server.ok()) {
    HERD_LOG_ERROR("{}", server.status().message());
    return 1;
  }
  (*core)->Start();
  {
    // Whole or not at all (renamed into place): `herd up --listen HOST:0`
    // and the tests read it to find the port.
    const std::filesystem::path addr = std::filesystem::path(options.data_dir) / "master.addr";
    std::ofstream(addr.string() + ".tmp") << bound << "\n";
    std::error_code ec;
    std::filesystem::rename(addr.string() + ".tmp", addr, ec);
  }
  HERD_LOG_INFO("master of cell '{}' listening on {} (data in {}, recovered in {:.1f} ms, scheduler {})",
                options.core.cell_name, bound, options.data_dir, recover_ms,
                options.core.run_scheduler ? "internal" : "external: placements come from 'herd scheduler'");

  WaitForStopSignal();
  HERD_LOG_INFO("master stopping");
  (*server)->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  (*core)->Stop();
  if (auto* loop = (*core)->scheduler()) {
    auto s = loop->stats();
    HERD_LOG_INFO("scheduler stats: passes {}, proposed {}, accepted {}, rejected {}", s.passes, s.proposed,
                  s.accepted, s.rejected);
  }
  core->reset();
  return 0;
}

}  // namespace herd::master
