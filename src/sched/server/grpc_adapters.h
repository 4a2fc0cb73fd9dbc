// The scheduler loop's ends over gRPC, for `herd scheduler` (a scheduler in
// its own process, Borg §3.4): the replica is bootstrapped from the master's
// ExportCheckpoint (snapshot + log) and follows Watch from the next
// revision; proposals go to the master's Propose RPC.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <thread>

#include <grpcpp/grpcpp.h>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "herd/v1/api.grpc.pb.h"
#include "sched/loop/scheduler_loop.h"

namespace herd::sched {

class GrpcChangeSource final : public ChangeSource {
 public:
  struct Options {
    int64_t checkpoint_timeout_ms = 300'000;
    // With no mutation for this long, ask the master (GetCell) whether the
    // stream is still good: if the master is unreachable or its durable
    // revision is behind ours (a different cell), the stream is dropped.
    int64_t probe_after_ms = 10'000;
    // Bootstrap waits this long for a connection to the master (a master
    // that restarts is reached as soon as it listens again).
    int64_t connect_timeout_ms = 2'000;
  };
  GrpcChangeSource(std::shared_ptr<grpc::Channel> channel, std::string user, Options options);
  ~GrpcChangeSource() override;

  // ExportCheckpoint: the snapshot, then the log after it, applied.
  absl::StatusOr<cell::CellState> Bootstrap() override;
  // Mutations from a Watch stream opened at after + 1 (reopened whenever the
  // caller asks for another position). OUT_OF_RANGE when the stream ended or
  // broke (the master restarted, the revision is gone): the caller reloads.
  absl::StatusOr<std::vector<v1::Mutation>> Next(int64_t after, int64_t timeout_ms) override;
  void Interrupt() override;

 private:
  void StartWatch(int64_t from) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void StopWatch();
  absl::Status Probe(int64_t after);

  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Herd::Stub> stub_;
  const std::string user_;
  const Options options_;

  absl::Mutex mu_;
  std::unique_ptr<grpc::ClientContext> ctx_ ABSL_GUARDED_BY(mu_);
  std::thread reader_;
  bool watching_ ABSL_GUARDED_BY(mu_) = false;
  int64_t expect_ ABSL_GUARDED_BY(mu_) = 0;  // revision the caller asks for next
  std::deque<v1::Mutation> queue_ ABSL_GUARDED_BY(mu_);
  bool ended_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status end_status_ ABSL_GUARDED_BY(mu_);
  bool interrupted_ ABSL_GUARDED_BY(mu_) = false;
  int64_t last_data_ms_ = 0;  // steady clock, Next()'s thread only
};

class GrpcProposalSink final : public ProposalSink {
 public:
  GrpcProposalSink(std::shared_ptr<grpc::Channel> channel, std::string user, int64_t timeout_ms = 30'000);
  absl::StatusOr<v1::ProposeResponse> Propose(const v1::ProposeRequest& request) override;

 private:
  std::unique_ptr<v1::Herd::Stub> stub_;
  const std::string user_;
  const int64_t timeout_ms_;
};

}  // namespace herd::sched
