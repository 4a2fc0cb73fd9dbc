// gRPC clients for integration tests that call a cell's master (or an
// agent) directly, as a hostile tenant would rather than through the CLI:
// a stub per user, WatchNames streams held open, framework
// subscriptions. Beside harness.h, which stays free of gRPC.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "harness/harness.h"
#include "herd/v1/agent.grpc.pb.h"
#include "herd/v1/api.grpc.pb.h"
#include "herd/v1/frameworks.grpc.pb.h"

namespace herd::harness {

// The master's API with `credential_file` (Cell::UserCredential(user),
// or any other credential).
std::unique_ptr<v1::Herd::Stub> MasterStub(const Cell& cell, const std::string& credential_file);
std::unique_ptr<v1::Frameworks::Stub> FrameworksStub(const Cell& cell, const std::string& credential_file);
// The agent of machine `machine` at `address`, with `credential_file`.
std::unique_ptr<v1::Agent::Stub> AgentStub(const std::string& address, const std::string& machine,
                                           const std::string& credential_file);

// A WatchNames stream: open once its first message came.
struct NamesStream {
  std::unique_ptr<grpc::ClientContext> ctx;
  std::unique_ptr<grpc::ClientReader<v1::WatchNamesResponse>> reader;
  grpc::Status refused;  // when it did not open
  bool open = false;
  // Opens a stream on `name` (its deadline bounds a test that waits on it).
  static NamesStream Watch(v1::Herd::Stub* stub, const std::string& name, int64_t deadline_ms = 300'000);
  void Close();
};

// A framework's subscription: `subscribed` once its first event (with the
// framework's id) came; else `refused` says why.
struct FrameworkStream {
  std::unique_ptr<grpc::ClientContext> ctx;
  std::unique_ptr<grpc::ClientReader<v1::FrameworkEvent>> reader;
  grpc::Status refused;
  std::string id;
  bool subscribed = false;
  static FrameworkStream Subscribe(v1::Frameworks::Stub* stub, const v1::FrameworkInfo& info);
  // Ends the stream: the framework is disconnected (registered until its
  // failover timeout).
  void Close();
};

}  // namespace herd::harness
