// The package cache and PackagesExtension with real archives, tar, an HTTP
// server and tasks: a miss fetches once then runs, a hit does not fetch, a
// digest mismatch or a bad archive ends the run for good with the reason,
// LRU eviction under a small budget never evicts a package in use, the index
// survives re-opening the cache, and the cache is reported.
#include "agent/packages/packages_extension.h"

#include <gtest/gtest.h>

#include <chrono>

#include <thread>

#include <atomic>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "agent/packages/package_cache.h"
#include "agent/packages/test_util.h"
#include "testing/http_server.h"

namespace herd::agent {
namespace {

using namespace ::herd::agent::testing;  // NOLINT

class PackagesTest : public SupervisorFixture {
 protected:
  void SetUp() override {
    SupervisorFixture::SetUp();
    archives_ = root_ + "/archives";
    std::filesystem::create_directories(archives_);
    std::filesystem::create_directories(root_ + "/runs");  // for tests that start no Supervisor
  }

  std::shared_ptr<PackagesExtension> Extension(int64_t budget = 1ll << 30) {
    PackagesExtension::Options o;
    o.cache.dir = root_ + "/packages";
    o.cache.budget_bytes = budget;
    o.cache.local_dirs = {archives_};
    absl::StatusOr<std::shared_ptr<PackagesExtension>> ext = PackagesExtension::Create(o);
    EXPECT_TRUE(ext.ok()) << ext.status();
    return *ext;
  }

  void StartWith(std::shared_ptr<PackagesExtension> ext) {
    Supervisor::Options opts;
    opts.extensions.push_back(ext);
    sup_ = New(opts);
  }

  std::unique_ptr<PackageCache> OpenCache(int64_t budget, Clock* clock = RealClock::Get()) {
    PackageCache::Options o;
    o.dir = root_ + "/packages";
    o.budget_bytes = budget;
    o.clock = clock;
    o.local_dirs = {archives_};
    absl::StatusOr<std::unique_ptr<PackageCache>> c = PackageCache::Open(o);
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? *std::move(c) : nullptr;
  }

  // A package holding data/hello.txt = `text`.
  v1::Package DataPackage(const std::string& name, const std::string& text) {
    std::string tar = archives_ + "/" + name + ".tar";
    std::string sha = MakeTar(tar, {{"hello.txt", text}});
    return MakePackage(name, sha, tar);
  }

  int64_t StartMs(const v1::TaskRun& run) {
    int64_t t0 = NowMs();
    std::vector<v1::TaskRun> all = desired_;
    all.push_back(run);
    desired_ = all;
    sup_->SetDesired(all);
    EXPECT_TRUE(WaitFor(*sup_, run.run_id(), IsActive));
    return NowMs() - t0;
  }

  std::string StdoutOf(const std::string& id, const std::string& want) {
    std::string out;
    Eventually([&] { return (out = Slurp(RunDirOf(id) + "/stdout")) == want; });
    return out;
  }

