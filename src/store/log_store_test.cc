// The LogStore conformance suite (log_store_conformance.h) for the memory
// and SQLite backends; the etcd backend runs it in etcd_log_store_test.cc.
#include "store/log_store_conformance.h"

#include "store/sqlite/sqlite_log_store.h"

namespace herd::store::conformance {
namespace {

INSTANTIATE_TEST_SUITE_P(
    Backends, LogStoreConformance,
    ::testing::Values(Backend{"Memory",
                              [](const std::string&) -> std::unique_ptr<LogStore> {
                                return std::make_unique<MemoryLogStore>();
                              }},
                      Backend{"Sqlite",
                              [](const std::string& dir) -> std::unique_ptr<LogStore> {
                                auto s = SqliteLogStore::Open(dir + "/herd.db");
                                EXPECT_TRUE(s.ok()) << s.status();
                                if (!s.ok()) return nullptr;
                                return std::move(s).value();
                              }}),
    BackendName);

}  // namespace
}  // namespace herd::store::conformance
