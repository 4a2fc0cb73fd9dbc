// "Did you mean ...?" hints for misspelt field names and enum values.
#pragma once

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace herd::spec {

// Levenshtein distance with adjacent transpositions counted as one edit.
int EditDistance(absl::string_view a, absl::string_view b);

// The candidate closest to `word` if it is within 2 edits (and not equal),
// else empty.
std::string ClosestMatch(absl::string_view word, absl::Span<const absl::string_view> candidates);

// " (did you mean 'command'?)" or "" when nothing is close.
std::string DidYouMean(absl::string_view word, absl::Span<const absl::string_view> candidates);

}  // namespace herd::spec
