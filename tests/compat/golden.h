// The formats a newer Herd must still read (docs/upgrades.md): what
// tests/compat/make_golden writes into tests/compat/golden/vN/ and
// compat_test reads back with the code of today.
#pragma once

#include <string>
#include <vector>

#include <google/protobuf/message.h>

namespace herd::compat {

// The files of one generation of fixtures, relative to its directory.
inline constexpr const char* kCellDb = "cell.db";                 // the SQLite store (snapshot + log)
inline constexpr const char* kMutations = "mutations.binpb";      // the log, varint-delimited Mutations
inline constexpr const char* kCheckpoint = "cell.checkpoint";     // herd checkpoint export's format
inline constexpr const char* kSnapshot = "expected_snapshot.txtpb";  // the state all of them describe
inline constexpr const char* kPollRequest = "poll_request.binpb";    // master -> agent
inline constexpr const char* kPollResponse = "poll_response.binpb";  // agent -> master
inline constexpr const char* kRunDir = "run";                     // an agent's run directory

// Field paths of `m` (recursively) that this code does not know: a field
// removed or renumbered since the fixture was written.
std::vector<std::string> UnknownFields(const google::protobuf::Message& m);

}  // namespace herd::compat
