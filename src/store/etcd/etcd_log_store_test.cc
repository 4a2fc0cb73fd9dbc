// The etcd backend against real etcd processes (Debian's etcd-server): the
// LogStore conformance suite, then what only this backend has -- fencing,
// large appends in parts, chunked snapshots, compaction of etcd's history,
// members dying under it -- and LeaderLease.
#include "store/etcd/etcd_log_store.h"

#include <atomic>
#include <chrono>
#include <thread>

#include "absl/strings/str_cat.h"
#include "store/etcd/testing.h"
#include "store/etcd/leader_lease.h"
#include "store/log_store_conformance.h"
#include "testing/eventually.h"

namespace herd::store::etcd {
namespace {

using ::testing::HasSubstr;
using conformance::LogStoreConformance;
using conformance::Range;
using conformance::Seq;
namespace st = ::herd::store::testing;

// One single-member etcd for the tests that need no member to die.
testing::EtcdCluster& SharedEtcd() {
  // Statics, destroyed at exit in reverse order: the member, then its data.
  static st::TempDir dir;
  static testing::EtcdCluster cluster(dir.path(), 1);
  static const absl::Status started = cluster.Start();
  EXPECT_TRUE(started.ok()) << started;
  return cluster;
}

std::string UniquePrefix() {
  static std::atomic<int> n{0};
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  return absl::StrCat("/test/", getpid(), "/", info ? info->name() : "x", "-", n++, "/");
}

std::unique_ptr<Client> Connect(const std::vector<std::string>& endpoints,
                                absl::Duration call_timeout = absl::Seconds(8)) {
  ClientOptions o;
  o.endpoints = endpoints;
  o.attempt_timeout = absl::Seconds(1);
  o.call_timeout = call_timeout;
  auto c = Client::Connect(o);
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? std::move(c).value() : nullptr;
}

std::unique_ptr<LeaderLease> Elect(Client* c, const std::string& key, const std::string& who) {
  auto l = LeaderLease::Campaign(c, LeaseOptions{key, who, absl::Seconds(2)}, nullptr);
  EXPECT_TRUE(l.ok()) << l.status();
  return l.ok() ? std::move(l).value() : nullptr;
}

// A LogStore that owns its client and lease, for the conformance suite.
class OwningStore final : public LogStore {
 public:
  explicit OwningStore(const std::string& prefix) {
    client_ = Connect(SharedEtcd().Endpoints());
    lease_ = Elect(client_.get(), prefix + "leader", "conformance");
    StoreOptions o;
    o.prefix = prefix;
    o.chunk_bytes = 64 << 10;  // several parts for the large-batch test
    auto s = EtcdLogStore::Open(client_.get(), o, lease_->fence());
    EXPECT_TRUE(s.ok()) << s.status();
    store_ = std::move(s).value();
  }
  absl::Status Append(absl::Span<const v1::Mutation> m) override { return store_->Append(m); }
  absl::StatusOr<int64_t> LastRevision() override { return store_->LastRevision(); }
  absl::StatusOr<int64_t> FirstRevision() override { return store_->FirstRevision(); }
  absl::Status WriteSnapshot(const v1::CellSnapshot& s) override { return store_->WriteSnapshot(s); }
  absl::StatusOr<std::optional<v1::CellSnapshot>> ReadSnapshot(int64_t r) override {
    return store_->ReadSnapshot(r);
  }
  absl::Status ReadLog(int64_t from, int64_t to,
                       const std::function<absl::Status(const v1::Mutation&)>& fn) override {
    return store_->ReadLog(from, to, fn);
  }
  absl::Status Compact(int64_t r) override { return store_->Compact(r); }

