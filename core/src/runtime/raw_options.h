// Options as the ABI passes them: chorus_option views of the strings in an Options list.
#ifndef CHORUS_CORE_RUNTIME_RAW_OPTIONS_H_
#define CHORUS_CORE_RUNTIME_RAW_OPTIONS_H_

#include <chorus/plugin.h>
#include <chorus/runtime/device.h>

#include <vector>

namespace chorus::internal {

// Each element points into `options`, which must outlive the result and stay unchanged.
inline std::vector<chorus_option> RawOptions(const Options& options) {
  std::vector<chorus_option> raw;
  raw.reserve(options.size());
  for (const auto& [key, value] : options) raw.push_back({key.c_str(), value.c_str()});
  return raw;
}

}  // namespace chorus::internal

#endif  // CHORUS_CORE_RUNTIME_RAW_OPTIONS_H_