  std::string archives_;
  std::vector<v1::TaskRun> desired_;
};

TEST_F(PackagesTest, MissFetchesOnceThenHitsTheCache) {
  auto ext = Extension();
  StartWith(ext);
  v1::Package pkg = DataPackage("web-data", "hello from the package\n");
  auto run = [&](const std::string& id) {
    v1::TaskRun r = Sh(id, "cat $HERD_PACKAGE_WEB_DATA/hello.txt packages/web-data/hello.txt; exec sleep 1000");
    *r.add_packages() = pkg;
    return r;
  };
  int64_t miss_ms = StartMs(run("pkg.a"));
  EXPECT_EQ(StdoutOf("pkg.a", "hello from the package\nhello from the package\n"),
            "hello from the package\nhello from the package\n");
  EXPECT_EQ(ext->cache().fetches(), 1);
  int64_t hit_ms = StartMs(run("pkg.b"));
  EXPECT_EQ(StdoutOf("pkg.b", "hello from the package\nhello from the package\n"),
            "hello from the package\nhello from the package\n");
  EXPECT_EQ(ext->cache().fetches(), 1) << "the second run must use the cache";
  std::printf("start with package: miss %lld ms, hit %lld ms\n", static_cast<long long>(miss_ms),
              static_cast<long long>(hit_ms));

  v1::PollResponse poll;
  sup_->DescribeMachine(&poll);
  ASSERT_EQ(poll.packages_size(), 1);
  EXPECT_EQ(poll.packages(0).name(), "web-data");
  EXPECT_EQ(poll.packages(0).sha256(), pkg.sha256());
  EXPECT_EQ(poll.packages(0).users(), 2);
  EXPECT_EQ(poll.packages(0).size_bytes(), 23);

  // Stopping the runs drops their references; the package stays cached.
  sup_->SetDesired({});
  WaitFor(*sup_, "pkg.a", IsGone);
  WaitFor(*sup_, "pkg.b", IsGone);
  Eventually([&] {
    poll.Clear();
    sup_->DescribeMachine(&poll);
    return poll.packages_size() == 1 && poll.packages(0).users() == 0;
  });
  ASSERT_EQ(poll.packages_size(), 1);
  EXPECT_EQ(poll.packages(0).users(), 0);
}

TEST_F(PackagesTest, DigestMismatchEndsTheRunForGood) {
  StartWith(Extension());
  v1::Package pkg = DataPackage("web", "x");
  const std::string real = pkg.sha256();
  pkg.set_sha256(std::string(64, 'a'));
  v1::TaskRun r = MakeRun("pkg.bad", {"sleep", "1000"}, v1::RestartPolicy::ALWAYS);
  *r.add_packages() = pkg;
  sup_->SetDesired({r});
  std::optional<v1::RunStatus> s = WaitFor(*sup_, r.run_id(), IsTerminal);
  ASSERT_TRUE(s);
  EXPECT_TRUE(absl::StrContains(s->message(), absl::StrCat("package web: the content at ", pkg.url(),
                                                           " does not have sha256 ", std::string(64, 'a'))))
      << s->message();
  EXPECT_FALSE(absl::StrContains(s->message(), real)) << "the message gives away the file's digest";
  EXPECT_EQ(s->restarts(), 0);
}

// Issue #33, M1: bob names the digest of alice's package with a URL that
// serves other bytes; his fetch fails, and alice's run, started at the same
// moment, must still get her package from her URL.
TEST_F(PackagesTest, ADigestSquattedFromAnotherUrlNeverEndsAnotherRun) {
  StartWith(Extension());
  v1::Package alice_pkg = DataPackage("shared", "alice's bytes\n");
  v1::Package bob_pkg = DataPackage("other", "bob's bytes\n");
  bob_pkg.set_sha256(alice_pkg.sha256());  // squatting alice's digest
  bob_pkg.set_name("shared");
  v1::TaskRun bob = MakeRun("pkg.bob", {"sleep", "1000"}, v1::RestartPolicy::ALWAYS);
  *bob.add_packages() = bob_pkg;
  v1::TaskRun alice =
      Sh("pkg.alice", "cat $HERD_PACKAGE_SHARED/hello.txt; exec sleep 1000", v1::RestartPolicy::ALWAYS);
  *alice.add_packages() = alice_pkg;
  sup_->SetDesired({bob, alice});
  ASSERT_TRUE(WaitFor(*sup_, alice.run_id(), IsActive));
  EXPECT_EQ(StdoutOf("pkg.alice", "alice's bytes\n"), "alice's bytes\n");
  // Bob's run failed on his own fetch, or -- if alice's fetch was first --
  // got the bytes that really have that digest: never his.
  std::optional<v1::RunStatus> b = WaitFor(*sup_, bob.run_id(), [](const std::optional<v1::RunStatus>& s) {
    return s && (s->terminal() || s->phase() == v1::Task::ACTIVE);
  });
  ASSERT_TRUE(b);
  if (b->terminal()) EXPECT_TRUE(absl::StrContains(b->message(), "does not have sha256")) << b->message();
}

TEST_F(PackagesTest, LocalFilesOnlyFromAllowedDirectories) {
  StartWith(Extension());
  // Outside the allowed directory: a file, a symlink out of it, and ".."
  // out of it. The refusal names neither content nor digest.
  const std::string secret = root_ + "/secret.txt";
  std::ofstream(secret) << "the agent can read this, a task must not\n";
  std::filesystem::create_symlink(secret, archives_ + "/link.tar");
  const std::vector<std::string> urls = {secret, "file://" + secret, archives_ + "/link.tar",
                                         archives_ + "/../secret.txt", "/etc/shadow"};
  std::vector<v1::TaskRun> runs;
  for (size_t i = 0; i < urls.size(); ++i) {
    runs.push_back(MakeRun(absl::StrCat("pkg.local", i), {"sleep", "1000"}, v1::RestartPolicy::ALWAYS));
    *runs.back().add_packages() = MakePackage("steal", std::string(64, 'a'), urls[i]);
  }
  sup_->SetDesired(runs);
  for (size_t i = 0; i < urls.size(); ++i) {
    std::optional<v1::RunStatus> s = WaitFor(*sup_, runs[i].run_id(), IsTerminal);
    ASSERT_TRUE(s) << urls[i];
    EXPECT_TRUE(absl::StrContains(s->message(), "local package files are allowed on this machine only from"))
        << urls[i] << ": " << s->message();
    EXPECT_FALSE(absl::StrContains(s->message(), Sha256Hex(Slurp(secret)))) << s->message();
  }
}

TEST_F(PackagesTest, UnreadableArchiveEndsTheRunForGood) {
  StartWith(Extension());
  std::string path = archives_ + "/junk.tar";
  std::ofstream(path) << "this is not a tar archive, not even close; padding padding padding\n";
  v1::TaskRun r = MakeRun("pkg.junk", {"sleep", "1000"}, v1::RestartPolicy::ALWAYS);
  *r.add_packages() = MakePackage("junk", Sha256Hex(Slurp(path)), path);
  sup_->SetDesired({r});
  std::optional<v1::RunStatus> s = WaitFor(*sup_, r.run_id(), IsTerminal);
  ASSERT_TRUE(s);
  EXPECT_TRUE(absl::StartsWith(s->message(), "package junk: not a readable tar archive")) << s->message();
}

TEST_F(PackagesTest, MissingFileFailsTheAttemptWithTheReason) {
  StartWith(Extension());
  v1::TaskRun r = MakeRun("pkg.missing", {"sleep", "1000"});
  *r.add_packages() = MakePackage("gone", std::string(64, 'b'), archives_ + "/nope.tar");
  sup_->SetDesired({r});
  std::optional<v1::RunStatus> s = WaitFor(*sup_, r.run_id(), IsTerminal);
  ASSERT_TRUE(s);
  EXPECT_TRUE(absl::StrContains(s->message(), "package gone: open ")) << s->message();
  EXPECT_TRUE(absl::StrContains(s->message(), "No such file")) << s->message();
}

TEST_F(PackagesTest, HttpFetch) {
  std::string tar = archives_ + "/web.tar";
  std::string sha = MakeTar(tar, {{"hello.txt", "over http\n"}});
  herd::testing::HttpServer server(
      herd::testing::ServeBytes("web.tar", std::make_shared<const std::string>(Slurp(tar))));
  auto ext = Extension();
  StartWith(ext);
  v1::TaskRun r = Sh("pkg.http", "cat $HERD_PACKAGE_WEB/hello.txt; exec sleep 1000");
  *r.add_packages() = MakePackage("web", sha, server.Url("web.tar"));
  StartMs(r);
  EXPECT_EQ(StdoutOf("pkg.http", "over http\n"), "over http\n");
  EXPECT_EQ(server.request_count(), 1);

  v1::TaskRun missing = MakeRun("pkg.http404", {"sleep", "1000"});
  *missing.add_packages() = MakePackage("nope", std::string(64, 'c'), server.Url("nope.tar"));
  desired_.push_back(missing);
  sup_->SetDesired(desired_);
  std::optional<v1::RunStatus> s = WaitFor(*sup_, missing.run_id(), IsTerminal);
  ASSERT_TRUE(s);
  EXPECT_TRUE(absl::StrContains(s->message(), "HTTP 404")) << s->message();
}

// Serves `versions[i]` of web.tar for the i-th request (the last one for the
// rest): the whole of it, from "Range: bytes=N-" if asked, or the first
// `cut` bytes and a hang-up if `cut` is set for that request.
herd::testing::HttpServer::Handler Versions(std::vector<std::string> versions, std::map<int, size_t> cuts) {
  auto n = std::make_shared<std::atomic<int>>(0);
  return [=](const herd::testing::HttpRequest& req, herd::testing::HttpConn& conn) {
    const int i = (*n)++;
    auto body = std::make_shared<const std::string>(versions[std::min<size_t>(i, versions.size() - 1)]);
    if (auto cut = cuts.find(i); cut != cuts.end()) {
      conn.Write(absl::StrCat("HTTP/1.1 200 OK\r\nContent-Length: ", body->size(), "\r\n\r\n",
                              body->substr(0, cut->second)));
      return;
    }
    herd::testing::ServeBytes("web.tar", body)(req, conn);
  };
}

TEST_F(PackagesTest, InstallResumesWhatAFailedInstallFetched) {
  const std::string tar = archives_ + "/web.tar";
  const std::string sha = MakeTar(tar, {{"big.txt", std::string(300'000, 'w')}});
  herd::testing::HttpServer server(Versions({Slurp(tar)}, {{0, 100'000}}));
  PackageCache::Options o;
  o.dir = root_ + "/packages";
  o.fetch.attempts = 1;  // the first Install gives up at the cut
  absl::StatusOr<std::unique_ptr<PackageCache>> cache = PackageCache::Open(o);
  ASSERT_TRUE(cache.ok()) << cache.status();
  const v1::Package pkg = MakePackage("web", sha, server.Url("web.tar"));
  absl::Status st = (*cache)->Install(pkg);
  EXPECT_TRUE(absl::IsUnavailable(st)) << st;
  EXPECT_TRUE(absl::StartsWith(st.message(), "package web: GET " + server.Url("web.tar"))) << st;
  auto partial = [&]() -> std::string {  // .partial-SHA-URLHASH
    for (const auto& e : std::filesystem::directory_iterator(o.dir)) {
      if (absl::StartsWith(e.path().filename().string(), ".partial-" + sha + "-")) return e.path().string();
    }
    return "";
  };
  ASSERT_FALSE(partial().empty());
  EXPECT_EQ(std::filesystem::file_size(partial()), 100'000u);

  ASSERT_TRUE((*cache)->Install(pkg).ok());
  std::vector<herd::testing::HttpRequest> reqs = server.requests();
  ASSERT_EQ(reqs.size(), 2u);
  EXPECT_EQ(reqs[1].Header("range"), "bytes=100000-");
  EXPECT_TRUE((*cache)->Lookup(sha));
  EXPECT_EQ(partial(), "");
}

TEST_F(PackagesTest, ResumedBytesOfAnotherVersionAreFetchedAgain) {
  // The archive at the URL changes between the cut and the resume: the
  // joined file has neither digest, so the whole new version is fetched.
  const std::string old_tar = archives_ + "/old.tar";
  const std::string new_tar = archives_ + "/new.tar";
  MakeTar(old_tar, {{"big.txt", std::string(300'000, 'o')}});
  const std::string sha = MakeTar(new_tar, {{"big.txt", std::string(300'000, 'n')}});
  herd::testing::HttpServer server(Versions({Slurp(old_tar), Slurp(new_tar)}, {{0, 100'000}}));
  PackageCache::Options o;
  o.dir = root_ + "/packages";
  o.fetch.attempts = 1;
  absl::StatusOr<std::unique_ptr<PackageCache>> cache = PackageCache::Open(o);
  ASSERT_TRUE(cache.ok()) << cache.status();
  const v1::Package pkg = MakePackage("web", sha, server.Url("web.tar"));
  EXPECT_TRUE(absl::IsUnavailable((*cache)->Install(pkg)));
  absl::Status st = (*cache)->Install(pkg);
  ASSERT_TRUE(st.ok()) << st;
  std::vector<herd::testing::HttpRequest> reqs = server.requests();
  ASSERT_EQ(reqs.size(), 3u);
  EXPECT_EQ(reqs[1].Header("range"), "bytes=100000-");
  EXPECT_EQ(reqs[2].Header("range"), "");
  std::optional<std::string> root = (*cache)->Lookup(sha);
  ASSERT_TRUE(root);
  EXPECT_EQ(Slurp(*root + "/big.txt"), std::string(300'000, 'n'));
}

// One package's URL that answers and then stalls holds up that digest
// only: another digest installs meanwhile (it used to wait behind it, up
// to the fetch's stall limit, on every package of the machine).
TEST_F(PackagesTest, AStalledFetchHoldsUpOnlyItsOwnDigest) {
  std::unique_ptr<PackageCache> cache = OpenCache(1 << 30);
  absl::Notification release;
  herd::testing::HttpServer slow([&](const herd::testing::HttpRequest&, herd::testing::HttpConn& conn) {
    // Headers and a little of the body, then nothing until released.
    conn.Write("HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\nxxxx");
    release.WaitForNotification();
  });
  const v1::Package stalled = MakePackage("stalled", std::string(64, 'd'), slow.Url("stalled.tar"));
  std::atomic<bool> stalled_done{false}, quick_done{false};
  absl::Status quick_status;
  std::thread first, second;
  absl::Cleanup end = [&] {  // whatever happens, the stalled fetch ends
    if (!release.HasBeenNotified()) release.Notify();
    if (second.joinable()) second.join();
    if (first.joinable()) first.join();
  };
  first = std::thread([&] {
    (void)cache->Install(stalled);
    stalled_done = true;
  });
  ASSERT_TRUE(Eventually([&] { return slow.request_count() == 1; }));
  // The other digest installs while the first is stalled.
  const v1::Package quick = DataPackage("quick", "here at once");
  second = std::thread([&] {
    quick_status = cache->Install(quick);
    quick_done = true;
  });
  // (Bounded well below the stalled fetch's stall limit, 30 s, so waiting
  // behind it shows as a failure here.)
  const bool installed_meanwhile = Eventually([&] { return quick_done.load(); }, std::chrono::seconds(10));
  EXPECT_FALSE(stalled_done.load());
  std::move(end).Invoke();
  EXPECT_TRUE(installed_meanwhile) << "the second digest waited for the stalled one";
  EXPECT_TRUE(quick_status.ok()) << quick_status;
  EXPECT_TRUE(cache->Lookup(quick.sha256()).has_value());
}

// Two stalled URLs of one user (bob) used to take both of an agent's fetch
// workers, and every other user's package waited behind them up to the
// stall limit (30 s). Now one user's fetches take at most half of the
// workers: alice's package installs and her task starts while bob's stall,
// and bob's second fetch waits its turn behind his first.
TEST_F(PackagesTest, OneUsersStalledFetchesDoNotHoldUpAnotherUsersPackage) {
  PackagesExtension::Options o;
  o.cache.dir = root_ + "/packages";
  o.cache.local_dirs = {archives_};
  o.fetch_threads = 2;
  absl::StatusOr<std::shared_ptr<PackagesExtension>> ext = PackagesExtension::Create(o);
  ASSERT_TRUE(ext.ok()) << ext.status();
  StartWith(*ext);
  absl::Notification release;
  herd::testing::HttpServer slow([&](const herd::testing::HttpRequest&, herd::testing::HttpConn& conn) {
    conn.Write("HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\nxxxx");
    release.WaitForNotification();
  });
  absl::Cleanup end = [&] {
    if (!release.HasBeenNotified()) release.Notify();
    sup_->SetDesired({});
  };
  std::vector<v1::TaskRun> runs;
  for (char c : {'d', 'e'}) {
    const std::string letter(1, c);
    v1::TaskRun r = MakeRun("bob.stall." + letter, {"sleep", "1000"});
    r.set_user("bob");
    *r.add_packages() = MakePackage("stalled-" + letter, std::string(64, c), slow.Url(letter + ".tar"));
    runs.push_back(r);
  }
  sup_->SetDesired(runs);
  ASSERT_TRUE(Eventually([&] { return slow.request_count() >= 1; }));
  v1::TaskRun mine = Sh("alice.quick.0", "cat packages/quick/hello.txt; exec sleep 1000");
  mine.set_user("alice");
  *mine.add_packages() = DataPackage("quick", "here at once\n");
  runs.push_back(mine);
  sup_->SetDesired(runs);
  // (Bounded well below the stall limit, so waiting behind bob shows.)
  const bool started = IsActive(WaitFor(*sup_, mine.run_id(), IsActive, 10'000));
  const int bobs_requests = slow.request_count();
  std::move(end).Invoke();
  EXPECT_TRUE(started) << "alice's package waited behind bob's stalled fetches";
  EXPECT_EQ(bobs_requests, 1) << "bob's fetches took more than his share of the workers";
}

TEST_F(PackagesTest, LruEvictionNeverEvictsAPackageInUse) {
  // Each package unpacks to 1000 bytes; the budget holds two.
  // Use times come from a ManualClock, so "least recently used" does not
  // depend on how fast the installs run.
  std::unique_ptr<PackageCache> cache = OpenCache(2500, &manual_clock_);
  std::vector<v1::Package> pkgs;
  for (int i = 0; i < 4; ++i) pkgs.push_back(DataPackage(absl::StrCat("p", i), std::string(1000, 'a' + i)));
  ASSERT_TRUE(cache->Install(pkgs[0]).ok());
  cache->Ref(pkgs[0].sha256());  // in use, and the least recently used
  manual_clock_.AdvanceMs(1000);
  ASSERT_TRUE(cache->Install(pkgs[1]).ok());
  manual_clock_.AdvanceMs(1000);
  ASSERT_TRUE(cache->Install(pkgs[2]).ok());  // over budget: p1 (unused, LRU) goes
  auto names = [&] {
    std::vector<std::string> out;
    for (const v1::CachedPackage& p : cache->List()) out.push_back(p.name());
    std::sort(out.begin(), out.end());
    return out;
  };
  EXPECT_EQ(names(), (std::vector<std::string>{"p0", "p2"}));
  EXPECT_FALSE(std::filesystem::exists(root_ + "/packages/" + pkgs[1].sha256()));
  // Everything referenced: over budget, but nothing in use is evicted.
  cache->Ref(pkgs[2].sha256());
  cache->Ref(pkgs[3].sha256());  // referenced before it is cached (a waiting run)
  ASSERT_TRUE(cache->Install(pkgs[3]).ok());
  EXPECT_EQ(names(), (std::vector<std::string>{"p0", "p2", "p3"}));
  EXPECT_EQ(cache->total_bytes(), 3000);
  // Released: the least recently used unreferenced one goes.
  cache->Unref(pkgs[0].sha256());
  EXPECT_EQ(names(), (std::vector<std::string>{"p2", "p3"}));
  EXPECT_EQ(cache->fetches(), 4);
}

TEST_F(PackagesTest, IndexSurvivesReopening) {
  std::vector<v1::Package> pkgs = {DataPackage("one", "1111"), DataPackage("two", "22")};
  {
    std::unique_ptr<PackageCache> cache = OpenCache(1 << 20);
    for (const v1::Package& p : pkgs) ASSERT_TRUE(cache->Install(p).ok());
  }
  // An install cut short by a crash is cleaned up.
  std::filesystem::create_directories(root_ + "/packages/.tmp-" + std::string(64, 'd') + "-1-0/root");
  std::unique_ptr<PackageCache> cache = OpenCache(1 << 20);
  std::vector<v1::CachedPackage> list = cache->List();
  ASSERT_EQ(list.size(), 2u);
  std::map<std::string, int64_t> sizes;
  for (const auto& p : list) sizes[p.name()] = p.size_bytes();
  EXPECT_EQ(sizes, (std::map<std::string, int64_t>{{"one", 4}, {"two", 2}}));
  for (const v1::Package& p : pkgs) {
    std::optional<std::string> path = cache->Lookup(p.sha256());
    ASSERT_TRUE(path);
    EXPECT_TRUE(std::filesystem::exists(*path + "/hello.txt"));
    ASSERT_TRUE(cache->Install(p).ok());  // already there: no fetch
  }
  EXPECT_EQ(cache->fetches(), 0);
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(root_ + "/packages"), {}), 2);
}

TEST_F(PackagesTest, RecoveredRunsKeepTheirReferences) {
  v1::Package pkg = DataPackage("kept", "k");
  v1::TaskRun r = Sh("pkg.keep", "exec sleep 1000");
  *r.add_packages() = pkg;
  StartWith(Extension());
  StartMs(r);
  sup_.reset();  // the agent goes away; the task keeps running
  auto ext = Extension();
  StartWith(ext);
  ASSERT_TRUE(WaitFor(*sup_, r.run_id(), IsActive));
  std::vector<v1::CachedPackage> list = ext->cache().List();
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(list[0].users(), 1);
  EXPECT_EQ(ext->cache().fetches(), 0);
}

TEST(PackageEnvName, UpperCaseAndUnderscores) {
  EXPECT_EQ(PackageEnvName("web-static.v2"), "WEB_STATIC_V2");
}

}  // namespace
}  // namespace herd::agent