 private:
  std::unique_ptr<Client> client_;
  std::unique_ptr<LeaderLease> lease_;
  std::unique_ptr<EtcdLogStore> store_;
};

INSTANTIATE_TEST_SUITE_P(Etcd, LogStoreConformance,
                         ::testing::Values(conformance::Backend{
                             "Etcd",
                             [](const std::string&) -> std::unique_ptr<LogStore> {
                               return std::make_unique<OwningStore>(UniquePrefix());
                             }}),
                         conformance::BackendName);

std::vector<int64_t> ReadAll(LogStore* s, int64_t from = 1, int64_t to = INT64_MAX) {
  std::vector<int64_t> revs;
  absl::Status st = s->ReadLog(from, to, [&](const v1::Mutation& m) {
    revs.push_back(m.revision());
    return absl::OkStatus();
  });
  EXPECT_TRUE(st.ok()) << st;
  return revs;
}

int64_t CountKeys(Client* c, const std::string& prefix) {
  pb::RangeRequest req;
  req.set_key(prefix);
  req.set_range_end(PrefixEnd(prefix));
  req.set_count_only(true);
  auto r = c->Range(req);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? r->count() : -1;
}

TEST(EtcdUrlTest, ParsesEndpointsAndPrefix) {
  auto u = ParseEtcdUrl("etcd://10.0.0.1:2379,host-b:2379/herd/cell-a/");
  ASSERT_TRUE(u.ok()) << u.status();
  EXPECT_EQ(u->endpoints, (std::vector<std::string>{"10.0.0.1:2379", "host-b:2379"}));
  EXPECT_EQ(u->prefix, "/herd/cell-a/");
  EXPECT_THAT(ParseEtcdUrl("http://a:1").status().message(), HasSubstr("expected etcd://"));
  EXPECT_THAT(ParseEtcdUrl("etcd://a:1,b").status().message(), HasSubstr("endpoint 'b'"));
  EXPECT_THAT(ParseEtcdUrl("etcd://a:99999").status().message(), HasSubstr("not HOST:PORT"));
}

TEST(EtcdLogStoreTest, ADeposedLeaderCannotWrite) {
  const std::string prefix = UniquePrefix();
  auto ca = Connect(SharedEtcd().Endpoints());
  auto cb = Connect(SharedEtcd().Endpoints());
  StoreOptions o;
  o.prefix = prefix;
  auto a_lease = Elect(ca.get(), prefix + "leader", "a");
  auto a = EtcdLogStore::Open(ca.get(), o, a_lease->fence());
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE((*a)->Append(Range(1, 3)).ok());
  ASSERT_TRUE((*a)->WriteSnapshot(st::Snapshot(3)).ok());

  // A's lease goes (as when it is cut off for a TTL); B takes over. A still
  // has its store object and tries to go on.
  ASSERT_TRUE(cb->LeaseRevoke(a_lease->lease_id()).ok());
  auto b_lease = Elect(cb.get(), prefix + "leader", "b");
  ASSERT_NE(b_lease->fence().create_revision, a_lease->fence().create_revision);
  auto b = EtcdLogStore::Open(cb.get(), o, b_lease->fence());
  ASSERT_TRUE(b.ok()) << b.status();
  ASSERT_TRUE((*b)->Append(Range(4, 5)).ok());

  absl::Status st = (*a)->Append(Range(6, 6));
  EXPECT_EQ(st.code(), absl::StatusCode::kAborted) << st;
  EXPECT_THAT(st.message(), HasSubstr("fenced"));
  EXPECT_THAT(st.message(), HasSubstr("by b"));
  EXPECT_EQ((*a)->WriteSnapshot(st::Snapshot(5)).code(), absl::StatusCode::kAborted);
  EXPECT_EQ((*a)->Compact(5).code(), absl::StatusCode::kAborted);
  // Even an append that continues B's log exactly.
  EXPECT_EQ((*a)->Append(Range(6, 7)).code(), absl::StatusCode::kAborted);

  EXPECT_EQ(ReadAll(b->get()), Seq(1, 5));
  EXPECT_EQ(ReadAll(a->get()), Seq(1, 5));  // reading is still fine
  auto ro = EtcdLogStore::OpenReadOnly(ca.get(), o);
  ASSERT_TRUE(ro.ok());
  EXPECT_EQ((*ro)->Append(Range(6, 6)).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(ReadAll(ro->get()), Seq(1, 5));
}

TEST(EtcdLogStoreTest, ALargeAppendGoesInPartsAndADeadWritersPartsAreDropped) {
  const std::string prefix = UniquePrefix();
  auto c = Connect(SharedEtcd().Endpoints());
  StoreOptions o;
  o.prefix = prefix;
  o.chunk_bytes = 4096;
  auto lease = Elect(c.get(), prefix + "leader", "a");
  auto s = EtcdLogStore::Open(c.get(), o, lease->fence());
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_TRUE((*s)->Append(Range(1, 500)).ok());  // ~90 KB: ~22 transactions
  EXPECT_GT(CountKeys(c.get(), prefix + "log/"), 10);
  EXPECT_EQ(ReadAll(s->get()), Seq(1, 500));
  EXPECT_EQ(ReadAll(s->get(), 250, 260), Seq(250, 260));

  // A writer that died after writing the first part of revisions 501..700.
  pb::PutRequest put;
  put.set_key(prefix + "log/00000000000000000700/000000");
  put.set_value("half of an append");
  ASSERT_TRUE(c->Put(put).ok());
  EXPECT_EQ(ReadAll(s->get()), Seq(1, 500));  // past head: nobody reads it

  // The next leader drops it before it appends; then a different 501..700
  // reads back whole, with nothing of the dead writer's.
  lease->Resign();
  auto lease2 = Elect(c.get(), prefix + "leader", "b");
  auto s2 = EtcdLogStore::Open(c.get(), o, lease2->fence());
  ASSERT_TRUE(s2.ok()) << s2.status();
  std::vector<v1::Mutation> next;
  for (int64_t r = 501; r <= 700; ++r) next.push_back(st::JobsSubmittedMutation(r));
  ASSERT_TRUE((*s2)->Append(next).ok());
  std::vector<v1::Mutation> got;
  ASSERT_TRUE((*s2)->ReadLog(501, 700, [&](const v1::Mutation& m) {
                  got.push_back(m);
                  return absl::OkStatus();
                }).ok());
  ASSERT_EQ(got.size(), 200u);
  EXPECT_TRUE(got[0].has_jobs_submitted());
  EXPECT_TRUE(got[199].has_jobs_submitted());
}

TEST(EtcdLogStoreTest, AnAppendRetriedAfterALostReplyIsNotAnError) {
  const std::string prefix = UniquePrefix();
  auto c = Connect(SharedEtcd().Endpoints());
  StoreOptions o;
  o.prefix = prefix;
  auto lease = Elect(c.get(), prefix + "leader", "a");
  auto s = EtcdLogStore::Open(c.get(), o, lease->fence());
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE((*s)->Append(Range(1, 3)).ok());
  // The same transaction again (what the client does when a reply is lost).
  EXPECT_TRUE((*s)->Append(Range(1, 3)).ok());
  EXPECT_EQ(ReadAll(s->get()), Seq(1, 3));
  // Different contents at the same revisions are not a retry.
  std::vector<v1::Mutation> other = {st::JobsSubmittedMutation(2),
                                     st::JobsSubmittedMutation(3)};
  EXPECT_EQ((*s)->Append(other).code(), absl::StatusCode::kFailedPrecondition);
}

TEST(EtcdLogStoreTest, SnapshotsGoInChunksAndAReplacedOneLeavesNothing) {
  const std::string prefix = UniquePrefix();
  auto c = Connect(SharedEtcd().Endpoints());
  StoreOptions o;
  o.prefix = prefix;
  o.chunk_bytes = 4096;
  auto lease = Elect(c.get(), prefix + "leader", "a");
  auto s = EtcdLogStore::Open(c.get(), o, lease->fence());
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE((*s)->Append(Range(1, 10)).ok());
  v1::CellSnapshot big = st::Snapshot(10);
  for (int i = 0; i < 2000; ++i) {
    auto* m = big.add_machines();
    m->set_name(absl::StrCat("machine-", i, ".rack-", i % 40, ".cell-a.example.com"));
  }
  ASSERT_TRUE((*s)->WriteSnapshot(big).ok());
  const int64_t chunks = CountKeys(c.get(), prefix + "snapdata/");
  EXPECT_GT(chunks, 10);
  auto back = (*s)->ReadSnapshot(100);
  ASSERT_TRUE(back.ok() && back->has_value()) << back.status();
  EXPECT_EQ((*back)->SerializeAsString(), big.SerializeAsString());
  // Replacing it: the new one reads back, the old chunks are gone.
  ASSERT_TRUE((*s)->WriteSnapshot(st::Snapshot(10, "small")).ok());
  back = (*s)->ReadSnapshot(100);
  ASSERT_TRUE(back.ok() && back->has_value());
  EXPECT_EQ((*back)->cell(), "small");
  EXPECT_EQ(CountKeys(c.get(), prefix + "snapdata/"), 1);
}

TEST(EtcdLogStoreTest, CompactionDropsKeysAndEtcdsOwnHistory) {
  const std::string prefix = UniquePrefix();
  auto c = Connect(SharedEtcd().Endpoints());
  StoreOptions o;
  o.prefix = prefix;
  auto lease = Elect(c.get(), prefix + "leader", "a");
  auto s = EtcdLogStore::Open(c.get(), o, lease->fence());
  ASSERT_TRUE(s.ok());
  for (int64_t r = 1; r <= 100; r += 10) ASSERT_TRUE((*s)->Append(Range(r, r + 9)).ok());
  EXPECT_EQ(CountKeys(c.get(), prefix + "log/"), 10);
  ASSERT_TRUE((*s)->WriteSnapshot(st::Snapshot(50)).ok());
  auto h = (*s)->ReadHead();
  ASSERT_TRUE(h.ok());
  const int64_t before = h->etcd_revision;
  ASSERT_TRUE((*s)->Compact(60).ok());
  EXPECT_EQ(CountKeys(c.get(), prefix + "log/"), 5);  // records ending 60..100
  EXPECT_EQ(ReadAll(s->get(), 51), Seq(51, 100));
  // A second compaction compacts etcd up to the first one: reading at an
  // etcd revision before it fails.
  ASSERT_TRUE((*s)->Append(Range(101, 110)).ok());
  ASSERT_TRUE((*s)->WriteSnapshot(st::Snapshot(105)).ok());
  ASSERT_TRUE((*s)->Compact(105).ok());
  pb::RangeRequest old;
  old.set_key(prefix + "head");
  old.set_revision(before);
  EXPECT_EQ(c->Range(old).status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(ReadAll(s->get(), 106), Seq(106, 110));
}

TEST(EtcdLogStoreTest, AFollowerSeesAppendsAsTheyHappen) {
  const std::string prefix = UniquePrefix();
  auto c = Connect(SharedEtcd().Endpoints());
  auto f = Connect(SharedEtcd().Endpoints());
  StoreOptions o;
  o.prefix = prefix;
  auto lease = Elect(c.get(), prefix + "leader", "a");
  auto s = EtcdLogStore::Open(c.get(), o, lease->fence());
  ASSERT_TRUE(s.ok());
  auto follower = EtcdLogStore::OpenReadOnly(f.get(), o);
  ASSERT_TRUE(follower.ok());
  auto head = (*follower)->ReadHead();
  ASSERT_TRUE(head.ok());
  EXPECT_EQ(head->revision, 0);
  std::thread writer([&] { EXPECT_TRUE((*s)->Append(Range(1, 4)).ok()); });
  // Waits for the event (the timeout only bounds a failure).
  auto next = (*follower)->WaitForAppend(*head, absl::Seconds(30));
  writer.join();
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(next->revision, 4);
  EXPECT_EQ(ReadAll(follower->get(), 1, next->revision), Seq(1, 4));
}

// Three members; the store's client knows all three.
TEST(EtcdClusterTest, TheStoreOutlivesAMemberAndStopsWithoutAQuorum) {
  st::TempDir dir;
  testing::EtcdCluster cluster(dir.path(), 3);
  ASSERT_TRUE(cluster.Start().ok());
  auto c = Connect(cluster.Endpoints(), absl::Seconds(4));
  StoreOptions o;
  auto lease = Elect(c.get(), o.prefix + "leader", "a");
  auto s = EtcdLogStore::Open(c.get(), o, lease->fence());
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_TRUE((*s)->Append(Range(1, 10)).ok());

  // Kill the member the client talks to: the next append goes elsewhere.
  const std::string current = c->CurrentEndpoint();
  size_t victim = 0;
  while (cluster.Endpoints()[victim] != current) ++victim;
  cluster.Kill(victim);
  ASSERT_TRUE((*s)->Append(Range(11, 20)).ok());
  EXPECT_NE(c->CurrentEndpoint(), current);
  EXPECT_EQ(ReadAll(s->get()), Seq(1, 20));

  // A second member gone: no quorum, so appends fail (and say so) instead
  // of being acknowledged by a minority.
  cluster.Kill((victim + 1) % 3);
  absl::Status st = (*s)->Append(Range(21, 21));
  EXPECT_FALSE(st.ok());
  EXPECT_TRUE(st.code() == absl::StatusCode::kUnavailable ||
              st.code() == absl::StatusCode::kDeadlineExceeded)
      << st;
  // Back to a quorum: the log goes on where it was (21 may or may not have
  // been applied: etcd may have committed it after the reply timed out).
  ASSERT_TRUE(cluster.Restart(victim).ok());
  ASSERT_TRUE(cluster.WaitReady().ok());
  auto last = (*s)->LastRevision();
  ASSERT_TRUE(last.ok()) << last.status();
  ASSERT_TRUE(*last == 20 || *last == 21) << *last;
  ASSERT_TRUE((*s)->Append(Range(*last + 1, 30)).ok());
  EXPECT_EQ(ReadAll(s->get()), Seq(1, 30));
}

// A campaign on a thread of its own: when it won, and its lease.
class Candidate {
 public:
  Candidate(Client* client, const std::string& key, const std::string& who)
      : thread_([this, client, key, who] {
          auto l = LeaderLease::Campaign(client, LeaseOptions{key, who, absl::Seconds(2)},
                                         [this] { return stop_.load(); });
          if (!l.ok()) return;
          lease_ = std::move(l).value();
          won_ns_.store(absl::GetCurrentTimeNanos(), std::memory_order_release);
        }) {}
  ~Candidate() {
    stop_ = true;
    thread_.join();
  }
  // Waits until it won (nullptr if it did not within the test timeout).
  LeaderLease* WaitWon() {
    if (!herd::testing::Eventually([&] { return won_ns() != 0; })) return nullptr;
    return lease_.get();
  }
  int64_t won_ns() const { return won_ns_.load(std::memory_order_acquire); }

 private:
  std::atomic<bool> stop_{false};
  std::atomic<int64_t> won_ns_{0};
  std::unique_ptr<LeaderLease> lease_;
  std::thread thread_;
};

TEST(EtcdClusterTest, OneLeaderAtATimeAndACutOffLeaderStepsDownFirst) {
  st::TempDir dir;
  testing::EtcdCluster cluster(dir.path(), 3);
  ASSERT_TRUE(cluster.Start().ok());
  const auto eps = cluster.Endpoints();
  // A reaches etcd only through member 0; B and C through 1 and 2.
  auto ca = Connect({eps[0]}, absl::Seconds(1));
  auto cb = Connect({eps[1], eps[2]});
  auto cc = Connect({eps[2], eps[1]});
  const std::string key = "/cell/leader";
  auto a = Elect(ca.get(), key, "a:1");
  ASSERT_TRUE(a && a->held());
  auto holder = LeaderLease::Holder(cb.get(), key);
  ASSERT_TRUE(holder.ok());
  EXPECT_EQ(*holder, "a:1");

  // B campaigns, and cannot win while A holds the key; A resigns, and B
  // takes over at once (no TTL to wait for).
  Candidate b(cb.get(), key, "b:1");
  a->Resign();
  EXPECT_FALSE(a->held());
  LeaderLease* b_lease = b.WaitWon();
  ASSERT_TRUE(b_lease && b_lease->held());

  // A campaigns again (through member 0 only) and wins when B resigns; then
  // member 0 dies, so A cannot keep its lease alive. C must not win before
  // A has stepped down on its own clock.
  Candidate a2(ca.get(), key, "a:2");
  b_lease->Resign();
  LeaderLease* a2_lease = a2.WaitWon();
  ASSERT_TRUE(a2_lease && a2_lease->held());
  std::atomic<int64_t> a_lost_ns{0};
  a2_lease->OnLost([&] { a_lost_ns = absl::GetCurrentTimeNanos(); });

  Candidate c(cc.get(), key, "c:1");
  cluster.Kill(0);  // A can no longer reach etcd
  LeaderLease* c_lease = c.WaitWon();
  ASSERT_NE(c_lease, nullptr);
  // A gave up (on its own clock) before C took over: never two leaders.
  EXPECT_FALSE(a2_lease->held());
  ASSERT_NE(a_lost_ns.load(), 0);
  EXPECT_LT(a_lost_ns.load(), c.won_ns());
  // And A's store writes would be refused anyway: the key is C's now.
  EXPECT_NE(c_lease->fence().create_revision, a2_lease->fence().create_revision);
}

}  // namespace
}  // namespace herd::store::etcd
