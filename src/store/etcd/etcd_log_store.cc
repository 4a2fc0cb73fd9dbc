#include "store/etcd/etcd_log_store.h"

#include <algorithm>
#include <optional>
#include <random>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"

namespace herd::store::etcd {

namespace {

std::string Pad(int64_t r) { return absl::StrFormat("%020d", r); }

absl::StatusOr<int64_t> ParseRevision(const std::string& value, const std::string& key) {
  int64_t r = 0;
  if (!absl::SimpleAtoi(value, &r) || r < 0) {
    return absl::DataLossError(absl::StrCat("etcd key ", key, " holds '", value.substr(0, 40),
                                            "', not a revision"));
  }
  return r;
}

// A log record is the mutations of one Append, each as a length-delimited
// field 1 (the encoding of `repeated Mutation m = 1`), split into parts.
std::string Encode(absl::Span<const v1::Mutation> mutations) {
  std::string out;
  {
    google::protobuf::io::StringOutputStream zs(&out);
    google::protobuf::io::CodedOutputStream cs(&zs);
    for (const auto& m : mutations) {
      cs.WriteTag(0x0A);
      cs.WriteVarint32(static_cast<uint32_t>(m.ByteSizeLong()));
      m.SerializeWithCachedSizes(&cs);
    }
  }
  return out;
}

absl::Status Decode(const std::string& bytes, const std::string& where,
                    std::vector<v1::Mutation>* out) {
  google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(bytes.data()),
                                            static_cast<int>(bytes.size()));
  in.SetTotalBytesLimit(INT32_MAX);
  while (!in.ExpectAtEnd()) {
    uint32_t len = 0;
    if (in.ReadTag() != 0x0A || !in.ReadVarint32(&len)) {
      return absl::DataLossError(absl::StrCat("etcd log record ", where, " is corrupt"));
    }
    auto limit = in.PushLimit(static_cast<int>(len));
    v1::Mutation m;
    if (!m.MergePartialFromCodedStream(&in) || !in.ConsumedEntireMessage() ||
        in.BytesUntilLimit() != 0) {
      return absl::DataLossError(absl::StrCat("etcd log record ", where, " holds a corrupt mutation"));
    }
    in.PopLimit(limit);
    out->push_back(std::move(m));
  }
  return absl::OkStatus();
}

pb::Compare ValueIs(const std::string& key, const std::string& value) {
  pb::Compare c;
  c.set_key(key);
  c.set_target(pb::Compare::VALUE);
  c.set_result(pb::Compare::EQUAL);
  c.set_value(value);
  return c;
}

pb::Compare Absent(const std::string& key) {
  pb::Compare c;
  c.set_key(key);
  c.set_target(pb::Compare::VERSION);
  c.set_result(pb::Compare::EQUAL);
  c.set_version(0);
  return c;
}

pb::Compare CreatedAt(const std::string& key, int64_t create_revision) {
  pb::Compare c;
  c.set_key(key);
  c.set_target(pb::Compare::CREATE);
  c.set_result(pb::Compare::EQUAL);
  c.set_create_revision(create_revision);
  return c;
}

void AddPut(google::protobuf::RepeatedPtrField<pb::RequestOp>* ops, std::string key,
            std::string value, bool prev_kv = false) {
  auto* put = ops->Add()->mutable_request_put();
  put->set_key(std::move(key));
  put->set_value(std::move(value));
  put->set_prev_kv(prev_kv);
}

void AddDelete(google::protobuf::RepeatedPtrField<pb::RequestOp>* ops, std::string key,
               std::string range_end) {
  auto* del = ops->Add()->mutable_request_delete_range();
  del->set_key(std::move(key));
  del->set_range_end(std::move(range_end));
}

void AddGet(google::protobuf::RepeatedPtrField<pb::RequestOp>* ops, std::string key) {
  ops->Add()->mutable_request_range()->set_key(std::move(key));
}

const pb::KeyValue* Only(const pb::ResponseOp& op) {
  const auto& kvs = op.response_range().kvs();
  return kvs.empty() ? nullptr : &kvs[0];
}

// etcd's "required revision has been compacted" during a scan.
absl::Status Overtaken(const absl::Status& s) {
  if (s.code() != absl::StatusCode::kOutOfRange) return s;
  return absl::OutOfRangeError(absl::StrCat("the log was compacted during the read (", s.message(), ")"));
}

}  // namespace

