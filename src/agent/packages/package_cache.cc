#include "agent/packages/package_cache.h"

#include <stdlib.h>

#include <limits.h>

#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/match.h"
#include "absl/strings/strip.h"
#include "absl/strings/str_split.h"
#include "agent/packages/fetch.h"
#include "agent/packages/unpack.h"
#include "agent/runtime/process.h"
#include "base/log.h"
#include "base/status.h"
#include "base/errno_status.h"

namespace herd::agent {
namespace {

namespace fs = std::filesystem;

bool IsDigest(const std::string& s) {
  if (s.size() != 64) return false;
  for (char c : s) {
    if (!absl::ascii_isdigit(c) && !(c >= 'a' && c <= 'f')) return false;
  }
  return true;
}

}  // namespace

int64_t TreeBytes(const std::string& dir) {
  int64_t total = 0;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    struct stat st;
    if (lstat(it->path().c_str(), &st) == 0 && S_ISREG(st.st_mode)) total += st.st_size;
  }
  return total;
}

absl::Status PackageCache::Validate(const v1::Package& p) {
  if (p.name().empty()) return absl::InvalidArgumentError("a package has no name");
  if (!IsDigest(absl::AsciiStrToLower(p.sha256()))) {
    return absl::InvalidArgumentError(
        absl::StrCat("package ", p.name(), ": sha256 \"", p.sha256(), "\" is not 64 hex digits"));
  }
  if (p.url().empty()) return absl::InvalidArgumentError(absl::StrCat("package ", p.name(), ": no url"));
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<PackageCache>> PackageCache::Open(Options options) {
  if (options.dir.empty()) return absl::InvalidArgumentError("package cache needs a directory");
  if (options.clock == nullptr) options.clock = RealClock::Get();
  std::error_code ec;
  fs::create_directories(options.dir, ec);
  if (ec) return absl::InternalError(absl::StrCat("create ", options.dir, ": ", ec.message()));
  chmod(options.dir.c_str(), 0755);
  std::unique_ptr<PackageCache> cache(new PackageCache(std::move(options)));
  const std::string& dir = cache->options_.dir;
  absl::MutexLock l(&cache->mu_);
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    std::string name = e.path().filename().string();
    absl::StatusOr<std::string> meta = ReadFile(e.path().string() + "/meta");
    if (!IsDigest(name) || !meta.ok()) {
      // An install cut short (or something that is not ours to keep).
      HERD_LOG_INFO("package cache: removing {}", e.path().string());
      fs::remove_all(e.path(), ec);
      continue;
    }
    Entry entry;
    for (absl::string_view line : absl::StrSplit(*meta, '\n')) {
      std::pair<std::string, std::string> kv = absl::StrSplit(line, absl::MaxSplits('=', 1));
      if (kv.first == "name") entry.name = kv.second;
      if (kv.first == "size") (void)absl::SimpleAtoi(kv.second, &entry.size_bytes);
      if (kv.first == "last_used_ms") (void)absl::SimpleAtoi(kv.second, &entry.last_used_ms);
    }
    cache->entries_[name] = entry;
  }
  HERD_LOG_INFO("package cache {}: {} package(s), {} bytes of {}", dir, cache->entries_.size(),
                [&] {
                  int64_t t = 0;
                  for (const auto& [k, v] : cache->entries_) t += v.size_bytes;
                  return t;
                }(),
                cache->options_.budget_bytes);
  return cache;
}

absl::Status PackageCache::WriteMeta(const std::string& sha256, const Entry& e) const {
  return WriteFileAtomic(PathOf(sha256) + "/meta",
                         absl::StrCat("name=", e.name, "\nsize=", e.size_bytes, "\nlast_used_ms=", e.last_used_ms, "\n"));
}

