#include "spec/suggest.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace herd::spec {

int EditDistance(absl::string_view a, absl::string_view b) {
  const size_t n = a.size(), m = b.size();
  // Three rows suffice for the optimal-string-alignment distance.
  std::vector<int> prev2(m + 1), prev(m + 1), cur(m + 1);
  for (size_t j = 0; j <= m; ++j) prev[j] = static_cast<int>(j);
  for (size_t i = 1; i <= n; ++i) {
    cur[0] = static_cast<int>(i);
    for (size_t j = 1; j <= m; ++j) {
      int cost = a[i - 1] == b[j - 1] ? 0 : 1;
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        cur[j] = std::min(cur[j], prev2[j - 2] + 1);
      }
    }
    std::swap(prev2, prev);
    std::swap(prev, cur);
  }
  return prev[m];
}

std::string ClosestMatch(absl::string_view word, absl::Span<const absl::string_view> candidates) {
  std::string lower = absl::AsciiStrToLower(word);
  int best = 3;
  absl::string_view best_word;
  for (absl::string_view c : candidates) {
    int d = EditDistance(lower, c);
    if (d < best && c != word) {
      best = d;
      best_word = c;
    }
  }
  return std::string(best_word);
}

std::string DidYouMean(absl::string_view word, absl::Span<const absl::string_view> candidates) {
  std::string m = ClosestMatch(word, candidates);
  if (m.empty()) return "";
  return absl::StrCat(" (did you mean '", m, "'?)");
}

}  // namespace herd::spec