struct EtcdLogStore::Impl {
  Client* client;
  StoreOptions opts;
  std::optional<Fence> fence;  // nullopt: read-only

  // What a follower's WaitForAppend keeps between calls: the watch on head
  // and the newest head it delivered.
  struct Follow {
    std::unique_ptr<WatchStream> watch;
    Head latest;
  };
  absl::Mutex watch_mu;
  Follow follow ABSL_GUARDED_BY(watch_mu);

  absl::Mutex write_mu;  // one writer at a time within this process
  bool dirty ABSL_GUARDED_BY(write_mu) = false;  // parts may lie past head
  int64_t etcd_compact_next ABSL_GUARDED_BY(write_mu) = 0;

  std::string K(absl::string_view name) const { return absl::StrCat(opts.prefix, name); }
  std::string HeadKey() const { return K("head"); }
  std::string FirstKey() const { return K("first"); }
  std::string LogPrefix() const { return K("log/"); }
  std::string LogKey(int64_t last, int part) const {
    return absl::StrCat(opts.prefix, "log/", Pad(last), "/", absl::StrFormat("%06d", part));
  }
  std::string MetaKey(int64_t rev) const { return absl::StrCat(opts.prefix, "snapmeta/", Pad(rev)); }
  std::string DataPrefix(int64_t rev, const std::string& gen) const {
    return absl::StrCat(opts.prefix, "snapdata/", Pad(rev), "/", gen, "/");
  }

  absl::Status Writable() const {
    if (!fence) return absl::FailedPreconditionError("this etcd store was opened read-only");
    return absl::OkStatus();
  }

  // The newest snapshot record at or before `revision` (none: empty kvs).
  absl::StatusOr<pb::RangeResponse> NewestSnapshotMeta(int64_t revision, bool keys_only) {
    pb::RangeRequest req;
    req.set_key(K("snapmeta/"));
    req.set_range_end(MetaKey(revision) + '\0');
    req.set_sort_order(pb::RangeRequest::DESCEND);
    req.set_sort_target(pb::RangeRequest::KEY);
    req.set_limit(1);
    req.set_keys_only(keys_only);
    return client->Range(req);
  }

  pb::Compare HeadIs(int64_t head) const {
    return head == 0 ? Absent(HeadKey()) : ValueIs(HeadKey(), Pad(head));
  }
  pb::Compare Fenced() const { return CreatedAt(fence->key, fence->create_revision); }

  absl::Status NotLeader(const pb::KeyValue* leader) const {
    return absl::AbortedError(absl::StrCat(
        "fenced: this writer no longer holds ", fence->key, " (created at etcd revision ",
        fence->create_revision, "); ",
        leader ? absl::StrCat("it was created again at ", leader->create_revision(), " by ",
                              leader->value())
               : std::string("nobody holds it now")));
  }

  // head and first in one read; also the etcd revision they were read at.
  absl::Status ReadHeadFirst(int64_t* head, int64_t* first, int64_t* etcd_rev,
                             absl::Time deadline = absl::InfiniteFuture()) {
    pb::TxnRequest txn;
    AddGet(txn.mutable_success(), HeadKey());
    AddGet(txn.mutable_success(), FirstKey());
    auto r = client->Txn(txn, deadline);
    if (!r.ok()) return r.status();
    *head = 0;
    *first = 0;
    if (const auto* kv = Only(r->responses(0))) {
      auto v = ParseRevision(kv->value(), HeadKey());
      if (!v.ok()) return v.status();
      *head = *v;
    }
    if (const auto* kv = Only(r->responses(1))) {
      auto v = ParseRevision(kv->value(), FirstKey());
      if (!v.ok()) return v.status();
      *first = *v;
    }
    *etcd_rev = r->header().revision();
    return absl::OkStatus();
  }

