// Names joined for messages and comment lines: "a, b, c".
#ifndef CHORUS_TOOLS_BENCH_LIST_TEXT_H_
#define CHORUS_TOOLS_BENCH_LIST_TEXT_H_

#include <string>
#include <vector>

namespace chorus::bench {

inline std::string JoinNames(const std::vector<std::string>& names) {
  std::string joined;
  for (const auto& name : names) joined += (joined.empty() ? "" : ", ") + name;
  return joined;
}

}  // namespace chorus::bench

#endif  // CHORUS_TOOLS_BENCH_LIST_TEXT_H_
