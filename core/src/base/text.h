// Small text helpers for messages.
#ifndef CHORUS_BASE_TEXT_H_
#define CHORUS_BASE_TEXT_H_

#include <string>
#include <vector>

namespace chorus {

// "a", "a and b", "a, b and c": names as a sentence lists them.
inline std::string ListOf(const std::vector<std::string>& names) {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) {
    out += (i == 0 ? "" : i + 1 == names.size() ? " and " : ", ") + names[i];
  }
  return out;
}

}  // namespace chorus

#endif  // CHORUS_BASE_TEXT_H_
