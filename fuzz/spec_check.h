// What the spec fuzz targets check of spec::ParseText's answer.
#pragma once

#include <string>
#include "absl/strings/string_view.h"

#include "absl/strings/str_cat.h"
#include "fuzz_util.h"
#include "spec/spec.h"
#include "spec/validate.h"

namespace herd::fuzz {

// Spec files past this are refused before parsing (spec/limits.h allows
// 4 MiB); fuzzing small inputs finds the same bugs faster.
inline constexpr size_t kMaxSpecInput = 64 << 10;

inline void CheckSpecs(const absl::StatusOr<std::vector<v1::JobSpec>>& specs, absl::string_view source) {
  if (!specs.ok()) {
    HERD_FUZZ_ASSERT(!specs.status().message().empty(), "an error without a message");
    return;
  }
  HERD_FUZZ_ASSERT(!specs->empty(), "no error and no jobs");
  for (const v1::JobSpec& spec : *specs) {
    // "Every returned spec has passed Validate() and has source set."
    absl::Status st = spec::Validate(spec);
    HERD_FUZZ_ASSERT(st.ok(), absl::StrCat(st.ToString(), "\n", spec.DebugString()));
    HERD_FUZZ_ASSERT(spec.source() == source, spec.source());
    HERD_FUZZ_ASSERT(!spec.user().empty(), spec.DebugString());
  }
}

inline void CheckParse(absl::string_view text, absl::string_view source, spec::Format format) {
  if (text.size() > kMaxSpecInput) return;
  spec::ParseOptions opts;
  opts.default_user = "fuzz";
  CheckSpecs(spec::ParseText(text, source, format, opts), source);
}

}  // namespace herd::fuzz
