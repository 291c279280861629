#!/usr/bin/env bash
# Builds sdk/template the way a vendor does, against an installed chorus, and runs the installed
# conformance kit on it; then builds it again declaring a higher score than the core's
# reduction_to_one_device, and checks that AUTO chooses it with no variable set.
#   test_out_of_tree.sh <chorus build dir> <scratch dir>
# Installs the build into <scratch>/prefix, configures the template with
# -DCMAKE_PREFIX_PATH=<scratch>/prefix into <scratch>/build (spdlog hidden from CMake: a plugin
# author's find_package(chorus) must not need it), builds it, checks that the plugin exports
# exactly chorus_plugin_get, and runs <scratch>/prefix/bin/chorus-conformance on it.
set -euo pipefail

if [[ $# -ne 2 ]]; then
  echo "usage: $0 <chorus build dir> <scratch dir>" >&2
  exit 2
fi
build_dir=$(cd "$1" && pwd)
scratch=$2
template_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
prefix=$scratch/prefix
template_build=$scratch/build

fail() {
  echo "test_out_of_tree: FAILED: $*" >&2
  exit 1
}
step() { echo "test_out_of_tree: $*"; }

scored_build=$scratch/build_scored
rm -rf "$prefix" "$template_build" "$scored_build"
mkdir -p "$scratch"

step "installing $build_dir into $prefix"
cmake --install "$build_dir" --prefix "$prefix" >"$scratch/install.log" 2>&1 ||
  { cat "$scratch/install.log" >&2; fail "cmake --install $build_dir (log above)"; }

step "configuring $template_dir against it"
cmake -S "$template_dir" -B "$template_build" -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_DISABLE_FIND_PACKAGE_spdlog=TRUE \
  >"$scratch/configure.log" 2>&1 ||
  { cat "$scratch/configure.log" >&2; fail "configuring the template (log above)"; }

step "building"
cmake --build "$template_build" -j2 >"$scratch/build.log" 2>&1 ||
  { cat "$scratch/build.log" >&2; fail "building the template (log above)"; }

plugin=$template_build/libchorus-template.so
[[ -f $plugin ]] || fail "the build made no $plugin"

step "checking exports of $plugin"
exports=$(nm -D --defined-only "$plugin" | awk '{print $NF}' | sort)
[[ $exports == "chorus_plugin_get" ]] ||
  fail "$plugin must export exactly chorus_plugin_get; it exports: $(echo $exports)"

conformance=$prefix/bin/chorus-conformance
[[ -x $conformance ]] || fail "the install has no $conformance"
step "running $conformance --plugin $plugin --require"
"$conformance" --plugin "$plugin" --require --gtest_brief=1 ||
  fail "chorus-conformance found problems in the template plugin (output above)"
# The same template declaring 90 for its operations (the reference scores 5): AUTO must take it
# for the cpu devices' cross-device ops, with no CHORUS_* variable set.
step "building it again with -DTEMPLATE_SCORE=90 into $scored_build"
cmake -S "$template_dir" -B "$scored_build" -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS=-DTEMPLATE_SCORE=90 \
  >"$scratch/configure_scored.log" 2>&1 ||
  { cat "$scratch/configure_scored.log" >&2; fail "configuring the scored template (log above)"; }
cmake --build "$scored_build" -j2 >"$scratch/build_scored.log" 2>&1 ||
  { cat "$scratch/build_scored.log" >&2; fail "building the scored template (log above)"; }
info=$(env -u CHORUS_CROSS_DEVICE_OPS -u CHORUS_PLUGINS -u CHORUS_COMMUNICATION \
  CHORUS_PLUGIN_PATH="$scored_build" CHORUS_LOG_LEVEL=off "$prefix/bin/chorus-info" 2>&1) ||
  { echo "$info" >&2; fail "chorus-info with the scored template failed"; }
expected="cross-device ops: template_reduce  (AUTO: template_reduce scores 90"
grep -qF -- "$expected" <<<"$info" ||
  { echo "$info" >&2; fail "AUTO did not choose the template declaring 90: no '$expected'"; }
step "AUTO chose the scored template: $(grep -F -- "$expected" <<<"$info" | sed 's/^ *//')"
step "passed"
