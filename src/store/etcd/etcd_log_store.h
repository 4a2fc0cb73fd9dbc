// EtcdLogStore: the replicated LogStore backend (docs/design.md §4). The log and
// the snapshots live in an etcd cluster under one key prefix; every write is
// an etcd transaction fenced on the leader's key (LeaderLease), so a master
// that lost leadership -- its lease expired, or another replica holds the
// key now -- can never write again, whatever it still believes.
//
// Keys under PREFIX (layout and argument in docs/store.md):
//   head                  the log's last revision (20 digits, zero-padded)
//   first                 the compaction point (absent: 0)
//   log/<R>               a batch of consecutive mutations whose last is R,
//                         at most chunk_bytes (etcd refuses requests over
//                         its --max-request-bytes, 1.5 MiB by default)
//   snapmeta/<R>          a snapshot at R: "<generation> <chunks> <bytes>"
//   snapdata/<R>/<G>/<i>  its chunks, written before the meta that names G
//   leader                the leader's address, on the leader's lease
//
// An append writes its batches and moves `head` in one transaction when they
// fit in chunk_bytes; a larger one writes batches past head first (invisible
// to readers, who stop at head) and moves head in its last transaction. Each
// transaction compares head with the revision it continues and the leader
// key's creation revision with the fence, so a deposed writer, or a second
// one, writes nothing. Batches left past head by a writer that died midway
// are removed by the next writer before it appends (Open with a fence).
//
// A transaction whose reply was lost may have been applied; the store then
// finds its own batch at head (same bytes) and calls the append done, so a
// retried append neither fails nor writes twice.
//
// Reads (ReadLog, ReadSnapshot) see one etcd revision throughout, so a scan
// is consistent even while the leader appends or compacts.
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "store/etcd/etcd_client.h"
#include "store/log_store.h"

namespace herd::store::etcd {

// What a writer must still hold for its writes to apply: the leader key as
// created by its own campaign.
struct Fence {
  std::string key;
  int64_t create_revision = 0;
};

struct StoreOptions {
  // Every key lives under it; one cell per prefix. Must end in '/'.
  std::string prefix = "/herd/cell/";
  // Largest value written (one log batch, one snapshot chunk); one
  // transaction carries at most this much data.
  size_t chunk_bytes = 1 << 20;
  // Log batches read per Range call.
  int64_t read_batches = 16;
};

class EtcdLogStore final : public LogStore {
 public:
  // A store that writes, fenced on `fence` (the caller's LeaderLease). Drops
  // batches a dead writer left past head. `client` must outlive the store.
  static absl::StatusOr<std::unique_ptr<EtcdLogStore>> Open(Client* client, StoreOptions options,
                                                           Fence fence);
  // A store that only reads (a follower replica, `herd checkpoint export`);
  // its writes fail with FAILED_PRECONDITION.
  static absl::StatusOr<std::unique_ptr<EtcdLogStore>> OpenReadOnly(Client* client,
                                                                   StoreOptions options);
  ~EtcdLogStore() override;
  EtcdLogStore(const EtcdLogStore&) = delete;
  EtcdLogStore& operator=(const EtcdLogStore&) = delete;

  absl::Status Append(absl::Span<const v1::Mutation> mutations) override;
  absl::StatusOr<int64_t> LastRevision() override;
  absl::StatusOr<int64_t> FirstRevision() override;
  absl::Status WriteSnapshot(const v1::CellSnapshot& snapshot) override;
  absl::StatusOr<std::optional<v1::CellSnapshot>> ReadSnapshot(int64_t max_revision) override;
  absl::Status ReadLog(int64_t from, int64_t to,
                       const std::function<absl::Status(const v1::Mutation&)>& fn) override;
  absl::Status Compact(int64_t revision) override;

  // The log's last revision and the etcd revision it was read at: a
  // follower waits for changes to `head` after it (WaitForAppend).
  struct Head {
    int64_t revision = 0;
    int64_t etcd_revision = 0;
  };
  // (A quorum read; gives up at `deadline`.)
  absl::StatusOr<Head> ReadHead(absl::Time deadline = absl::InfiniteFuture());
  // Blocks until head moves past `head.revision` or `timeout` passes; the new
  // head (unchanged on timeout).
  absl::StatusOr<Head> WaitForAppend(const Head& head, absl::Duration timeout);

  const StoreOptions& options() const;
  bool read_only() const;

 private:
  struct Impl;
  explicit EtcdLogStore(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace herd::store::etcd
