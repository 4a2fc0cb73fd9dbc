// Tasks' names (docs/design.md §1 "BNS name", docs/naming.md): every task of a job
// is /CELL/USER/JOB/INDEX, in DNS INDEX.JOB.USER.CELL.DOMAIN, and the name
// carries where the task is -- its machine's address, its named ports, its
// health and state. All of it is read from the cell state, so any replica
// answers the same at the same revision and nothing is lost on failover.
// Pure: Resolve and WatchNames (api/names.h) and the DNS responder
// (master/server/dns_server.h) call these with the state locked.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "cell/cell_state.h"
#include "herd/v1/api.pb.h"
#include "master/core/naming/dns_wire.h"

namespace herd::master {

inline constexpr size_t kMaxNameLength = 253;  // a name asked of Resolve or WatchNames
inline constexpr int kMaxNameRecords = 10'000;  // records in one answer (a job's tasks)
// Records in one DNS answer section: more would not fit in a TCP message
// (65,535 bytes) anyway, so a big job's answer stops here instead of being
// built whole (under the state's read lock) and then cut.
inline constexpr size_t kMaxDnsAnswers = 1'000;
inline constexpr uint32_t kDnsTtl = 5;         // seconds: tasks move, so resolvers must ask again soon

// What a name refers to: one task of a job, or all of them.
struct NameTarget {
  const cell::Job* job = nullptr;
  int32_t index = -1;  // -1: the whole job
};

// "/CELL/USER/JOB[/INDEX]", "USER/JOB[/INDEX]" or "[INDEX.]JOB.USER.CELL[.DOMAIN]".
// INVALID_ARGUMENT if it is none of these, NOT_FOUND if no such job or task
// (or another cell's).
absl::StatusOr<NameTarget> FindName(const cell::CellState& s, absl::string_view name, absl::string_view domain);

// "/local/alice/hello/0" and "0.hello.alice.local.herd" for task 0 of
// alice/hello; the job's DNS name is "hello.alice.local.herd".
std::string TaskPath(absl::string_view cell, absl::string_view job_id, int32_t index);
std::string JobDnsName(absl::string_view cell, absl::string_view job_id, absl::string_view domain);
// The host of "HOST:PORT" or "[V6]:PORT" ("" if there is none).
std::string HostOf(absl::string_view address);

v1::NameRecord NameRecordOf(const cell::CellState& s, const cell::Task& task, absl::string_view domain);
// The target's records (by index), at most kMaxNameRecords; true if there
// were more.
bool NameRecords(const cell::CellState& s, const NameTarget& target, absl::string_view domain,
                 google::protobuf::RepeatedPtrField<v1::NameRecord>* out);
// Whether a watcher would see a difference: state, machine, address,
// ports, health or readiness.
bool SameNameRecord(const v1::NameRecord& a, const v1::NameRecord& b);

// The DNS answer to `q` from the state (REFUSED outside `domain`): A or
// AAAA for a task (while RUNNING) and for a job (its ready tasks), SRV for
// _PORT._tcp.JOB... (ready tasks with that named port, their addresses as
// additional records), SOA at the apex; NXDOMAIN for unknown names.
// `revision` is the SOA serial.
dns::Response AnswerDns(const cell::CellState& s, const dns::Question& q, absl::string_view domain,
                        int64_t revision);

}  // namespace herd::master
