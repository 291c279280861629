// Loader options that find only the fake plugins this folder builds (FAKE_PLUGIN_DIR), of which
// `filter` (CHORUS_PLUGINS's syntax) keeps some.
#pragma once

#include <chorus/runtime/loader.h>

#include <string>

namespace chorus::test {

inline LoaderOptions OnlyFakePlugins(const std::string& filter) {
  LoaderOptions options;
  options.search_dirs = {FAKE_PLUGIN_DIR};
  options.filter = filter;
  return options;
}

}  // namespace chorus::test
