// PackagesExtension: makes a run's packages (TaskRun.packages) available to
// it from the machine's PackageCache.
//
// Prepare: every package must be in the cache; missing ones are fetched on
// the extension's own threads (one fetch per digest however many runs wait)
// while the run waits (UNAVAILABLE, "waiting: fetching package ..."), then
// SupervisorControl::Retry() starts it. Each package then shows in the
// sandbox as sandbox/packages/NAME, a symlink to the cached, read-only tree
// (no copy: starting a task with a cached package costs a symlink), and in
// the environment as HERD_PACKAGE_<NAME> (upper case, other characters '_').
// With isolation.root_from_packages the packages' trees are instead layered,
// in order, into RUN_DIR/root (hardlinks into the cache, copies across
// filesystems), with empty proc/, dev/ and sandbox/ for herd-shim --root
// (IsolationExtension passes the options); HERD_PACKAGE_<NAME> is then "/".
// A digest mismatch, an archive tar cannot read or one over the size limit
// fails the run for good (FAILED_PRECONDITION, "package web: the content at
// URL does not have sha256 .."), as does a URL the agent does not fetch
// (INVALID_ARGUMENT, also when a redirect leads there); a fetch that failed
// otherwise (server down after its retries, no such file) fails the attempt,
// and the restart policy decides (the next attempt fetches again, resuming
// what was downloaded).
//
// A run holds a reference on each of its packages from its first Prepare
// (or its recovery) until Released, so a package in use, or being fetched
// for a waiting run, is never evicted.
#pragma once

#include <atomic>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "agent/packages/package_cache.h"
#include "agent/supervisor/extension.h"

namespace herd::agent {

// The root directory built for a run with isolation.root_from_packages.
inline std::string TaskRootOf(const RunDir& dir) { return dir.File("root"); }

// HERD_PACKAGE_<this>: "web-static" -> "WEB_STATIC".
std::string PackageEnvName(const std::string& package_name);

class PackagesExtension : public Extension {
 public:
  struct Options {
    PackageCache::Options cache;
    // Fetches (and root builds) run on this many threads, and one user's
    // take at most half of them: a user whose URLs stall holds up only
    // their own packages (#33 item 4), never everyone's.
    int fetch_threads = 4;
  };
  static absl::StatusOr<std::shared_ptr<PackagesExtension>> Create(Options options);
  ~PackagesExtension() override;

  absl::string_view name() const override { return "packages"; }
  absl::Status Init(SupervisorControl* control) override;
  void Shutdown() override;
  void Recovered(const RunView& run) override;
  absl::Status Prepare(const RunView& run, AttemptSetup* setup) override;
  void Released(const RunView& run) override;
  void DescribeMachine(v1::PollResponse* response) const override;

  PackageCache& cache() { return *cache_; }

 private:
  struct FetchState {
    bool running = false;
    uint64_t generation = 0;  // of the latest fetch started
    absl::Status error;       // how fetch `error_generation` failed
    uint64_t error_generation = 0;
  };
  struct RunState {
    std::vector<std::string> refs;  // digests referenced
    std::map<std::string, uint64_t> waiting;  // FetchKey -> fetch generation waited for
    bool root_building = false;
    absl::Status root_error;
  };

  PackagesExtension(Options options, std::unique_ptr<PackageCache> cache);
  // `owner`: the user the work is for ("": the agent's own, never held back).
  void Enqueue(std::string owner, std::function<void()> job) ABSL_LOCKS_EXCLUDED(mu_);
  void EnqueueLocked(std::string owner, std::function<void()> job) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Worker();
  // The first queued job whose owner is under the per-user share, if any.
  bool NextJobLocked(std::deque<std::pair<std::string, std::function<void()>>>::iterator* it)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  int PerUserShare() const { return std::max(1, options_.fetch_threads / 2); }
  void TakeRefsLocked(const RunView& run, RunState& state) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Ready (OK), waiting for a fetch (UNAVAILABLE) or failed, for one package.
  absl::Status EnsureLocked(const RunView& run, RunState& state, const v1::Package& package, std::string* path)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Fetch(v1::Package package);
  static std::string FetchKey(const v1::Package& package);  // "SHA URL"

  const Options options_;
  std::unique_ptr<PackageCache> cache_;
  SupervisorControl* control_ = nullptr;
  std::atomic<bool> stop_{false};

  mutable absl::Mutex mu_;
  std::map<std::string, FetchState> fetches_ ABSL_GUARDED_BY(mu_);  // by FetchKey
  std::map<std::string, RunState> runs_ ABSL_GUARDED_BY(mu_);
  std::deque<std::pair<std::string, std::function<void()>>> jobs_ ABSL_GUARDED_BY(mu_);  // (owner, job)
  std::map<std::string, int> running_ ABSL_GUARDED_BY(mu_);  // jobs running, by owner
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> workers_;
};

// Builds `root` from package trees, in order (later ones win on conflicts),
// hardlinking files (copying across filesystems), plus empty proc/, dev/
// and sandbox/. Replaces what `root` held.
absl::Status BuildRoot(const std::string& root, const std::vector<std::string>& trees);

}  // namespace herd::agent
