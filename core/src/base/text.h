// Small text helpers for messages.
#ifndef CHORUS_BASE_TEXT_H_
#define CHORUS_BASE_TEXT_H_

#include <algorithm>
#include <cctype>
#include <string>
#include <string_view>
#include <vector>

namespace chorus {

// "a", "a and b", "a, b and c": names as a sentence lists them ("a, b or c" with last " or ").
inline std::string ListOf(const std::vector<std::string>& names, const char* last = " and ") {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) {
    out += (i == 0 ? "" : i + 1 == names.size() ? last : ", ") + names[i];
  }
  return out;
}

// The Levenshtein distance of a and b, ignoring case: the insertions, deletions and
// substitutions that make one the other.
inline size_t EditDistance(std::string_view a, std::string_view b) {
  const auto same = [](char x, char y) {
    return std::tolower(static_cast<unsigned char>(x)) ==
           std::tolower(static_cast<unsigned char>(y));
  };
  std::vector<size_t> row(b.size() + 1);  // distances of a's prefix to every prefix of b
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({above + 1, row[j - 1] + 1, diagonal + (same(a[i - 1], b[j - 1]) ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// The name among `names` that `name` most likely misspells, for "did you mean X?"; "" when none
// is close. Close: at most 2 edits away (fewer than `name` has characters, so that "x" is close to
// nothing), else one a prefix or a part of the other (3 characters at least). The fewest edits
// win, then the first in `names`.
inline std::string ClosestName(std::string_view name, const std::vector<std::string>& names) {
  const auto lower = [](std::string_view text) {
    std::string out(text);
    for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return out;
  };
  const std::string wanted = lower(name);
  std::string best;
  size_t best_distance = 3;
  for (const std::string& candidate : names) {
    const size_t distance = EditDistance(name, candidate);
    if (distance < best_distance && distance < name.size()) {
      best = candidate;
      best_distance = distance;
    }
  }
  if (!best.empty() || wanted.size() < 3) return best;
  for (const std::string& candidate : names) {
    const std::string other = lower(candidate);
    if (other.size() >= 3 &&
        (other.find(wanted) != std::string::npos || wanted.find(other) != std::string::npos)) {
      return candidate;
    }
  }
  return "";
}

}  // namespace chorus

#endif  // CHORUS_BASE_TEXT_H_
