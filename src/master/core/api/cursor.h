// A stream's producer that never blocks. The master serves its long-lived
// streams (Watch, WatchNames, ExportCheckpoint, the frameworks' Subscribe)
// without a thread each (#33 item 4): the server asks a Cursor for the next
// message whenever the previous one is written or the cell has changed, and
// parks the stream when there is nothing to send. Drain() drives a cursor on
// the calling thread instead, for in-process callers and tests.
#pragma once

#include <functional>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "master/core/committer.h"

namespace herd::master {

template <typename Msg>
class Cursor {
 public:
  enum class Step {
    kMessage,  // *out holds the next message
    kWait,     // nothing to send now: ask again once the cell has changed
    kEnd,      // the stream is over: status() says how
  };
  virtual ~Cursor() = default;
  // Never blocks for long: reads the state or at most one bounded chunk of
  // the store.
  virtual Step Next(Msg* out) = 0;
  // Why the stream ended (OK: it is complete).
  virtual absl::Status status() const { return absl::OkStatus(); }
};

// Sends what `cursor` produces to `send` until the cursor ends, `send`
// returns false (then: `gone`, OK by default) or `cancelled()` is true,
// waiting on `committer` when there is nothing to send.
template <typename Msg>
absl::Status Drain(
    Cursor<Msg>& cursor, Committer& committer, const std::function<bool(const Msg&)>& send,
    const std::function<bool()>& cancelled = [] { return false; }, absl::Status gone = absl::OkStatus()) {
  Msg m;
  while (!cancelled()) {
    const int64_t seen = committer.durable_revision();
    switch (cursor.Next(&m)) {
      case Cursor<Msg>::Step::kMessage:
        if (!send(m)) return gone;
        break;
      case Cursor<Msg>::Step::kEnd:
        return cursor.status();
      case Cursor<Msg>::Step::kWait:
        committer.WaitApplied(seen + 1, absl::Milliseconds(500));
        break;
    }
  }
  return absl::OkStatus();
}

}  // namespace herd::master
