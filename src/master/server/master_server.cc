#include "base/signals.h"
#include "master/server/master_server.h"

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "base/log.h"
#include "master/server/grpc_api.h"
#include "rpc/rpc.h"
#include "store/sqlite/sqlite_log_store.h"

namespace herd::master {
int RunMaster(const ServerOptions& options) {
  InitLogging("master", options.log_file);
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
  GrpcAgentLink link;
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
  HerdService service(core->get());
  std::string bound;
  auto server = rpc::StartServer(options.listen, {&service}, &bound);
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
