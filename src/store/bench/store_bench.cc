// store_bench: durable mutations per second through SqliteLogStore and
// through EtcdLogStore on a real etcd cluster (Debian's etcd-server, N
// members on loopback, data on the same disk), with and without group
// commit, on realistic mutations (nine TaskObserved for every
// JobsSubmitted). Each writer thread does what the master does: assign a
// revision and Enqueue under a state lock, then WaitDurable outside it.
// The baseline, measured in the same run: one Append (one transaction, one
// fsync) per mutation from a single writer, for each backend.
//
//   store_bench [--seconds=N] [--etcd-members=N]
//     (defaults: 3 s per configuration, 3 members; 0 members: SQLite only)
//
// Prints a table and one `RESULT name=value` line per figure.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "store/group_commit.h"
#include "store/log_store.h"
#include "store/etcd/etcd_log_store.h"
#include "store/etcd/testing.h"
#include "store/etcd/leader_lease.h"
#include "store/sqlite/sqlite_log_store.h"
#include "store/test_util.h"

namespace herd::store {
namespace {

using Clock = std::chrono::steady_clock;

struct Figure {
  std::string name;
  std::string config;
  int writers = 0;
  int64_t mutations = 0;
  double seconds = 0;
  int64_t flushes = 0;
  double p50_us = 0;
  double p99_us = 0;
  double per_s() const { return mutations / seconds; }
};

double Percentile(std::vector<double>& v, double p) {
  if (v.empty()) return 0;
  size_t k = static_cast<size_t>(p * (v.size() - 1));
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
  return v[k];
}

[[noreturn]] void Die(const absl::Status& st) {
  std::fprintf(stderr, "store_bench: %s\n", st.ToString().c_str());
  std::exit(1);
}

std::unique_ptr<SqliteLogStore> OpenFresh(const testing::TempDir& dir, const std::string& name) {
  auto s = SqliteLogStore::Open(dir.File(name + ".db"));
  if (!s.ok()) Die(s.status());
  return std::move(s).value();
}

Figure SingleAppend(const std::string& backend, LogStore* store, double seconds) {
  Figure f{.name = backend + "_single_append",
           .config = "Append per mutation, no group commit",
           .writers = 1};
  std::vector<double> lat;
  const auto start = Clock::now();
  const auto end = start + std::chrono::duration<double>(seconds);
  int64_t rev = 0;
  for (auto now = start; now < end; now = Clock::now()) {
    v1::Mutation m = testing::RealisticMutation(++rev);
    auto t0 = Clock::now();
    if (absl::Status st = store->Append({&m, 1}); !st.ok()) Die(st);
    lat.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  }
  f.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  f.mutations = rev;
  f.flushes = rev;
  f.p50_us = Percentile(lat, 0.50);
  f.p99_us = Percentile(lat, 0.99);
  return f;
}

Figure GroupCommit(const std::string& name, const std::string& config, LogStore* store, int writers,
                   double seconds) {
  Figure f{.name = name, .config = config, .writers = writers};
  GroupCommitLog log(store);
  std::atomic<int64_t> flushes{0};
  log.SetOnDurable([&](int64_t) { flushes.fetch_add(1, std::memory_order_relaxed); });
  std::mutex state_mu;
  int64_t next = log.DurableRevision();
  const int64_t base = next;
  std::atomic<bool> stop{false};
  std::vector<std::vector<double>> lat(writers);
  std::vector<std::thread> threads;
  const auto start = Clock::now();
  for (int w = 0; w < writers; ++w) {
    threads.emplace_back([&, w] {
      while (!stop.load(std::memory_order_relaxed)) {
        int64_t rev;
        auto t0 = Clock::now();
        {
          std::lock_guard l(state_mu);
          rev = ++next;
          std::vector<v1::Mutation> ms;
          ms.push_back(testing::RealisticMutation(rev));
          log.Enqueue(std::move(ms));
        }
        if (absl::Status st = log.WaitDurable(rev); !st.ok()) Die(st);
        lat[w].push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  stop = true;
  for (auto& t : threads) t.join();
  f.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  f.mutations = log.DurableRevision() - base;
  f.flushes = flushes.load();
  std::vector<double> all;
  for (auto& v : lat) all.insert(all.end(), v.begin(), v.end());
  f.p50_us = Percentile(all, 0.50);
  f.p99_us = Percentile(all, 0.99);
  return f;
}

// A fresh, fenced etcd store under its own prefix (the bench holds the
// leader key, as a master would).
struct EtcdStore {
  std::unique_ptr<etcd::Client> client;
  std::unique_ptr<etcd::LeaderLease> lease;
  std::unique_ptr<etcd::EtcdLogStore> store;
};

EtcdStore OpenEtcd(const std::vector<std::string>& endpoints, const std::string& name) {
  EtcdStore e;
  etcd::ClientOptions co;
  co.endpoints = endpoints;
  auto c = etcd::Client::Connect(co);
  if (!c.ok()) Die(c.status());
  e.client = std::move(c).value();
  etcd::StoreOptions so;
  so.prefix = absl::StrCat("/bench/", name, "/");
  auto l = etcd::LeaderLease::Campaign(e.client.get(),
                                       etcd::LeaseOptions{so.prefix + "leader", "bench"}, nullptr);
  if (!l.ok()) Die(l.status());
  e.lease = std::move(l).value();
  auto s = etcd::EtcdLogStore::Open(e.client.get(), so, e.lease->fence());
  if (!s.ok()) Die(s.status());
  e.store = std::move(s).value();
  return e;
}

int Main(int argc, char** argv) {
  double seconds = 3;
  int etcd_members = 3;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--seconds=", 10) == 0) {
      seconds = std::atof(argv[i] + 10);
    } else if (std::strncmp(argv[i], "--etcd-members=", 15) == 0) {
      etcd_members = std::atoi(argv[i] + 15);
    } else {
      std::fprintf(stderr, "usage: %s [--seconds=N] [--etcd-members=N]\n", argv[0]);
      return 2;
    }
  }
  testing::TempDir dir;
  if (dir.path().empty()) Die(absl::InternalError("cannot create a temporary directory"));

  size_t bytes = 0;
  for (int64_t r = 1; r <= 1000; ++r) bytes += testing::RealisticMutation(r).ByteSizeLong();
  std::printf("store_bench: %.1f s per configuration, mean mutation %zu bytes, db under %s\n\n",
              seconds, bytes / 1000, dir.path().c_str());

  std::vector<Figure> figures;
  {
    auto store = OpenFresh(dir, "single");
    figures.push_back(SingleAppend("sqlite", store.get(), seconds));
  }
  for (int writers : {1, 4, 16}) {
    auto store = OpenFresh(dir, absl::StrCat("group", writers));
    figures.push_back(GroupCommit(absl::StrCat("sqlite_group_commit_", writers, "w"),
                                  "GroupCommitLog over SqliteLogStore", store.get(), writers,
                                  seconds));
  }
  std::unique_ptr<etcd::testing::EtcdCluster> cluster;
  if (etcd_members > 0) {
    cluster = std::make_unique<etcd::testing::EtcdCluster>(dir.path(), etcd_members);
    if (absl::Status st = cluster->Start(); !st.ok()) Die(st);
    std::printf("etcd: %d members at %s\n\n", etcd_members,
                absl::StrJoin(cluster->Endpoints(), ",").c_str());
    {
      EtcdStore e = OpenEtcd(cluster->Endpoints(), "single");
      figures.push_back(SingleAppend("etcd", e.store.get(), seconds));
    }
    for (int writers : {1, 4, 16}) {
      EtcdStore e = OpenEtcd(cluster->Endpoints(), absl::StrCat("group", writers));
      figures.push_back(GroupCommit(absl::StrCat("etcd_group_commit_", writers, "w"),
                                    "GroupCommitLog over EtcdLogStore", e.store.get(), writers,
                                    seconds));
    }
  }
  {
    // The machinery's own ceiling: group commit with nothing durable behind it.
    MemoryLogStore memory;
    figures.push_back(GroupCommit("memory_group_commit_16w", "GroupCommitLog over MemoryLogStore",
                                  &memory, 16, seconds));
  }

  std::printf("%-28s %7s %12s %10s %10s %10s %10s\n", "figure", "writers", "mutations/s",
              "flushes/s", "batch", "p50 us", "p99 us");
  for (const Figure& f : figures) {
    std::printf("%-28s %7d %12.0f %10.0f %10.1f %10.0f %10.0f\n", f.name.c_str(), f.writers,
                f.per_s(), f.flushes / f.seconds,
                f.flushes > 0 ? static_cast<double>(f.mutations) / f.flushes : 0.0, f.p50_us,
                f.p99_us);
  }
  std::printf("\n");
  auto per_s = [&](const std::string& name) {
    for (const Figure& f : figures) {
      if (f.name == name) return f.per_s();
    }
    return 0.0;
  };
  for (const Figure& f : figures) {
    std::printf("RESULT %s_mutations_per_s=%.0f\n", f.name.c_str(), f.per_s());
  }
  for (const Figure& f : figures) {
    std::printf("RESULT %s_p99_wait_us=%.0f\n", f.name.c_str(), f.p99_us);
  }
  for (const Figure& f : figures) {
    for (const char* backend : {"sqlite", "etcd"}) {
      const std::string b = backend;
      if (f.name.rfind(b + "_group", 0) != 0) continue;
      std::printf("RESULT %s_vs_single_append=%.2f\n", f.name.c_str(),
                  f.per_s() / per_s(b + "_single_append"));
    }
  }
  if (etcd_members > 0) {
    for (int writers : {1, 4, 16}) {
      std::printf("RESULT etcd_vs_sqlite_group_commit_%dw=%.2f\n", writers,
                  per_s(absl::StrCat("etcd_group_commit_", writers, "w")) /
                      per_s(absl::StrCat("sqlite_group_commit_", writers, "w")));
    }
  }
  return 0;
}

}  // namespace
}  // namespace herd::store

int main(int argc, char** argv) { return herd::store::Main(argc, argv); }