std::optional<std::string> PackageCache::Lookup(const std::string& sha256) {
  absl::MutexLock l(&mu_);
  auto it = entries_.find(sha256);
  if (it == entries_.end()) return std::nullopt;
  it->second.last_used_ms = options_.clock->NowMs();
  // Best effort: the order of eviction after a restart.
  (void)WriteMeta(sha256, it->second);
  return PathOf(sha256) + "/root";
}

absl::Status PackageCache::CheckLocal(const v1::Package& package) const {
  absl::string_view url = package.url();
  if (!absl::ConsumePrefix(&url, "file://") && !absl::StartsWith(url, "/")) return absl::OkStatus();
  // The real path, with every symlink and ".." resolved, must lie in an
  // allowed directory. Errors say nothing of what is there (or not) unless
  // it is allowed: a spec must not probe the machine's files.
  char real[PATH_MAX];
  std::string path(url);
  bool resolved = realpath(path.c_str(), real) != nullptr;
  if (!resolved && errno == ENOENT) {
    // A missing file in an allowed directory is the spec's mistake to be
    // told of (the fetch then says "No such file").
    const size_t slash = path.rfind('/');
    char parent[PATH_MAX];
    if (slash != std::string::npos && slash + 1 < path.size() &&
        realpath(path.substr(0, std::max<size_t>(slash, 1)).c_str(), parent) != nullptr) {
      const std::string joined = absl::StrCat(parent, "/", path.substr(slash + 1));
      resolved = joined.size() < sizeof(real);
      if (resolved) snprintf(real, sizeof(real), "%s", joined.c_str());
    }
  }
  for (const std::string& dir : options_.local_dirs) {
    char root[PATH_MAX];
    if (realpath(dir.c_str(), root) == nullptr) continue;
    const std::string prefix = absl::StrCat(root, std::string_view(root) == "/" ? "" : "/");
    if (resolved && absl::StartsWith(real, prefix)) return absl::OkStatus();
  }
  // FAILED_PRECONDITION: this machine's setting; retrying cannot help.
  return absl::FailedPreconditionError(absl::StrCat(
      "package ", package.name(), ": local package files are allowed on this machine only from ",
      options_.local_dirs.empty() ? std::string("no directory") : absl::StrJoin(options_.local_dirs, ", "),
      " (agent --package-file-dirs); use an http:// or https:// URL"));
}

std::shared_ptr<absl::Mutex> PackageCache::InstallLock(const std::string& sha256) {
  absl::MutexLock l(&mu_);
  std::weak_ptr<absl::Mutex>& w = installing_[sha256];
  std::shared_ptr<absl::Mutex> m = w.lock();
  if (m == nullptr) {
    m = std::make_shared<absl::Mutex>();
    w = m;
  }
  return m;
}

void PackageCache::ForgetInstallLock(const std::string& sha256) {
  absl::MutexLock l(&mu_);
  auto it = installing_.find(sha256);
  if (it != installing_.end() && it->second.expired()) installing_.erase(it);
}

