// The master's long-lived streams without a thread each (#33 item 4): Watch,
// WatchNames, ExportCheckpoint and the frameworks' Subscribe are gRPC
// callback streams (CursorStream) fed by a Cursor (master/core/api/cursor.h).
// A stream sends while its cursor has messages and its writes complete; when
// the cursor has nothing it is parked, and one thread (the StreamPump) wakes
// the parked streams when the cell's durable revision advances, when someone
// Kick()s (a framework's event queue), and once a second. A thousand idle
// watchers cost a thousand small objects, not a thousand threads, and unary
// calls never wait for a thread a stream holds.
#pragma once

#include <grpcpp/grpcpp.h>

#include <functional>
#include <map>
#include <memory>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "master/core/api/cursor.h"
#include "master/core/committer.h"
#include "master/server/stream_limits.h"
#include "rpc/rpc.h"

namespace herd::master {

class StreamPump {
 public:
  class Stream {
   public:
    virtual ~Stream() = default;
    // Sends what is ready now; never blocks.
    virtual void Pump() = 0;
  };

  // `committer` (may be null) wakes every parked stream when the durable
  // revision advances; it must outlive the pump.
  explicit StreamPump(Committer* committer);
  // The server's calls must have ended first.
  ~StreamPump();
  StreamPump(const StreamPump&) = delete;
  StreamPump& operator=(const StreamPump&) = delete;

  void Add(std::shared_ptr<Stream> s);
  void Remove(const Stream* s);
  // Wakes every stream soon; cheap, from any thread, under any lock.
  void Kick();
  // Streams being served.
  size_t size() const;

 private:
  void Loop();

  Committer* const committer_;
  int listener_ = -1;
  mutable absl::Mutex mu_;
  std::map<const Stream*, std::shared_ptr<Stream>> streams_ ABSL_GUARDED_BY(mu_);
  bool kicked_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

// One server stream fed by a cursor. Make() it in the method handler, then
// return Serve(...) or Refuse(...). It owns itself until gRPC is done with it.
template <typename Msg>
class CursorStream final : public grpc::ServerWriteReactor<Msg>,
                           public StreamPump::Stream,
                           public std::enable_shared_from_this<CursorStream<Msg>> {
 public:
  static std::shared_ptr<CursorStream> Make(StreamPump* pump) {
    std::shared_ptr<CursorStream> s(new CursorStream(pump));
    s->self_ = s;
    return s;
  }

  // Ends the stream with `why` (a revoked credential); safe to call from any
  // thread at any time, also after the stream has ended.
  std::function<void()> Ender(grpc::Status why) {
    return [weak = this->weak_from_this(), why] {
      if (auto s = weak.lock()) s->End(why);
    };
  }

  // Serves `cursor`; `slot` is held and `cleanup` runs once the stream is over.
  grpc::ServerWriteReactor<Msg>* Serve(std::unique_ptr<Cursor<Msg>> cursor, StreamLimits::Slot slot,
                                       std::function<void()> cleanup = nullptr) {
    cursor_ = std::move(cursor);
    slot_ = std::move(slot);
    cleanup_ = std::move(cleanup);
    pump_->Add(this->shared_from_this());
    Pump();
    return this;
  }

  grpc::ServerWriteReactor<Msg>* Refuse(const grpc::Status& st) {
    {
      absl::MutexLock l(&mu_);
      finished_ = true;
    }
    this->Finish(st);
    return this;
  }

  void Pump() override {
    {
      absl::MutexLock l(&mu_);
      if (finished_ || cursor_ == nullptr) return;
      if (busy_) {
        again_ = true;  // whoever is busy looks again
        return;
      }
      busy_ = true;
    }
    for (;;) {
      std::optional<grpc::Status> end;
      {
        absl::MutexLock l(&mu_);
        again_ = false;
        end = end_;
      }
      if (end) return FinishOnce(*end);
      switch (cursor_->Next(&msg_)) {
        case Cursor<Msg>::Step::kMessage:
          this->StartWrite(&msg_);  // busy until OnWriteDone
          return;
        case Cursor<Msg>::Step::kEnd:
          return FinishOnce(rpc::ToGrpc(cursor_->status()));
        case Cursor<Msg>::Step::kWait:
          break;
      }
      absl::MutexLock l(&mu_);
      if (!again_) {
        busy_ = false;
        return;
      }
    }
  }

  void OnWriteDone(bool ok) override {
    if (!ok) return FinishOnce(grpc::Status(grpc::StatusCode::CANCELLED, "the reader went away"));
    {
      absl::MutexLock l(&mu_);
      busy_ = false;
    }
    Pump();
  }

  void OnCancel() override { End(grpc::Status(grpc::StatusCode::CANCELLED, "cancelled")); }

  void OnDone() override {
    pump_->Remove(this);
    if (cleanup_) cleanup_();
    slot_ = StreamLimits::Slot();
    std::shared_ptr<CursorStream> self = std::move(self_);  // may be the last reference
  }

 private:
  explicit CursorStream(StreamPump* pump) : pump_(pump) {}

  void End(grpc::Status why) {
    {
      absl::MutexLock l(&mu_);
      if (finished_ || end_) return;
      end_ = std::move(why);
    }
    Pump();
  }

  // Only the busy thread (or a refusal) finishes.
  void FinishOnce(const grpc::Status& st) {
    {
      absl::MutexLock l(&mu_);
      if (finished_) return;
      finished_ = true;
    }
    this->Finish(st);
  }

  StreamPump* const pump_;
  std::shared_ptr<CursorStream> self_;  // until OnDone
  std::unique_ptr<Cursor<Msg>> cursor_;
  StreamLimits::Slot slot_;
  std::function<void()> cleanup_;
  Msg msg_;  // the message being written
  absl::Mutex mu_;
  bool busy_ ABSL_GUARDED_BY(mu_) = false;  // a thread is in the cursor, or a write is out
  bool again_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  std::optional<grpc::Status> end_ ABSL_GUARDED_BY(mu_);
};

}  // namespace herd::master
