#include "agent/packages/packages_extension.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <limits.h>

#include <filesystem>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "base/log.h"
#include "base/status.h"
#include "base/errno_status.h"
#include "base/files.h"

namespace herd::agent {
namespace {

namespace fs = std::filesystem;

// A file of the root marks it complete (outside the root: the task does not
// see it). A restarted attempt, or a restarted agent, reuses the root.
std::string RootReadyMarker(const std::string& root) { return root + ".ready"; }

absl::Status CopyTree(const std::string& from, const std::string& to) {
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(from, ec); it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    if (ec) break;
    const std::string src = it->path().string();
    const std::string dst = to + src.substr(from.size());
    struct stat st;
    if (lstat(src.c_str(), &st) != 0) return ErrnoToStatus(errno, absl::StrCat("lstat ", src));
    struct stat existing;
    const bool exists = lstat(dst.c_str(), &existing) == 0;
    if (S_ISDIR(st.st_mode)) {
      if (exists && !S_ISDIR(existing.st_mode)) unlink(dst.c_str());
      if ((!exists || !S_ISDIR(existing.st_mode)) && mkdir(dst.c_str(), st.st_mode & 07777) != 0) {
        return ErrnoToStatus(errno, absl::StrCat("mkdir ", dst));
      }
      continue;
    }
    // A later package replaces an earlier one's file.
    if (exists) {
      if (S_ISDIR(existing.st_mode)) {
        fs::remove_all(dst, ec);
      } else {
        unlink(dst.c_str());
      }
    }
    if (S_ISLNK(st.st_mode)) {
      std::string target(PATH_MAX, '\0');
      ssize_t n = readlink(src.c_str(), target.data(), target.size());
      if (n < 0 || symlink(target.substr(0, static_cast<size_t>(n)).c_str(), dst.c_str()) != 0) {
        return ErrnoToStatus(errno, absl::StrCat("symlink ", dst));
      }
    } else if (link(src.c_str(), dst.c_str()) != 0) {
      if (errno != EXDEV && errno != EPERM && errno != EMLINK) {
        return ErrnoToStatus(errno, absl::StrCat("link ", dst));
      }
      fs::copy_file(src, dst, fs::copy_options::overwrite_existing, ec);
      if (ec) return absl::InternalError(absl::StrCat("copy ", src, ": ", ec.message()));
    }
  }
  if (ec) return absl::InternalError(absl::StrCat("walk ", from, ": ", ec.message()));
  return absl::OkStatus();
}

// A task's root (RUN_DIR/root) holds what the task wrote in its /tmp:
// removed through descriptors, following nothing the task left there.
absl::Status RemoveRoot(const std::string& root) {
  const size_t slash = root.rfind('/');
  absl::StatusOr<Fd> parent = OpenDirectory(slash == 0 ? "/" : root.substr(0, slash));
  if (!parent.ok()) return parent.status();
  return RemoveTreeAt(parent->get(), root.substr(slash + 1));
}

}  // namespace

std::string PackageEnvName(const std::string& name) {
  std::string out;
  for (char c : name) out.push_back(absl::ascii_isalnum(c) ? absl::ascii_toupper(c) : '_');
  return out;
}

absl::Status BuildRoot(const std::string& root, const std::vector<std::string>& trees) {
  unlink(RootReadyMarker(root).c_str());
  HERD_RETURN_IF_ERROR(RemoveRoot(root));
  if (mkdir(root.c_str(), 0755) != 0) return ErrnoToStatus(errno, absl::StrCat("mkdir ", root));
  for (const std::string& tree : trees) HERD_RETURN_IF_ERROR(CopyTree(tree, root));
  // Mount points for herd-shim --root (shim_protocol.h) and --bind.
  for (const char* d : {"proc", "dev", "sandbox", "tmp"}) {
    std::string path = root + "/" + d;
    struct stat st;
    if (lstat(path.c_str(), &st) == 0 && !S_ISDIR(st.st_mode)) unlink(path.c_str());
    if (mkdir(path.c_str(), strcmp(d, "tmp") == 0 ? 01777 : 0755) != 0 && errno != EEXIST) {
      return ErrnoToStatus(errno, absl::StrCat("mkdir ", path));
    }
  }
  chmod((root + "/tmp").c_str(), 01777);
  return WriteFileAtomic(RootReadyMarker(root), "");
}

absl::StatusOr<std::shared_ptr<PackagesExtension>> PackagesExtension::Create(Options options) {
  HERD_ASSIGN_OR_RETURN(std::unique_ptr<PackageCache> cache, PackageCache::Open(options.cache));
  return std::shared_ptr<PackagesExtension>(new PackagesExtension(std::move(options), std::move(cache)));
}

PackagesExtension::PackagesExtension(Options options, std::unique_ptr<PackageCache> cache)
    : options_(std::move(options)), cache_(std::move(cache)) {}