absl::Status PackageCache::Install(const v1::Package& package, const std::atomic<bool>* stop) {
  HERD_RETURN_IF_ERROR(Validate(package));
  HERD_RETURN_IF_ERROR(CheckLocal(package));
  const std::string sha = absl::AsciiStrToLower(package.sha256());
  std::shared_ptr<absl::Mutex> lock = InstallLock(sha);
  // Destroyed in reverse: unlocked, then the lock forgotten if unused.
  absl::Cleanup forget = [&] {
    lock.reset();
    ForgetInstallLock(sha);
  };
  absl::MutexLock install(lock.get());
  {
    absl::MutexLock l(&mu_);
    if (entries_.contains(sha)) return absl::OkStatus();
  }
  const std::string tmp = absl::StrCat(options_.dir, "/.tmp-", sha, "-", getpid(), "-", tmp_seq_++);
  std::error_code ec;
  auto cleanup = [&] { fs::remove_all(tmp, ec); };
  // Only root reaches the tree while tar (as the unpack account) fills it.
  if (mkdir(tmp.c_str(), 0700) != 0 || mkdir((tmp + "/root").c_str(), 0755) != 0) {
    absl::Status st = ErrnoToStatus(errno, absl::StrCat("mkdir ", tmp));
    cleanup();
    return st;
  }
  const int64_t t0 = options_.clock->MonotonicMs();
  absl::StatusOr<Fetched> got = FetchArchive(package, sha, tmp + "/archive", stop);
  if (!got.ok()) {
    cleanup();
    return got.status();
  }
  std::optional<TaskAccount> as;
  if (options_.unpack_account) {
    absl::StatusOr<TaskAccount> account = options_.unpack_account();
    if (!account.ok()) {
      cleanup();
      return account.status();
    }
    as = *account;
  }
  absl::Status unpacked;
  {
    // One unpack at a time: no other tar of the account runs (and could
    // touch the tree) while Untar settles it.
    absl::MutexLock one(&unpack_mu_);
    unpacked = Untar(tmp + "/archive", tmp + "/root", as);
  }
  if (absl::Status st = unpacked; !st.ok()) {
    cleanup();
    return absl::Status(st.code(), absl::StrCat("package ", package.name(), ": ", st.message()));
  }
  unlink((tmp + "/archive").c_str());
  Entry entry;
  entry.name = package.name();
  entry.size_bytes = TreeBytes(tmp + "/root");
  entry.last_used_ms = options_.clock->NowMs();
  if (absl::Status st = WriteFileAtomic(tmp + "/meta", absl::StrCat("name=", entry.name, "\nsize=", entry.size_bytes,
                                                                      "\nlast_used_ms=", entry.last_used_ms, "\n"));
      !st.ok()) {
    cleanup();
    return st;
  }
  if (chmod(tmp.c_str(), 0755) != 0 || rename(tmp.c_str(), PathOf(sha).c_str()) != 0) {
    absl::Status st = ErrnoToStatus(errno, absl::StrCat("rename ", tmp));
    cleanup();
    return st;
  }
  HERD_LOG_INFO("package {} ({}) installed: {} byte archive{}, {} bytes unpacked, in {} ms", package.name(), sha,
                got->size_bytes,
                got->requests > 1 || got->resumed_bytes > 0
                    ? absl::StrCat(" (", got->requests, " request(s), the last from byte ", got->resumed_bytes, ")")
                    : "",
                entry.size_bytes, options_.clock->MonotonicMs() - t0);
  {
    absl::MutexLock l(&mu_);
    entries_[sha] = entry;
    EvictLocked();
  }
  DeleteDoomed();
  return absl::OkStatus();
}

absl::StatusOr<Fetched> PackageCache::FetchArchive(const v1::Package& package, const std::string& sha,
                                                   const std::string& archive, const std::atomic<bool>* stop) {
  // Downloads go to a name of the digest's and the URL's own, so what a
  // failed Install got is resumed by the next one from the same place, and
  // never by a fetch of the same digest from elsewhere (bytes another URL
  // served must not poison it). FNV-1a: stable across restarts.
  uint64_t url_hash = 1469598103934665603ull;
  for (unsigned char c : package.url()) url_hash = (url_hash ^ c) * 1099511628211ull;
  const std::string partial = absl::StrCat(options_.dir, "/.partial-", sha, "-", absl::Hex(url_hash, absl::kZeroPad16));
  FetchOptions fetch = options_.fetch;
  fetch.resume_existing = true;
  for (bool first = true;; first = false) {
    ++fetches_;
    absl::StatusOr<Fetched> got = FetchToFile(package.url(), partial, fetch, stop);
    if (!got.ok()) {
      // Kept only after failures that may pass.
      if (!absl::IsUnavailable(got.status()) && !absl::IsCancelled(got.status())) unlink(partial.c_str());
      return absl::Status(got.status().code(), absl::StrCat("package ", package.name(), ": ", got.status().message()));
    }
    if (got->sha256 == sha) {
      if (rename(partial.c_str(), archive.c_str()) != 0) return ErrnoToStatus(errno, absl::StrCat("rename ", partial));
      return got;
    }
    unlink(partial.c_str());
    // Resumed bytes may be of another version of the archive (it changed
    // at the URL between two requests): once more, from zero.
    if (got->resumed_bytes > 0 && first) continue;
    // Not the digest it has: that would tell anyone the hash of any file
    // the agent can read.
    return absl::FailedPreconditionError(absl::StrCat("package ", package.name(), ": the content at ", package.url(),
                                                      " does not have sha256 ", sha));
  }
}

