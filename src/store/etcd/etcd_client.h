// etcd::Client: the calls Herd makes to an etcd cluster (v3 API over gRPC),
// over a list of endpoints. Each call goes to the endpoint that answered last;
// when it cannot reach it (UNAVAILABLE: refused, no leader, a member cut off
// from the quorum, or a timeout) the call moves on to the next endpoint, until
// every endpoint was tried twice or the call's deadline passed. That makes a
// member's death or partition invisible to callers beyond a few hundred
// milliseconds, as long as a quorum answers somewhere.
//
// A write whose reply was lost may have been applied, and a write is retried
// on the next endpoint like a read: so every write must be safe to apply
// twice. Herd's are compare-guarded transactions, and the log store tells a
// retried append of its own from a conflicting one (etcd_log_store.h).
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "store/etcd/etcd_rpc.pb.h"

namespace grpc {
class Channel;
class ChannelCredentials;
}  // namespace grpc

namespace herd::store::etcd {

namespace pb = ::etcdserverpb;

struct ClientOptions {
  // HOST:PORT of each member (at least one).
  std::vector<std::string> endpoints;
  // null: plaintext (a test's etcd on loopback); else TLS with these.
  std::shared_ptr<grpc::ChannelCredentials> credentials;
  // With TLS: the name the members' certificates carry, if not their host.
  std::string tls_server_name;
  // Deadline of one attempt of one call.
  absl::Duration attempt_timeout = absl::Seconds(2);
  // Deadline of a call across all its attempts.
  absl::Duration call_timeout = absl::Seconds(8);
};

// Parses "etcd://HOST:PORT,HOST:PORT/PREFIX" (PREFIX optional) into endpoints
// and a key prefix; INVALID_ARGUMENT saying what is wrong.
struct EtcdUrl {
  std::vector<std::string> endpoints;
  std::string prefix;  // "" when the URL has none
};
absl::StatusOr<EtcdUrl> ParseEtcdUrl(const std::string& url);

class Client {
 public:
  static absl::StatusOr<std::unique_ptr<Client>> Connect(ClientOptions options);
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  absl::StatusOr<pb::RangeResponse> Range(const pb::RangeRequest& req);
  // (Gives up at `deadline` if that comes before the client's call timeout.)
  absl::StatusOr<pb::TxnResponse> Txn(const pb::TxnRequest& req, absl::Time deadline = absl::InfiniteFuture());
  absl::StatusOr<pb::PutResponse> Put(const pb::PutRequest& req);
  // Compacts etcd's own history (MVCC revisions) up to `revision`.
  absl::Status Compact(int64_t revision);

  // A lease of `ttl` (etcd rounds it up to its minimum, 2 s by default).
  absl::StatusOr<pb::LeaseGrantResponse> LeaseGrant(absl::Duration ttl);
  absl::Status LeaseRevoke(int64_t id);
  // One keep-alive: the lease's new TTL in seconds, 0 if it has expired.
  // Gives up at `deadline` (DEADLINE_EXCEEDED) if that comes first.
  absl::StatusOr<int64_t> LeaseKeepAlive(int64_t id, absl::Time deadline = absl::InfiniteFuture());

  // Waits until a key in [key, range_end) changes after `after_revision`
  // (etcd revision), or `timeout` passes: the events seen (empty on
  // timeout). OUT_OF_RANGE if etcd compacted past after_revision + 1.
  absl::StatusOr<std::vector<pb::Event>> WaitForChange(const std::string& key,
                                                       const std::string& range_end,
                                                       int64_t after_revision,
                                                       absl::Duration timeout);

  // A watch kept open on [key, range_end) from after_revision + 1 (see
  // WatchStream).
  absl::StatusOr<std::unique_ptr<class WatchStream>> Watch(const std::string& key, const std::string& range_end,
                                                          int64_t after_revision);

  // The endpoint calls go to now.
  std::string CurrentEndpoint() const;
  const ClientOptions& options() const { return opts_; }

 private:
  struct Endpoint;
  explicit Client(ClientOptions options);

  // Runs `call` on endpoints in turn as described above, until the call's
  // timeout or `deadline`, whichever comes first.
  template <typename Call>
  absl::Status Attempt(Call&& call, absl::Time deadline = absl::InfiniteFuture());

  const ClientOptions opts_;
  std::vector<std::unique_ptr<Endpoint>> endpoints_;
  std::atomic<size_t> current_{0};
};

// Key helpers: the smallest key after every key with `prefix` (etcd's prefix
// range end), and "" + '\0' semantics spelled out.
std::string PrefixEnd(const std::string& prefix);

// A watch that stays open: etcd pushes each event as it is applied. (A new
// watch per wait starts "unsynced" whenever anything was written since its
// start revision, and etcd catches those up only every 100 ms: a follower
// re-watching after each append lagged by up to that much.)
class WatchStream {
 public:
  ~WatchStream();
  WatchStream(const WatchStream&) = delete;
  WatchStream& operator=(const WatchStream&) = delete;
  // The events that arrived (waiting up to `timeout` for one): empty on
  // timeout. Once the stream broke, its error (OUT_OF_RANGE if etcd
  // compacted past the start; UNAVAILABLE if the member lost its quorum or
  // went away): open another.
  absl::StatusOr<std::vector<pb::Event>> Next(absl::Duration timeout);

 private:
  friend class Client;
  struct Impl;
  explicit WatchStream(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace herd::store::etcd
