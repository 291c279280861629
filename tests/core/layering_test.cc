// The core's layering (core/CMakeLists.txt): reads every file under core/src and core/include,
// parses its #includes and fails, naming the file, the line and the include, on any that breaks
// the rules below. This list of layers and these rules are the ones the comment at the top of
// core/CMakeLists.txt states; a new layer is added to both.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <filesystem>
#include <fstream>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace {

namespace fs = std::filesystem;

// A layer uses only the layers before it in this list (and its own).
constexpr std::array<std::string_view, 8> kLayers = {"base",       "builtin",          "rendezvous",
                                                     "runtime",    "cluster_resolver", "collective",
                                                     "distribute", "training"};

constexpr std::string_view kUmbrella = "chorus.h";  // core/include/chorus/chorus.h: every layer

// The position of `name` in kLayers; nullopt when it is not a layer.
std::optional<size_t> LayerIndex(std::string_view name) {
  const auto it = std::find(kLayers.begin(), kLayers.end(), name);
  if (it == kLayers.end()) return std::nullopt;
  return static_cast<size_t>(it - kLayers.begin());
}

// Where a file of the core sits.
struct Place {
  size_t layer = 0;  // kLayers.size() for the umbrella header, above every layer
  bool public_header = false;
};

// What an #include names, when it is a header of the core.
struct Target {
  size_t layer = 0;  // kLayers.size() for the umbrella header
  bool private_header = false;
  std::string name;  // the header's file name
};

std::string FirstComponent(std::string_view path, std::string_view* rest) {
  const size_t slash = path.find('/');
  if (slash == std::string_view::npos) {
    *rest = {};
    return std::string(path);
  }
  *rest = path.substr(slash + 1);
  return std::string(path.substr(0, slash));
}

// The include's target; nullopt for a header that is not the core's (the standard library, a
// third party's, the SDK's <chorus/plugin.h> and <chorus/*.hpp>). *error is set for an include
// the rules cannot place: a private header outside any layer, a public one in no layer.
std::optional<Target> TargetOf(char delimiter, std::string_view path, std::string* error) {
  std::string_view rest;
  const std::string first = FirstComponent(path, &rest);
  if (delimiter == '"') {
    const auto layer = LayerIndex(first);
    if (!layer || rest.empty()) {
      *error = "a private header is included as \"<layer>/name.h\", <layer> one of the list";
      return std::nullopt;
    }
    return Target{*layer, true, std::string(fs::path(std::string(rest)).filename())};
  }
  if (first != "chorus" || rest.empty()) return std::nullopt;
  std::string_view file;
  const std::string second = FirstComponent(rest, &file);
  if (file.empty()) {
    if (second == kUmbrella) return Target{kLayers.size(), false, second};
    return std::nullopt;  // the SDK's
  }
  const auto layer = LayerIndex(second);
  if (!layer) {
    *error = "<chorus/" + second + "/...> names no layer of the list";
    return std::nullopt;
  }
  return Target{*layer, false, std::string(fs::path(std::string(file)).filename())};
}

// Why `include` may not be included from `place`; empty when it may.
std::string Breach(const Place& place, const Target& include) {
  const auto layer_name = [](size_t i) {
    return i < kLayers.size() ? std::string(kLayers[i]) : std::string("the umbrella header");
  };
  if (include.layer > place.layer) {
    return "includes " + layer_name(include.layer) + ", which comes after " +
           layer_name(place.layer) + " in the list of layers";
  }
  if (place.public_header && include.private_header) {
    return "a public header includes a private one";
  }
  if (place.layer == *LayerIndex("builtin") && include.layer != place.layer &&
      include.layer != *LayerIndex("base")) {
    return "builtin includes, of the core, only base (and the SDK): its tables reach anything "
           "else through the host services of the C ABI";
  }
  if (include.layer == *LayerIndex("builtin") && place.layer != include.layer &&
      place.layer != *LayerIndex("runtime")) {
    return "builtin's tables are the runtime's to load (the registry, the algorithm@transport "
           "engine): other layers reach them through the registry";
  }
  const std::string_view name = include.name;
  const std::string_view suffix = "_internal.h";
  if (name.size() >= suffix.size() && name.substr(name.size() - suffix.size()) == suffix &&
      include.layer != place.layer) {
    return "*_internal.h is included only from its own layer (" + layer_name(include.layer) + ")";
  }
  return "";
}

struct Finding {
  std::string where;  // file:line
  std::string include;
  std::string why;
};

// Every breach in the #includes of `text`, the file at `relative` (core/src/... or
// core/include/...), whose place is `place`.
std::vector<Finding> CheckText(const std::string& relative, const Place& place,
                               std::istream& text) {
  static const std::regex kInclude(R"(^\s*#\s*include\s*([<"])([^>"]+)[>"])");
  std::vector<Finding> findings;
  std::string line;
  for (int number = 1; std::getline(text, line); ++number) {
    std::smatch match;
    if (!std::regex_search(line, match, kInclude)) continue;
    const char delimiter = match[1].str()[0];
    const std::string path = match[2].str();
    const std::string shown = delimiter == '"' ? "\"" + path + "\"" : "<" + path + ">";
    std::string error;
    const auto target = TargetOf(delimiter, path, &error);
    if (!error.empty()) {
      findings.push_back({relative + ":" + std::to_string(number), shown, error});
      continue;
    }
    if (!target) continue;
    const std::string why = Breach(place, *target);
    if (!why.empty()) findings.push_back({relative + ":" + std::to_string(number), shown, why});
  }
  return findings;
}