void PackageCache::Ref(const std::string& sha256) {
  absl::MutexLock l(&mu_);
  ++refs_[sha256];
}

void PackageCache::DeleteDoomed() {
  std::vector<std::string> doomed;
  {
    absl::MutexLock l(&mu_);
    doomed.swap(doomed_);
  }
  std::error_code ec;
  for (const std::string& d : doomed) fs::remove_all(d, ec);
}

void PackageCache::Unref(const std::string& sha256) {
  UnrefAndEvict(sha256);
  DeleteDoomed();
}

void PackageCache::UnrefAndEvict(const std::string& sha256) {
  absl::MutexLock l(&mu_);
  auto it = refs_.find(sha256);
  if (it == refs_.end()) return;
  if (--it->second <= 0) {
    refs_.erase(it);
    auto e = entries_.find(sha256);
    if (e != entries_.end()) {
      // Its last run is done: recently used from now on.
      e->second.last_used_ms = options_.clock->NowMs();
      (void)WriteMeta(sha256, e->second);
    }
  }
  EvictLocked();
}

void PackageCache::Evict() {
  {
    absl::MutexLock l(&mu_);
    EvictLocked();
  }
  DeleteDoomed();
}

void PackageCache::EvictLocked() {
  int64_t total = 0;
  for (const auto& [sha, e] : entries_) total += e.size_bytes;
  while (total > options_.budget_bytes) {
    auto victim = entries_.end();
    for (auto it = entries_.begin(); it != entries_.end(); ++it) {
      if (refs_.contains(it->first)) continue;
      if (victim == entries_.end() || it->second.last_used_ms < victim->second.last_used_ms) victim = it;
    }
    if (victim == entries_.end()) {
      HERD_LOG_WARN("package cache over budget ({} > {} bytes) but every package is in use", total,
                    options_.budget_bytes);
      return;
    }
    // Renamed first, so a crash mid-delete leaves no half package that
    // looks whole (Open removes what is not a digest).
    std::string doomed = absl::StrCat(options_.dir, "/.tmp-evicted-", victim->first, "-", tmp_seq_++);
    if (rename(PathOf(victim->first).c_str(), doomed.c_str()) == 0) doomed_.push_back(std::move(doomed));
    HERD_LOG_INFO("package cache: evicted {} ({}, {} bytes, unused since {})", victim->second.name, victim->first,
                  victim->second.size_bytes, victim->second.last_used_ms);
    total -= victim->second.size_bytes;
    entries_.erase(victim);
  }
}

std::vector<v1::CachedPackage> PackageCache::List() const {
  absl::MutexLock l(&mu_);
  std::vector<v1::CachedPackage> out;
  for (const auto& [sha, e] : entries_) {
    v1::CachedPackage p;
    p.set_name(e.name);
    p.set_sha256(sha);
    p.set_size_bytes(e.size_bytes);
    p.set_last_used_ms(e.last_used_ms);
    auto r = refs_.find(sha);
    p.set_users(r == refs_.end() ? 0 : r->second);
    out.push_back(std::move(p));
  }
  return out;
}

int64_t PackageCache::total_bytes() const {
  absl::MutexLock l(&mu_);
  int64_t t = 0;
  for (const auto& [sha, e] : entries_) t += e.size_bytes;
  return t;
}

}  // namespace herd::agent
