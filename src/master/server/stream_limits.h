// Open streaming calls (Watch, WatchNames, ExportCheckpoint, the Frameworks
// service's Subscribe). They once held one of the gRPC server's threads each,
// and one user holding every thread failed every other call "Server
// Threadpool Exhausted" (#33 H3); they are served without a thread now
// (stream_pump.h), and these caps bound what one user (and everyone) may
// hold open of the master's memory and wake-ups. Every streaming handler
// takes a Slot before it serves: at most `per_user` open streams per user,
// and at most `total` in the cell.
// A refused stream gets RESOURCE_EXHAUSTED naming the cap. A second
// instance counts each user's unary requests in flight (#33 item 4: one
// user's slow calls, such as history queries, cannot take every thread).
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "master/core/admission/authorizer.h"

namespace herd::master {

class StreamLimits {
 public:
  struct Options {
    int per_user = 8;  // <= 0: no per-user cap
    int total = 1024;  // <= 0: no cell-wide cap
    // How refusals name what is counted and the flags that set the caps
    // (the same class counts unary requests in flight: HerdService).
    std::string counted = "open streams";
    std::string per_user_flag = "--max-streams-per-user";
    std::string total_flag = "--max-streams";
  };
  // An open stream, counted until it is destroyed.
  class Slot {
   public:
    Slot() = default;
    Slot(Slot&& o) noexcept : limits_(o.limits_), user_(std::move(o.user_)), id_(o.id_) { o.limits_ = nullptr; }
    Slot& operator=(Slot&& o) noexcept;
    Slot(const Slot&) = delete;
    Slot& operator=(const Slot&) = delete;
    ~Slot() { Release(); }

   private:
    friend class StreamLimits;
    Slot(StreamLimits* l, std::string user, uint64_t id) : limits_(l), user_(std::move(user)), id_(id) {}
    void Release();
    StreamLimits* limits_ = nullptr;
    std::string user_;
    uint64_t id_ = 0;
  };

  explicit StreamLimits(Options o) : opts_(o) {}
  ~StreamLimits();
  // A slot for `who`'s stream `what` ("WatchNames"), or RESOURCE_EXHAUSTED.
  // Masters and agents (not users) count toward the cell-wide cap only.
  // `end` stops the stream (ServerContext::TryCancel): called once, from
  // another thread, when the caller's credential is revoked.
  absl::StatusOr<Slot> Acquire(const Principal& who, const std::string& what, std::function<void()> end = nullptr);

  // Ends every open stream whose caller `revoked` says has lost its
  // credential (#33 L4: a stream outlived its revocation); returns how many.
  int EndRevoked(const std::function<bool(const Principal&)>& revoked);
  // Calls EndRevoked every `every_ms` on a thread of its own until destroyed.
  void SweepRevoked(std::function<bool(const Principal&)> revoked, int64_t every_ms = 250);

  int open() const;
  int open_by(const std::string& user) const;
  const Options& options() const { return opts_; }

 private:
  void Release(const std::string& user, uint64_t id);

  struct Open {
    Principal who;
    std::function<void()> end;
  };
  const Options opts_;
  mutable absl::Mutex mu_;
  int open_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<std::string, int> by_user_ ABSL_GUARDED_BY(mu_);
  std::map<uint64_t, Open> streams_ ABSL_GUARDED_BY(mu_);
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  absl::Mutex sweep_mu_;
  bool stop_ ABSL_GUARDED_BY(sweep_mu_) = false;
  std::thread sweeper_;
};

}  // namespace herd::master
