#include "sched/server/grpc_adapters.h"

#include <chrono>

#include "absl/strings/str_cat.h"
#include "base/clock.h"
#include "rpc/rpc.h"

namespace herd::sched {
namespace {

constexpr size_t kMaxBatch = 10'000;

}  // namespace

GrpcChangeSource::GrpcChangeSource(std::shared_ptr<grpc::Channel> channel, std::string user, Options options)
    : channel_(std::move(channel)), stub_(v1::Herd::NewStub(channel_)), user_(std::move(user)), options_(options) {}

GrpcChangeSource::~GrpcChangeSource() { StopWatch(); }

void GrpcChangeSource::Interrupt() {
  absl::MutexLock l(&mu_);
  interrupted_ = true;
}

absl::StatusOr<cell::CellState> GrpcChangeSource::Bootstrap() {
  StopWatch();
  if (!channel_->WaitForConnected(std::chrono::system_clock::now() +
                                  std::chrono::milliseconds(options_.connect_timeout_ms))) {
    return absl::UnavailableError("cannot connect to the master");
  }
  auto ctx = rpc::Context(user_, options_.checkpoint_timeout_ms);
  v1::ExportCheckpointRequest req;
  auto reader = stub_->ExportCheckpoint(ctx.get(), req);
  cell::CellState state;
  bool have_snapshot = false;
  absl::Status bad;
  v1::CheckpointRecord rec;
  while (reader->Read(&rec)) {
    if (rec.has_snapshot()) {
      absl::StatusOr<cell::CellState> s = cell::CellState::FromSnapshot(rec.snapshot());
      if (!s.ok()) {
        bad = s.status();
        break;
      }
      state = std::move(*s);
      have_snapshot = true;
    } else if (rec.has_mutation()) {
      if (!have_snapshot) {
        bad = absl::DataLossError("the checkpoint has a mutation before its snapshot");
        break;
      }
      if (absl::Status st = state.Apply(rec.mutation()); !st.ok()) {
        bad = absl::DataLossError(
            absl::StrCat("checkpoint revision ", rec.mutation().revision(), " does not apply: ", st.message()));
        break;
      }
    }
  }
  if (!bad.ok()) ctx->TryCancel();
  grpc::Status st = reader->Finish();
  if (!bad.ok()) return bad;
  if (!st.ok()) return rpc::FromGrpc(st);
  if (!have_snapshot) return absl::DataLossError("the master's checkpoint has no snapshot");
  return state;
}

void GrpcChangeSource::StartWatch(int64_t from) {
  ctx_ = rpc::Context(user_, 0);
  watching_ = true;
  ended_ = false;
  end_status_ = absl::OkStatus();
  queue_.clear();
  expect_ = from;
  grpc::ClientContext* ctx = ctx_.get();
  reader_ = std::thread([this, ctx, from] {
    v1::WatchRequest req;
    req.set_from_revision(from);
    std::unique_ptr<grpc::ClientReader<v1::WatchResponse>> stream = stub_->Watch(ctx, req);
    v1::WatchResponse resp;
    while (stream->Read(&resp)) {
      absl::MutexLock l(&mu_);
      for (v1::Mutation& m : *resp.mutable_mutations()) queue_.push_back(std::move(m));
    }
    grpc::Status st = stream->Finish();
    absl::MutexLock l(&mu_);
    ended_ = true;
    end_status_ = st.ok() ? absl::UnavailableError("the master closed the stream") : rpc::FromGrpc(st);
  });
}

void GrpcChangeSource::StopWatch() {
  {
    absl::MutexLock l(&mu_);
    if (ctx_) ctx_->TryCancel();
  }
  if (reader_.joinable()) reader_.join();
  absl::MutexLock l(&mu_);
  ctx_.reset();
  watching_ = false;
  ended_ = false;
  queue_.clear();
}

absl::Status GrpcChangeSource::Probe(int64_t after) {
  auto ctx = rpc::Context(user_, 5'000);
  v1::GetCellRequest req;
  v1::CellInfo info;
  grpc::Status st = stub_->GetCell(ctx.get(), req, &info);
  if (!st.ok()) return rpc::FromGrpc(st);
  if (info.durable_revision() < after) {
    return absl::OutOfRangeError(absl::StrCat("the master is at revision ", info.durable_revision(),
                                              ", behind this scheduler's ", after));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<v1::Mutation>> GrpcChangeSource::Next(int64_t after, int64_t timeout_ms) {
  bool restart;
  {
    absl::MutexLock l(&mu_);
    restart = !watching_ || expect_ != after + 1;
  }
  if (restart) {
    StopWatch();
    absl::MutexLock l(&mu_);
    StartWatch(after + 1);
    last_data_ms_ = SteadyNowMs();
  }
  std::vector<v1::Mutation> out;
  absl::Status ended;
  {
    absl::MutexLock l(&mu_);
    auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !queue_.empty() || ended_ || interrupted_; };
    mu_.AwaitWithTimeout(absl::Condition(&ready), absl::Milliseconds(timeout_ms));
    if (!queue_.empty()) {
      while (!queue_.empty() && out.size() < kMaxBatch) {
        out.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
      expect_ = out.back().revision() + 1;
      last_data_ms_ = SteadyNowMs();
      return out;
    }
    if (ended_) ended = end_status_.ok() ? absl::UnavailableError("stream ended") : end_status_;
  }
  if (!ended.ok()) {
    StopWatch();
    return absl::OutOfRangeError(absl::StrCat("the change stream ended: ", ended.message()));
  }
  if (SteadyNowMs() - last_data_ms_ >= options_.probe_after_ms) {
    last_data_ms_ = SteadyNowMs();
    if (absl::Status st = Probe(after); !st.ok()) {
      StopWatch();
      return absl::OutOfRangeError(absl::StrCat("the change stream looks dead: ", st.message()));
    }
  }
  return out;
}

GrpcProposalSink::GrpcProposalSink(std::shared_ptr<grpc::Channel> channel, std::string user, int64_t timeout_ms)
    : stub_(v1::Herd::NewStub(std::move(channel))), user_(std::move(user)), timeout_ms_(timeout_ms) {}

absl::StatusOr<v1::ProposeResponse> GrpcProposalSink::Propose(const v1::ProposeRequest& request) {
  auto ctx = rpc::Context(user_, timeout_ms_);
  v1::ProposeResponse resp;
  grpc::Status st = stub_->Propose(ctx.get(), request, &resp);
  if (!st.ok()) return rpc::FromGrpc(st);
  return resp;
}

}  // namespace herd::sched