  // Removes parts past head (a writer died between the transactions of a
  // large append). Fenced.
  absl::Status DropPastHead() ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu) {
    for (int tries = 0; tries < 3; ++tries) {
      int64_t head = 0, first = 0, rev = 0;
      if (auto s = ReadHeadFirst(&head, &first, &rev); !s.ok()) return s;
      pb::TxnRequest txn;
      *txn.add_compare() = Fenced();
      *txn.add_compare() = HeadIs(head);
      AddDelete(txn.mutable_success(), absl::StrCat(LogPrefix(), Pad(head + 1)),
                PrefixEnd(LogPrefix()));
      AddGet(txn.mutable_failure(), fence->key);
      auto r = client->Txn(txn);
      if (!r.ok()) return r.status();
      if (r->succeeded()) {
        dirty = false;
        return absl::OkStatus();
      }
      const pb::KeyValue* leader = Only(r->responses(0));
      if (!leader || leader->create_revision() != fence->create_revision) return NotLeader(leader);
      // head moved under us: another writer with our fence? Only a retried
      // append of ours can do that; read again.
    }
    return absl::AbortedError("the log's head kept moving while dropping unfinished parts");
  }
};

EtcdLogStore::EtcdLogStore(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
EtcdLogStore::~EtcdLogStore() = default;

const StoreOptions& EtcdLogStore::options() const { return impl_->opts; }
bool EtcdLogStore::read_only() const { return !impl_->fence.has_value(); }

namespace {
absl::Status CheckOptions(const StoreOptions& o) {
  if (o.prefix.empty() || o.prefix.back() != '/') {
    return absl::InvalidArgumentError(
        absl::StrCat("etcd key prefix '", o.prefix, "' must end in '/'"));
  }
  if (o.chunk_bytes < 1024) return absl::InvalidArgumentError("etcd chunk_bytes under 1 KiB");
  return absl::OkStatus();
}
}  // namespace

absl::StatusOr<std::unique_ptr<EtcdLogStore>> EtcdLogStore::Open(Client* client,
                                                                 StoreOptions options,
                                                                 Fence fence) {
  if (auto s = CheckOptions(options); !s.ok()) return s;
  if (fence.key.empty() || fence.create_revision <= 0) {
    return absl::InvalidArgumentError("etcd store: a writer needs a fence (the leader key it holds)");
  }
  auto impl = std::make_unique<Impl>();
  impl->client = client;
  impl->opts = std::move(options);
  impl->fence = std::move(fence);
  {
    absl::MutexLock l(&impl->write_mu);
    if (auto s = impl->DropPastHead(); !s.ok()) return s;
  }
  return std::unique_ptr<EtcdLogStore>(new EtcdLogStore(std::move(impl)));
}

absl::StatusOr<std::unique_ptr<EtcdLogStore>> EtcdLogStore::OpenReadOnly(Client* client,
                                                                         StoreOptions options) {
  if (auto s = CheckOptions(options); !s.ok()) return s;
  auto impl = std::make_unique<Impl>();
  impl->client = client;
  impl->opts = std::move(options);
  // Check that etcd answers now rather than at the first read.
  int64_t head = 0, first = 0, rev = 0;
  if (auto s = impl->ReadHeadFirst(&head, &first, &rev); !s.ok()) return s;
  return std::unique_ptr<EtcdLogStore>(new EtcdLogStore(std::move(impl)));
}

absl::Status EtcdLogStore::Append(absl::Span<const v1::Mutation> mutations) {
  if (mutations.empty()) return absl::OkStatus();
  if (auto s = impl_->Writable(); !s.ok()) return s;
  const int64_t prev = mutations.front().revision() - 1;
  for (size_t i = 0; i < mutations.size(); ++i) {
    if (mutations[i].revision() != prev + 1 + static_cast<int64_t>(i)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "append out of order: revision ", mutations[i].revision(), ", expected ", prev + 1 + i));
    }
  }
  if (prev < 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("append out of order: revision ", prev + 1, ", expected a positive revision"));
  }
  const int64_t last = mutations.back().revision();
  absl::MutexLock l(&impl_->write_mu);
  if (impl_->dirty) {
    if (auto s = impl_->DropPastHead(); !s.ok()) return s;
  }
  const std::string bytes = Encode(mutations);
  const size_t chunk = impl_->opts.chunk_bytes;
  const int parts = static_cast<int>(std::max<size_t>(1, (bytes.size() + chunk - 1) / chunk));
  auto part = [&](int i) { return bytes.substr(i * chunk, chunk); };

  // The parts before the last go past head, each in its own transaction.
  for (int i = 0; i + 1 < parts; ++i) {
    pb::TxnRequest txn;
    *txn.add_compare() = impl_->Fenced();
    *txn.add_compare() = impl_->HeadIs(prev);
    AddPut(txn.mutable_success(), impl_->LogKey(last, i), part(i));
    AddGet(txn.mutable_failure(), impl_->fence->key);
    AddGet(txn.mutable_failure(), impl_->HeadKey());
    impl_->dirty = true;
    auto r = impl_->client->Txn(txn);
    if (!r.ok()) return r.status();
    if (!r->succeeded()) {
      const pb::KeyValue* leader = Only(r->responses(0));
      if (!leader || leader->create_revision() != impl_->fence->create_revision) {
        return impl_->NotLeader(leader);
      }
      const pb::KeyValue* head = Only(r->responses(1));
      return absl::FailedPreconditionError(absl::StrCat(
          "append out of order: revision ", prev + 1, ", expected ",
          head ? ParseRevision(head->value(), impl_->HeadKey()).value_or(-1) + 1 : 1));
    }
  }
  // The last part moves head: the append becomes visible all at once.
  const std::string last_part = part(parts - 1);
  pb::TxnRequest txn;
  *txn.add_compare() = impl_->Fenced();
  *txn.add_compare() = impl_->HeadIs(prev);
  AddPut(txn.mutable_success(), impl_->LogKey(last, parts - 1), last_part);
  AddPut(txn.mutable_success(), impl_->HeadKey(), Pad(last));
  AddGet(txn.mutable_failure(), impl_->fence->key);
  AddGet(txn.mutable_failure(), impl_->HeadKey());
  AddGet(txn.mutable_failure(), impl_->LogKey(last, parts - 1));
  auto r = impl_->client->Txn(txn);
  if (!r.ok()) return r.status();
  if (r->succeeded()) {
    impl_->dirty = false;
    return absl::OkStatus();
  }
  const pb::KeyValue* leader = Only(r->responses(0));
  if (!leader || leader->create_revision() != impl_->fence->create_revision) {
    return impl_->NotLeader(leader);
  }
  int64_t head = 0;
  if (const pb::KeyValue* h = Only(r->responses(1))) {
    auto v = ParseRevision(h->value(), impl_->HeadKey());
    if (!v.ok()) return v.status();
    head = *v;
  }
  const pb::KeyValue* mine = Only(r->responses(2));
  if (head == last && mine != nullptr && mine->value() == last_part) {
    impl_->dirty = false;
    return absl::OkStatus();  // an earlier attempt of this transaction was applied
  }
  return absl::FailedPreconditionError(
      absl::StrCat("append out of order: revision ", prev + 1, ", expected ", head + 1));
}