PackagesExtension::~PackagesExtension() { Shutdown(); }

absl::Status PackagesExtension::Init(SupervisorControl* control) {
  control_ = control;
  for (int i = 0; i < std::max(1, options_.fetch_threads); ++i) workers_.emplace_back([this] { Worker(); });
  return absl::OkStatus();
}

void PackagesExtension::Shutdown() {
  {
    absl::MutexLock l(&mu_);
    stopping_ = true;
  }
  stop_ = true;
  for (std::thread& t : workers_) {
    if (t.joinable()) t.join();
  }
  workers_.clear();
}

void PackagesExtension::Enqueue(std::string owner, std::function<void()> job) {
  absl::MutexLock l(&mu_);
  EnqueueLocked(std::move(owner), std::move(job));
}

void PackagesExtension::EnqueueLocked(std::string owner, std::function<void()> job) {
  jobs_.emplace_back(std::move(owner), std::move(job));
}

bool PackagesExtension::NextJobLocked(std::deque<std::pair<std::string, std::function<void()>>>::iterator* it) {
  for (auto i = jobs_.begin(); i != jobs_.end(); ++i) {
    if (i->first.empty()) {
      *it = i;
      return true;
    }
    auto r = running_.find(i->first);
    if (r == running_.end() || r->second < PerUserShare()) {
      *it = i;
      return true;
    }
  }
  return false;
}

void PackagesExtension::Worker() {
  while (true) {
    std::string owner;
    std::function<void()> job;
    {
      absl::MutexLock l(&mu_);
      std::deque<std::pair<std::string, std::function<void()>>>::iterator next;
      auto ready = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_ || NextJobLocked(&next); };
      mu_.Await(absl::Condition(&ready));
      if (stopping_ || !NextJobLocked(&next)) {  // (the condition may have been judged on another thread)
        if (stopping_) return;
        continue;
      }
      owner = std::move(next->first);
      job = std::move(next->second);
      jobs_.erase(next);
      if (!owner.empty()) ++running_[owner];
    }
    job();
    if (owner.empty()) continue;
    absl::MutexLock l(&mu_);
    if (--running_[owner] <= 0) running_.erase(owner);
  }
}

void PackagesExtension::TakeRefsLocked(const RunView& run, RunState& state) {
  if (!state.refs.empty() || run.spec.packages().empty()) return;
  for (const v1::Package& p : run.spec.packages()) {
    std::string sha = absl::AsciiStrToLower(p.sha256());
    cache_->Ref(sha);
    state.refs.push_back(std::move(sha));
  }
}

void PackagesExtension::Recovered(const RunView& run) {
  absl::MutexLock l(&mu_);
  TakeRefsLocked(run, runs_[run.spec.run_id()]);
}

// A fetch is one job's digest from one URL: another job naming the same
// digest with another URL (by mistake, or to squat it) fetches on its own,
// and its failure is never reported to runs that wait for theirs. Only bytes
// that hash to the digest become the cached object, whoever fetched them.
std::string PackagesExtension::FetchKey(const v1::Package& package) {
  return absl::StrCat(absl::AsciiStrToLower(package.sha256()), " ", package.url());
}

void PackagesExtension::Fetch(v1::Package package) {
  const std::string key = FetchKey(package);
  absl::Status st = cache_->Install(package, &stop_);
  if (!st.ok()) HERD_LOG_WARN("{}", st.ToString());
  {
    absl::MutexLock l(&mu_);
    FetchState& f = fetches_[key];
    f.running = false;
    f.error = st;
    f.error_generation = f.generation;
  }
  if (control_ != nullptr && !stop_) control_->Retry();
}

absl::Status PackagesExtension::EnsureLocked(const RunView& run, RunState& state, const v1::Package& package,
                                             std::string* path) {
  const std::string sha = absl::AsciiStrToLower(package.sha256());
  const std::string key = FetchKey(package);
  if (std::optional<std::string> p = cache_->Lookup(sha)) {
    *path = *p;
    state.waiting.erase(key);
    return absl::OkStatus();
  }
  FetchState& f = fetches_[key];
  auto w = state.waiting.find(key);
  if (w != state.waiting.end() && !f.running && f.error_generation == w->second && !f.error.ok()) {
    // The fetch this run waited for failed: report it once; the next
    // attempt (if the restart policy makes one) fetches again.
    absl::Status err = f.error;
    state.waiting.erase(w);
    if (absl::IsFailedPrecondition(err) || absl::IsInvalidArgument(err)) return err;  // for good
    return absl::InternalError(err.message());  // the restart policy decides
  }
  if (!f.running) {
    f.running = true;
    ++f.generation;
    EnqueueLocked(run.spec.user(), [this, package] { Fetch(package); });
  }
  state.waiting[key] = f.generation;
  return absl::UnavailableError(absl::StrCat("fetching package ", package.name(), " from ", package.url()));
}

