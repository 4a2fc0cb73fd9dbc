// Helpers shared by the fuzz targets that drive a master (master_api,
// frameworks): messages decoded raw from the input, a trace of each call
// (HERD_FUZZ_TRACE=1), and the final check that the store recovers the
// state the master holds in memory.
#pragma once

#include <google/protobuf/util/message_differencer.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "fuzz_util.h"
#include "herd/v1/objects.pb.h"
#include "master/core/admission/authorizer.h"
#include "master/core/recovery.h"
#include "store/log_store.h"

namespace herd::fuzz {

inline constexpr size_t kMaxMessage = 16 << 10;

// A message as a hostile client could send it: up to 16 KiB of the input,
// parsed (empty if it does not parse).
template <typename M>
M Decode(Bytes& in) {
  M m;
  absl::string_view raw = in.Take(std::min<size_t>(in.U16(), kMaxMessage));
  if (!m.ParseFromArray(raw.data(), static_cast<int>(raw.size()))) m.Clear();
  return m;
}

// HERD_FUZZ_TRACE=1: print each call and its answer (to read a regression).
inline bool Tracing() {
  static const bool on = std::getenv("HERD_FUZZ_TRACE") != nullptr;
  return on;
}
template <typename T>
void Note(int op, const master::Principal& who, const absl::StatusOr<T>& r) {
  if (Tracing()) std::fprintf(stderr, "op %d by %s: %s\n", op, who.name.c_str(), r.status().ToString().c_str());
}

// What the master held in memory (`live`, taken before it stopped) is what
// the store recovers: everything acknowledged is durable and replays the same.
inline void CheckRecovered(store::LogStore& store, const v1::CellSnapshot& live) {
  absl::StatusOr<cell::CellState> recovered = master::Recover(store);
  HERD_FUZZ_ASSERT(recovered.ok(), recovered.status().ToString());
  v1::CellSnapshot again = recovered->ToSnapshot();
  std::string diff;
  google::protobuf::util::MessageDifferencer d;
  d.ReportDifferencesToString(&diff);
  HERD_FUZZ_ASSERT(d.Compare(live, again), absl::StrCat("recovery differs from memory:\n", diff));
}

}  // namespace herd::fuzz
