#include "harness/clients.h"

#include <gtest/gtest.h>

#include "pki/pki.h"
#include "rpc/rpc.h"

namespace herd::harness {
namespace {

pki::Credential Load(const std::string& file) {
  absl::StatusOr<pki::Credential> c = pki::LoadCredential(file);
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? *c : pki::Credential{};
}

}  // namespace

std::unique_ptr<v1::Herd::Stub> MasterStub(const Cell& cell, const std::string& credential_file) {
  return v1::Herd::NewStub(rpc::Channel(cell.master_address(), Load(credential_file), rpc::MasterIdentity()));
}

std::unique_ptr<v1::Frameworks::Stub> FrameworksStub(const Cell& cell, const std::string& credential_file) {
  return v1::Frameworks::NewStub(rpc::Channel(cell.master_address(), Load(credential_file), rpc::MasterIdentity()));
}

std::unique_ptr<v1::Agent::Stub> AgentStub(const std::string& address, const std::string& machine,
                                           const std::string& credential_file) {
  return v1::Agent::NewStub(rpc::Channel(address, Load(credential_file), rpc::MachineIdentity(machine)));
}

NamesStream NamesStream::Watch(v1::Herd::Stub* stub, const std::string& name, int64_t deadline_ms) {
  NamesStream s;
  s.ctx = rpc::Context("", deadline_ms);
  v1::WatchNamesRequest req;
  req.set_name(name);
  s.reader = stub->WatchNames(s.ctx.get(), req);
  v1::WatchNamesResponse first;
  if (s.reader->Read(&first)) {
    s.open = true;
  } else {
    s.refused = s.reader->Finish();
  }
  return s;
}

void NamesStream::Close() {
  if (!open) return;
  ctx->TryCancel();
  (void)reader->Finish();
  open = false;
}

FrameworkStream FrameworkStream::Subscribe(v1::Frameworks::Stub* stub, const v1::FrameworkInfo& info) {
  FrameworkStream s;
  s.ctx = rpc::Context("", 300'000);  // bounds a test that waits on it
  v1::SubscribeRequest req;
  *req.mutable_framework() = info;
  s.reader = stub->Subscribe(s.ctx.get(), req);
  v1::FrameworkEvent e;
  while (s.reader->Read(&e)) {
    if (e.has_subscribed()) {
      s.subscribed = true;
      s.id = e.subscribed().framework_id();
      return s;
    }
  }
  s.refused = s.reader->Finish();
  return s;
}

void FrameworkStream::Close() {
  if (!subscribed) return;
  ctx->TryCancel();
  (void)reader->Finish();
  subscribed = false;
}

}  // namespace herd::harness
