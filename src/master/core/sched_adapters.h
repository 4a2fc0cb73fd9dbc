// The in-process scheduler's ends (`herd master --scheduler internal`): the
// loop in sched/loop reads the committer's durable change feed and proposes
// through MasterCore::Propose, the same path as the Propose RPC of an
// external `herd scheduler`.
#pragma once

#include <functional>

#include "master/core/committer.h"
#include "sched/loop/scheduler_loop.h"

namespace herd::master {

// Bootstrap: a copy of the committer's state; Next: its durable change feed
// (OUT_OF_RANGE when the loop fell further behind than the in-memory feed).
class CommitterChangeSource final : public sched::ChangeSource {
 public:
  explicit CommitterChangeSource(Committer* committer) : committer_(committer) {}
  absl::StatusOr<cell::CellState> Bootstrap() override;
  absl::StatusOr<std::vector<v1::Mutation>> Next(int64_t after, int64_t timeout_ms) override;

 private:
  Committer* const committer_;
};

// Hands proposals to a function (MasterCore::Propose).
class FunctionProposalSink final : public sched::ProposalSink {
 public:
  using Fn = std::function<absl::StatusOr<v1::ProposeResponse>(const v1::ProposeRequest&)>;
  explicit FunctionProposalSink(Fn fn) : fn_(std::move(fn)) {}
  absl::StatusOr<v1::ProposeResponse> Propose(const v1::ProposeRequest& request) override { return fn_(request); }

 private:
  Fn fn_;
};

}  // namespace herd::master
