#include "agent/supervisor/log_reader.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "absl/strings/str_cat.h"
#include "base/errno_status.h"

namespace herd::agent {
namespace {

// A listing raced by a rotation is taken again, at most this often.
constexpr int kSnapshotAttempts = 20;

}  // namespace

std::vector<LogReader::File> LogReader::Snapshot(const std::string& path) {
  for (int attempt = 0;; ++attempt) {
    // The live file first: if the name still points at it after the
    // rotated files were opened, no rotation completed meanwhile. One that
    // was under way only moves files to higher numbers, which the upward
    // scan below sees (possibly twice: duplicates are dropped), and keeps
    // their order.
    File live;
    live.fd.Reset(open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
    struct stat st;
    if (live.fd.valid() && fstat(live.fd.get(), &st) == 0) {
      live.dev = st.st_dev;
      live.ino = st.st_ino;
    } else {
      live.fd.Reset();
    }
    std::vector<std::pair<int, File>> rotated;
    auto seen = [&](const struct stat& s) {
      if (live.fd.valid() && s.st_dev == live.dev && s.st_ino == live.ino) return true;
      for (const auto& [k, f] : rotated) {
        if (f.dev == s.st_dev && f.ino == s.st_ino) return true;
      }
      return false;
    };
    // During a rotation one number may be missing for a moment: stop at
    // two missing in a row.
    for (int k = 1, missing = 0; missing < 2; ++k) {
      File f;
      f.fd.Reset(open(absl::StrCat(path, ".", k).c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
      if (!f.fd.valid() || fstat(f.fd.get(), &st) != 0) {
        ++missing;
        continue;
      }
      missing = 0;
      if (seen(st)) continue;
      f.dev = st.st_dev;
      f.ino = st.st_ino;
      rotated.emplace_back(k, std::move(f));
    }
    bool settled;
    if (stat(path.c_str(), &st) == 0) {
      settled = live.fd.valid() && st.st_dev == live.dev && st.st_ino == live.ino;
    } else {
      // No live file: between a rotation's rename and the new file, or the
      // writer is gone. Wait a little for the former.
      settled = !live.fd.valid() && attempt >= 5;
    }
    if (!settled && attempt + 1 < kSnapshotAttempts) {
      if (attempt > 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      continue;
    }
    std::vector<File> out;
    std::sort(rotated.begin(), rotated.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
    for (auto& [k, f] : rotated) out.push_back(std::move(f));
    if (live.fd.valid()) out.push_back(std::move(live));
    return out;
  }
}

absl::StatusOr<LogReader> LogReader::Open(std::string path, int64_t tail_bytes) {
  LogReader r(std::move(path));
  std::vector<File> files = Snapshot(r.path_);
  if (files.empty()) return absl::NotFoundError(absl::StrCat("no log at ", r.path_));
  size_t start = 0;
  int64_t offset = 0;
  if (tail_bytes > 0) {
    int64_t left = tail_bytes;
    for (size_t i = files.size(); i-- > 0;) {
      struct stat st;
      int64_t size = fstat(files[i].fd.get(), &st) == 0 ? st.st_size : 0;
      if (size >= left) {
        start = i;
        offset = size - left;
        break;
      }
      left -= size;
    }
  }
  if (offset > 0 && lseek(files[start].fd.get(), offset, SEEK_SET) < 0) {
    return ErrnoToStatus(errno, absl::StrCat("lseek ", r.path_));
  }
  for (size_t i = start; i < files.size(); ++i) r.files_.push_back(std::move(files[i]));
  return r;
}

bool LogReader::QueueNewer() {
  std::vector<File> files = Snapshot(path_);
  const File& current = files_.back();
  size_t first_newer = 0;  // if the current file is gone, every file is newer
  for (size_t i = 0; i < files.size(); ++i) {
    if (files[i].dev == current.dev && files[i].ino == current.ino) first_newer = i + 1;
  }
  if (first_newer >= files.size()) return false;
  for (size_t i = first_newer; i < files.size(); ++i) files_.push_back(std::move(files[i]));
  return true;
}

absl::StatusOr<size_t> LogReader::Read(std::string* out, size_t max_bytes) {
  char buf[64 * 1024];
  if (max_bytes == 0) return 0;
  while (!files_.empty()) {
    File& f = files_.front();
    ssize_t n = read(f.fd.get(), buf, std::min(sizeof(buf), max_bytes));
    if (n > 0) {
      out->append(buf, static_cast<size_t>(n));
      return static_cast<size_t>(n);
    }
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoToStatus(errno, absl::StrCat("read ", path_));
    }
    if (files_.size() > 1) {
      // A rotated file, complete (the shim closes a file before renaming
      // it, and we read it to its end after seeing the rename).
      files_.pop_front();
      continue;
    }
    // At the end of the newest file we know.
    struct stat st;
    off_t pos = lseek(f.fd.get(), 0, SEEK_CUR);
    if (fstat(f.fd.get(), &st) == 0 && pos > st.st_size) {
      // Truncated in place (copytruncate-style): start over.
      lseek(f.fd.get(), 0, SEEK_SET);
      continue;
    }
    if (stat(path_.c_str(), &st) != 0 || (st.st_dev == f.dev && st.st_ino == f.ino)) return 0;
    // Rotated: queue what came after it, then (loop) read the rest of it,
    // written between our last read and the rename.
    if (!QueueNewer()) return 0;
  }
  return 0;
}

}  // namespace herd::agent
