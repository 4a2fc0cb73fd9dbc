// Reads a task's output stream (RUN_DIR/stdout or stderr) across herd-shim's
// size rotation: the shim closes the file, renames stdout.K-1 -> stdout.K ..
// stdout -> stdout.1 (dropping the oldest) and starts a new stdout (see
// runtime/shim_protocol.h). A LogReader starts some bytes before the end of
// all of them together (or at the oldest), and when followed it notices the
// rotation (the name now points at another inode, or the file shrank),
// finishes the file it was reading (it keeps it open, so renames and even
// deletion lose nothing) and goes on with the newer files in order, never
// dropping or repeating a byte, unless the reader fell so far behind that a
// file was deleted before it was ever opened.
//
// Not thread-safe; one reader per stream being served.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/runtime/process.h"

namespace herd::agent {

class LogReader {
 public:
  // Opens `path` and its rotated predecessors path.1 (newest) .. path.K,
  // positioned `tail_bytes` before the end of all of them together
  // (tail_bytes <= 0: at the start of the oldest). NOT_FOUND if none exists.
  static absl::StatusOr<LogReader> Open(std::string path, int64_t tail_bytes);

  LogReader(LogReader&&) = default;
  LogReader& operator=(LogReader&&) = default;

  // Appends up to `max_bytes` of output not read yet to *out, oldest first,
  // and returns how many. 0: nothing new now (at the end of the live file);
  // call again later to follow.
  absl::StatusOr<size_t> Read(std::string* out, size_t max_bytes);

 private:
  struct File {
    Fd fd;
    dev_t dev = 0;
    ino_t ino = 0;
  };
  explicit LogReader(std::string path) : path_(std::move(path)) {}
  // path.K .. path.1, path opened as one consistent listing, oldest first.
  static std::vector<File> Snapshot(const std::string& path);
  // After the live file ended and `path_` names another file: queues the
  // files newer than it. False if the rotation is not complete yet.
  bool QueueNewer();

  std::string path_;
  std::deque<File> files_;  // front: being read; back: the newest known
};

}  // namespace herd::agent