absl::StatusOr<EtcdLogStore::Head> EtcdLogStore::ReadHead(absl::Time deadline) {
  Head h;
  int64_t first = 0;
  if (auto s = impl_->ReadHeadFirst(&h.revision, &first, &h.etcd_revision, deadline); !s.ok()) return s;
  return h;
}

absl::StatusOr<EtcdLogStore::Head> EtcdLogStore::WaitForAppend(const Head& head,
                                                               absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  absl::MutexLock l(&impl_->watch_mu);
  Impl::Follow& f = impl_->follow;
  if (f.latest.etcd_revision < head.etcd_revision) f.latest = head;
  while (true) {
    if (f.latest.revision != head.revision && f.latest.etcd_revision >= head.etcd_revision) return f.latest;
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) return head;
    if (f.watch == nullptr) {
      // One watch kept open from the newest head seen (see WatchStream).
      auto w = impl_->client->Watch(impl_->HeadKey(), "", f.latest.etcd_revision);
      if (!w.ok()) return w.status();
      f.watch = std::move(*w);
    }
    auto events = f.watch->Next(left);
    if (!events.ok()) {
      f.watch.reset();
      if (events.status().code() != absl::StatusCode::kOutOfRange &&
          events.status().code() != absl::StatusCode::kUnavailable) {
        return events.status();
      }
      // Compacted history, or this member lost the quorum: read head afresh
      // (through any member) and watch again from there.
      auto now = ReadHead();
      if (!now.ok()) return now.status();
      if (now->etcd_revision >= f.latest.etcd_revision) f.latest = *now;
      continue;
    }
    for (const pb::Event& e : *events) {
      if (e.type() != pb::Event::PUT || e.kv().mod_revision() <= f.latest.etcd_revision) continue;
      auto v = ParseRevision(e.kv().value(), impl_->HeadKey());
      if (!v.ok()) return v.status();
      f.latest = Head{*v, e.kv().mod_revision()};
    }
  }
}

