// The machine's package cache: each package (a tar archive named by the
// SHA-256 of its bytes) is fetched once, verified, unpacked and shared by
// every run that lists it; unreferenced packages are evicted least recently
// used first when the cache passes its byte budget. Content-addressed, so two
// jobs naming the same archive differently share one copy, and a changed
// archive behind the same URL is a different package.
//
// On disk, in DIR:
//   SHA256/root/   the unpacked archive (files read-only)
//   SHA256/meta    "name=..", "size=..", "last_used_ms=.." lines; written
//                  after root/ is complete, so a package with a meta is whole
//   .tmp-*         installs in progress (deleted when the cache is opened)
//   .partial-SHA256  an archive whose download failed part way, resumed by
//                  the next Install of that digest (deleted when the cache
//                  is opened)
// The index is rebuilt from these at Open, so it survives agent restarts;
// references are not persisted (the runs re-take them when recovered).
//
// Thread-safe. Install blocks (fetching, hashing, tar) and is meant for a
// background thread; everything else is quick.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <functional>
#include <optional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "agent/packages/fetch.h"
#include "agent/packages/task_users.h"
#include "base/clock.h"
#include "herd/v1/agent.pb.h"
#include "herd/v1/objects.pb.h"

namespace herd::agent {

class PackageCache {
 public:
  struct Options {
    std::string dir;
    int64_t budget_bytes = 10ll << 30;
    // Where local packages (file:// URLs and absolute paths) may come from:
    // the agent reads them with its own rights, so only from directories
    // an operator chose (agent --package-file-dirs). Empty: none.
    std::vector<std::string> local_dirs;
    // How archives are fetched (timeouts, retries, size limit, trusted CAs).
    // Install resumes a partial archive left by an earlier Install itself.
    FetchOptions fetch;
    Clock* clock = RealClock::Get();
    // The account tar runs as (unpack.h); null: the agent's own. A root
    // agent with task uids sets it.
    std::function<absl::StatusOr<TaskAccount>()> unpack_account;
  };

  // Creates DIR if missing, removes unfinished installs and rebuilds the
  // index from what is there.
  static absl::StatusOr<std::unique_ptr<PackageCache>> Open(Options options);

  // "package NAME: ..." errors use this. Also checks the digest looks like
  // one (64 hex digits).
  static absl::Status Validate(const v1::Package& package);
  // FAILED_PRECONDITION for a local package outside Options.local_dirs.
  absl::Status CheckLocal(const v1::Package& package) const;

  // The unpacked package's directory if cached; marks it used now.
  std::optional<std::string> Lookup(const std::string& sha256);

  // Fetches, verifies and unpacks `package` into the cache (a no-op if it is
  // there). FAILED_PRECONDITION: the archive's digest is not the one asked
  // for, or it is not a readable tar; other errors are the fetch's
  // (fetch.h). Then evicts what the budget requires.
  absl::Status Install(const v1::Package& package, const std::atomic<bool>* stop = nullptr);

  // A run uses (no longer uses) the package: referenced packages are never
  // evicted. References may be taken before the package is cached (a run
  // waiting for it), so a fresh install is not evicted before its run starts.
  void Ref(const std::string& sha256);
  void Unref(const std::string& sha256);

  // Evicts unreferenced packages, least recently used first, until the cache
  // fits its budget (or only referenced ones are left).
  void Evict();

  std::vector<v1::CachedPackage> List() const;
  int64_t total_bytes() const;
  // Archives fetched since Open (for tests and metrics).
  int64_t fetches() const { return fetches_.load(); }
  const std::string& dir() const { return options_.dir; }

 private:
  struct Entry {
    std::string name;
    int64_t size_bytes = 0;
    int64_t last_used_ms = 0;
  };

  explicit PackageCache(Options options) : options_(std::move(options)) {}
  std::string PathOf(const std::string& sha256) const { return options_.dir + "/" + sha256; }
  // Fetches the archive of `package` (digest `sha`) into `archive`, resuming
  // a partial download, and checks its digest.
  absl::StatusOr<Fetched> FetchArchive(const v1::Package& package, const std::string& sha,
                                       const std::string& archive, const std::atomic<bool>* stop);
  absl::Status WriteMeta(const std::string& sha256, const Entry& e) const;
  // Moves evicted packages aside (into doomed_); DeleteDoomed deletes them
  // outside the lock.
  void EvictLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void UnrefAndEvict(const std::string& sha256);
  void DeleteDoomed();

  const Options options_;
  std::atomic<int64_t> fetches_{0};
  std::atomic<int64_t> tmp_seq_{0};
  mutable absl::Mutex mu_;
  absl::Mutex unpack_mu_;  // held around Untar (unpack.h)
  std::map<std::string, Entry> entries_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, int> refs_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> doomed_ ABSL_GUARDED_BY(mu_);
  // One install per digest at a time; installs of different digests run
  // at once, so one slow or stalled URL holds up only its own digest (#33:
  // one user's package could stall every other package on the machine).
  std::shared_ptr<absl::Mutex> InstallLock(const std::string& sha256);
  void ForgetInstallLock(const std::string& sha256);
  std::map<std::string, std::weak_ptr<absl::Mutex>> installing_ ABSL_GUARDED_BY(mu_);
};

// The size of a directory tree's files (not following symlinks).
int64_t TreeBytes(const std::string& dir);

}  // namespace herd::agent