absl::Status PackagesExtension::Prepare(const RunView& run, AttemptSetup* setup) {
  if (run.spec.packages().empty()) return absl::OkStatus();
  for (const v1::Package& p : run.spec.packages()) HERD_RETURN_IF_ERROR(PackageCache::Validate(p));
  const bool root_mode = run.spec.isolation().root_from_packages();
  std::vector<std::string> trees;
  absl::Status waiting = absl::OkStatus();
  {
    absl::MutexLock l(&mu_);
    RunState& state = runs_[run.spec.run_id()];
    TakeRefsLocked(run, state);
    for (const v1::Package& p : run.spec.packages()) {
      std::string path;
      absl::Status st = EnsureLocked(run, state, p, &path);
      if (absl::IsUnavailable(st)) {
        if (waiting.ok()) waiting = st;
        continue;
      }
      if (!st.ok()) return st;
      trees.push_back(path);
    }
    if (!waiting.ok()) return waiting;
    if (root_mode) {
      const std::string root = TaskRootOf(run.dir);
      if (!state.root_error.ok()) {
        absl::Status err = state.root_error;
        state.root_error = absl::OkStatus();
        return err;
      }
      if (state.root_building) return absl::UnavailableError("building the task's root from its packages");
      if (access(RootReadyMarker(root).c_str(), F_OK) != 0) {
        state.root_building = true;
        std::string run_id = run.spec.run_id();
        EnqueueLocked(run.spec.user(), [this, run_id, root, trees] {
          absl::Status st = BuildRoot(root, trees);
          if (!st.ok()) HERD_LOG_WARN("run {}: cannot build its root: {}", run_id, st.ToString());
          {
            absl::MutexLock l(&mu_);
            auto it = runs_.find(run_id);
            if (it != runs_.end()) {
              it->second.root_building = false;
              it->second.root_error = st.ok() ? st : absl::InternalError(absl::StrCat("building root: ", st.message()));
            }
          }
          if (control_ != nullptr && !stop_) control_->Retry();
        });
        return absl::UnavailableError("building the task's root from its packages");
      }
    }
  }
  if (root_mode) {
    for (const v1::Package& p : run.spec.packages()) setup->env["HERD_PACKAGE_" + PackageEnvName(p.name())] = "/";
    return absl::OkStatus();
  }
  // Symlinks in the sandbox to the cached trees. The sandbox is the task's:
  // what an earlier attempt left at packages/ (a symlink out of it, say) is
  // removed, never followed, and every link is made through the directory's
  // descriptor.
  const std::string dir = run.dir.Sandbox() + "/packages";
  absl::StatusOr<Fd> sandbox = OpenDirectory(run.dir.Sandbox());
  if (!sandbox.ok()) return sandbox.status();
  absl::StatusOr<Fd> links = MakeDirsBeneath(sandbox->get(), "packages", 0755);
  if (!links.ok() && absl::IsFailedPrecondition(links.status())) {
    HERD_RETURN_IF_ERROR(RemoveTreeAt(sandbox->get(), "packages"));
    links = MakeDirsBeneath(sandbox->get(), "packages", 0755);
  }
  if (!links.ok()) return links.status();
  for (int i = 0; i < run.spec.packages_size(); ++i) {
    const v1::Package& p = run.spec.packages(i);
    if (p.name().find('/') != std::string::npos || p.name() == "." || p.name() == "..") {
      return absl::InvalidArgumentError(absl::StrCat("package name \"", p.name(), "\" is not a file name"));
    }
    const std::string link = dir + "/" + p.name();
    // A restart, or the package was evicted and fetched again.
    HERD_RETURN_IF_ERROR(ReplaceWithSymlinkAt(links->get(), p.name(), trees[i]));
    setup->env["HERD_PACKAGE_" + PackageEnvName(p.name())] = link;
  }
  return absl::OkStatus();
}

void PackagesExtension::Released(const RunView& run) {
  RunState state;
  {
    absl::MutexLock l(&mu_);
    auto it = runs_.find(run.spec.run_id());
    if (it == runs_.end()) return;
    state = std::move(it->second);
    runs_.erase(it);
  }
  const std::string root = run.spec.isolation().root_from_packages() ? TaskRootOf(run.dir) : "";
  // Off the supervisor's loop: dropping the last reference may evict (delete
  // trees), and a root holds many links.
  Enqueue("", [this, refs = std::move(state.refs), root] {
    if (!root.empty()) {
      unlink(RootReadyMarker(root).c_str());
      if (absl::Status st = RemoveRoot(root); !st.ok()) HERD_LOG_WARN("cannot remove task root {}: {}", root, st.ToString());
    }
    for (const std::string& sha : refs) cache_->Unref(sha);
  });
}

void PackagesExtension::DescribeMachine(v1::PollResponse* response) const {
  for (v1::CachedPackage& p : cache_->List()) *response->add_packages() = std::move(p);
}

}  // namespace herd::agent