std::string Describe(const std::vector<Finding>& findings) {
  std::string out;
  for (const auto& f : findings) out += f.where + ": #include " + f.include + ": " + f.why + "\n";
  return out;
}

const fs::path kSource = CHORUS_SOURCE_DIR;

// Every file of the core with its place; a folder or file outside the layers is a finding.
std::vector<std::pair<fs::path, Place>> CoreFiles(std::vector<Finding>* findings) {
  std::vector<std::pair<fs::path, Place>> files;
  const auto walk = [&](const fs::path& root, bool public_headers) {
    for (const auto& entry : fs::directory_iterator(root)) {
      const std::string name = entry.path().filename().string();
      const std::string relative = fs::relative(entry.path(), kSource).string();
      if (!entry.is_directory()) {
        if (public_headers && name == kUmbrella) {
          files.push_back({entry.path(), {kLayers.size(), true}});
        } else {
          findings->push_back({relative, "", "a file outside every layer's folder"});
        }
        continue;
      }
      const auto layer = LayerIndex(name);
      if (!layer) {
        findings->push_back({relative, "",
                             "a folder that is no layer: add the layer to the list (this test "
                             "and core/CMakeLists.txt)"});
        continue;
      }
      for (const auto& file : fs::recursive_directory_iterator(entry.path())) {
        if (file.is_regular_file()) files.push_back({file.path(), {*layer, public_headers}});
      }
    }
  };
  walk(kSource / "core/src", false);
  walk(kSource / "core/include/chorus", true);
  std::sort(files.begin(), files.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  return files;
}

TEST(Layering, EveryIncludeOfTheCoreKeepsTheRules) {
  std::vector<Finding> findings;
  const auto files = CoreFiles(&findings);
  ASSERT_GT(files.size(), 100u) << "found too few files under " << kSource;
  for (const auto& [path, place] : files) {
    std::ifstream text(path);
    ASSERT_TRUE(text) << "cannot read " << path;
    const auto found = CheckText(fs::relative(path, kSource).string(), place, text);
    findings.insert(findings.end(), found.begin(), found.end());
  }
  EXPECT_TRUE(findings.empty()) << Describe(findings);
}

TEST(Layering, EveryLayerHasItsFolder) {
  for (const auto layer : kLayers) {
    EXPECT_TRUE(fs::is_directory(kSource / "core/src" / std::string(layer)))
        << "layer " << layer << " has no folder core/src/" << layer;
  }
}

// The checker itself catches each kind of breach.
std::vector<Finding> Check(const std::string& layer, bool public_header, const std::string& text) {
  std::istringstream stream(text);
  return CheckText("x", {LayerIndex(layer).value_or(kLayers.size()), public_header}, stream);
}

TEST(Layering, TheCheckerFindsEachBreach) {
  EXPECT_TRUE(Check("collective", false,
                    "#include <vector>\n#include <chorus/plugin.h>\n#include \"base/logging.h\"\n"
                    "#include <chorus/runtime/registry.h>\n#include \"collective/x.h\"\n")
                  .empty());
  const auto later =
      Check("runtime", false, "\n  #  include \"rendezvous/x.h\"\n#include \"collective/y.h\"\n");
  ASSERT_EQ(later.size(), 1u) << Describe(later);
  EXPECT_EQ(later[0].where, "x:3");
  EXPECT_EQ(later[0].include, "\"collective/y.h\"");
  EXPECT_EQ(Check("base", false, "#include <chorus/runtime/tensor.h>\n").size(), 1u);
  EXPECT_EQ(Check("base", false, "#include <chorus/chorus.h>\n").size(), 1u);
  EXPECT_EQ(Check("training", true, "#include \"training/x.h\"\n").size(), 1u);
  EXPECT_TRUE(Check("training", true, "#include <chorus/base/error.h>\n").empty());
  EXPECT_EQ(Check("builtin", false, "#include \"runtime/x.h\"\n").size(), 1u);
  EXPECT_TRUE(Check("builtin", false, "#include \"base/x.h\"\n#include \"builtin/y.h\"\n").empty());
  EXPECT_TRUE(Check("runtime", false, "#include \"builtin/x.h\"\n").empty());
  EXPECT_EQ(Check("collective", false, "#include \"builtin/x.h\"\n").size(), 1u);
  EXPECT_EQ(Check("training", false, "#include \"rendezvous/kv_store_internal.h\"\n").size(), 1u);
  EXPECT_TRUE(Check("rendezvous", false, "#include \"rendezvous/kv_store_internal.h\"\n").empty());
  EXPECT_EQ(Check("base", false, "#include \"local.h\"\n").size(), 1u);
  EXPECT_EQ(Check("base", false, "#include <chorus/nolayer/x.h>\n").size(), 1u);
}

}  // namespace