absl::StatusOr<int64_t> EtcdLogStore::LastRevision() {
  auto h = ReadHead();
  if (!h.ok()) return h.status();
  return h->revision;
}

absl::StatusOr<int64_t> EtcdLogStore::FirstRevision() {
  int64_t head = 0, first = 0, rev = 0;
  if (auto s = impl_->ReadHeadFirst(&head, &first, &rev); !s.ok()) return s;
  return first;
}

absl::Status EtcdLogStore::ReadLog(int64_t from, int64_t to,
                                   const std::function<absl::Status(const v1::Mutation&)>& fn) {
  from = std::max<int64_t>(from, 1);
  if (from > to) return absl::OkStatus();
  int64_t head = 0, first = 0, at = 0;
  if (auto s = impl_->ReadHeadFirst(&head, &first, &at); !s.ok()) return s;
  if (from <= first) {
    return absl::OutOfRangeError(absl::StrCat("revision ", from,
                                              " was compacted; the log now starts after ", first));
  }
  to = std::min(to, head);
  if (from > to) return absl::OkStatus();

  const std::string log_prefix = impl_->LogPrefix();
  std::string next_key = absl::StrCat(log_prefix, Pad(from));
  const std::string end_key = absl::StrCat(log_prefix, Pad(head), "0");  // past head's parts
  int64_t expect = from;
  // Parts of the record being gathered (records may span pages).
  int64_t record_last = -1;
  std::string record;
  int record_parts = 0;

  auto flush = [&]() -> absl::Status {
    if (record_last < 0) return absl::OkStatus();
    std::vector<v1::Mutation> ms;
    std::string where = absl::StrCat(log_prefix, Pad(record_last));
    if (auto s = Decode(record, where, &ms); !s.ok()) return s;
    if (ms.empty() || ms.back().revision() != record_last) {
      return absl::DataLossError(absl::StrCat("etcd log record ", where, " does not end at ", record_last));
    }
    for (const auto& m : ms) {
      if (m.revision() < expect) continue;  // before `from`
      if (m.revision() != expect) {
        return absl::DataLossError(absl::StrCat("etcd log: revision ", expect, " is missing (found ",
                                                m.revision(), " in ", where, ")"));
      }
      if (m.revision() > to) return absl::OkStatus();
      if (auto s = fn(m); !s.ok()) return s;
      ++expect;
    }
    record_last = -1;
    record.clear();
    record_parts = 0;
    return absl::OkStatus();
  };

  while (expect <= to) {
    pb::RangeRequest req;
    req.set_key(next_key);
    req.set_range_end(end_key);
    req.set_limit(impl_->opts.read_batches);
    req.set_revision(at);
    auto r = impl_->client->Range(req);
    if (!r.ok()) return Overtaken(r.status());
    for (const pb::KeyValue& kv : r->kvs()) {
      // log/<20 digits>/<6 digits>
      absl::string_view rest = absl::string_view(kv.key()).substr(log_prefix.size());
      int64_t rec = 0;
      int part = 0;
      if (rest.size() != 27 || rest[20] != '/' || !absl::SimpleAtoi(rest.substr(0, 20), &rec) ||
          !absl::SimpleAtoi(rest.substr(21), &part)) {
        return absl::DataLossError(absl::StrCat("etcd log: unexpected key ", kv.key()));
      }
      if (rec != record_last) {
        if (auto s = flush(); !s.ok()) return s;
        if (expect > to) return absl::OkStatus();
        record_last = rec;
      }
      if (part != record_parts) {
        return absl::DataLossError(absl::StrCat("etcd log record ", log_prefix, Pad(rec),
                                                " lacks part ", record_parts));
      }
      ++record_parts;
      record += kv.value();
    }
    if (!r->more()) break;
    next_key = r->kvs(r->kvs_size() - 1).key() + '\0';
  }
  if (auto s = flush(); !s.ok()) return s;
  if (expect <= to) {
    return absl::DataLossError(
        absl::StrCat("etcd log: head is ", head, " but the log ends before revision ", expect));
  }
  return absl::OkStatus();
}

absl::Status EtcdLogStore::WriteSnapshot(const v1::CellSnapshot& snapshot) {
  if (auto s = impl_->Writable(); !s.ok()) return s;
  const int64_t rev = snapshot.revision();
  absl::MutexLock l(&impl_->write_mu);
  int64_t head = 0, first = 0, at = 0;
  if (auto s = impl_->ReadHeadFirst(&head, &first, &at); !s.ok()) return s;
  if (rev < first || rev > head || rev < 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "snapshot at revision ", rev, " outside the log [", first, ", ", head, "]"));
  }
  std::string gen = absl::StrFormat("%016x", std::random_device()() * 0x100000000ull ^
                                                 std::random_device()());
  const std::string bytes = snapshot.SerializeAsString();
  const size_t chunk = impl_->opts.chunk_bytes;
  const size_t n = std::max<size_t>(1, (bytes.size() + chunk - 1) / chunk);
  const std::string data = impl_->DataPrefix(rev, gen);
  auto check = [&](const absl::StatusOr<pb::TxnResponse>& r) -> absl::Status {
    if (!r.ok()) return r.status();
    if (!r->succeeded()) return impl_->NotLeader(Only(r->responses(0)));
    return absl::OkStatus();
  };
  for (size_t i = 0; i < n; ++i) {
    pb::TxnRequest txn;
    *txn.add_compare() = impl_->Fenced();
    AddPut(txn.mutable_success(), absl::StrCat(data, absl::StrFormat("%06d", i)),
           bytes.substr(i * chunk, chunk));
    AddGet(txn.mutable_failure(), impl_->fence->key);
    if (auto s = check(impl_->client->Txn(txn)); !s.ok()) return s;
  }
  pb::TxnRequest txn;
  *txn.add_compare() = impl_->Fenced();
  AddPut(txn.mutable_success(), impl_->MetaKey(rev), absl::StrCat(gen, " ", n, " ", bytes.size()),
         /*prev_kv=*/true);
  AddGet(txn.mutable_failure(), impl_->fence->key);
  auto r = impl_->client->Txn(txn);
  if (auto s = check(r); !s.ok()) return s;
  // A snapshot it replaced: drop its chunks.
  const auto& put = r->responses(0).response_put();
  if (put.has_prev_kv()) {
    std::vector<std::string> old = absl::StrSplit(put.prev_kv().value(), ' ');
    if (!old.empty() && old[0] != gen) {
      pb::TxnRequest del;
      *del.add_compare() = impl_->Fenced();
      const std::string old_prefix = impl_->DataPrefix(rev, old[0]);
      AddDelete(del.mutable_success(), old_prefix, PrefixEnd(old_prefix));
      AddGet(del.mutable_failure(), impl_->fence->key);
      if (auto s = check(impl_->client->Txn(del)); !s.ok()) return s;
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::optional<v1::CellSnapshot>> EtcdLogStore::ReadSnapshot(int64_t max_revision) {
  if (max_revision < 0) return std::optional<v1::CellSnapshot>();
  const std::string meta_prefix = impl_->K("snapmeta/");
  auto r = impl_->NewestSnapshotMeta(max_revision, /*keys_only=*/false);
  if (!r.ok()) return r.status();
  if (r->kvs().empty()) return std::optional<v1::CellSnapshot>();
  const pb::KeyValue& meta = r->kvs(0);
  int64_t rev = 0;
  if (!absl::SimpleAtoi(absl::string_view(meta.key()).substr(meta_prefix.size()), &rev)) {
    return absl::DataLossError(absl::StrCat("etcd: unexpected snapshot key ", meta.key()));
  }
  std::vector<std::string> f = absl::StrSplit(meta.value(), ' ');
  size_t n = 0, size = 0;
  if (f.size() != 3 || !absl::SimpleAtoi(f[1], &n) || !absl::SimpleAtoi(f[2], &size)) {
    return absl::DataLossError(absl::StrCat("etcd: snapshot at revision ", rev, " has a bad record '",
                                            meta.value().substr(0, 60), "'"));
  }
  const std::string data = impl_->DataPrefix(rev, f[0]);
  std::string bytes;
  size_t chunks = 0;
  std::string next = data;
  while (true) {
    pb::RangeRequest cr;
    cr.set_key(next);
    cr.set_range_end(PrefixEnd(data));
    cr.set_limit(impl_->opts.read_batches);
    cr.set_revision(r->header().revision());
    auto c = impl_->client->Range(cr);
    if (!c.ok()) return Overtaken(c.status());
    for (const pb::KeyValue& kv : c->kvs()) {
      bytes += kv.value();
      ++chunks;
    }
    if (!c->more() || c->kvs().empty()) break;
    next = c->kvs(c->kvs_size() - 1).key() + '\0';
  }
  v1::CellSnapshot snap;
  if (chunks != n || bytes.size() != size || !snap.ParseFromString(bytes) || snap.revision() != rev) {
    return absl::DataLossError(absl::StrCat("etcd: snapshot at revision ", rev, " is unreadable (",
                                            chunks, " of ", n, " chunks, ", bytes.size(), " of ",
                                            size, " bytes)"));
  }
  return std::optional<v1::CellSnapshot>(std::move(snap));
}

absl::Status EtcdLogStore::Compact(int64_t revision) {
  if (auto s = impl_->Writable(); !s.ok()) return s;
  if (revision < 0) return absl::OkStatus();
  absl::MutexLock l(&impl_->write_mu);
  const std::string meta_prefix = impl_->K("snapmeta/");
  auto r = impl_->NewestSnapshotMeta(revision, /*keys_only=*/true);
  if (!r.ok()) return r.status();
  if (r->kvs().empty()) return absl::OkStatus();
  int64_t keep = 0;
  if (!absl::SimpleAtoi(absl::string_view(r->kvs(0).key()).substr(meta_prefix.size()), &keep)) {
    return absl::DataLossError(absl::StrCat("etcd: unexpected snapshot key ", r->kvs(0).key()));
  }
  int64_t head = 0, first = 0, at = 0;
  if (auto s = impl_->ReadHeadFirst(&head, &first, &at); !s.ok()) return s;
  if (keep <= first) return absl::OkStatus();
  pb::TxnRequest txn;
  *txn.add_compare() = impl_->Fenced();
  AddDelete(txn.mutable_success(), meta_prefix, impl_->MetaKey(keep));
  const std::string data_prefix = impl_->K("snapdata/");
  AddDelete(txn.mutable_success(), data_prefix, absl::StrCat(data_prefix, Pad(keep)));
  AddDelete(txn.mutable_success(), impl_->LogPrefix(),
            absl::StrCat(impl_->LogPrefix(), Pad(keep), "0"));
  AddPut(txn.mutable_success(), impl_->FirstKey(), Pad(keep));
  AddGet(txn.mutable_failure(), impl_->fence->key);
  auto t = impl_->client->Txn(txn);
  if (!t.ok()) return t.status();
  if (!t->succeeded()) return impl_->NotLeader(Only(t->responses(0)));
  // etcd keeps every old version of every key until its own history is
  // compacted. Compact it to where this call's predecessor left it, so that
  // readers and watchers always have one snapshot interval of history.
  if (impl_->etcd_compact_next > 0) {
    absl::Status s = impl_->client->Compact(impl_->etcd_compact_next);
    if (!s.ok() && s.code() != absl::StatusCode::kOutOfRange) return s;  // OUT_OF_RANGE: done already
  }
  impl_->etcd_compact_next = t->header().revision();
  return absl::OkStatus();
}

}  // namespace herd::store::etcd
