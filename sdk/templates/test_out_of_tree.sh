#!/usr/bin/env bash
# Builds every SDK template (the folders beside this script: cross_device_ops, collective,
# algorithm, transport, socket_transport) the way a vendor does, against an installed chorus, and
# runs the installed conformance kit on each: ranks as threads, then 2, 3 and 4 ranks as processes
# (the kit starts them through the installed chorus-launch).
#   test_out_of_tree.sh <chorus install prefix | chorus build dir> <scratch dir>
# It runs from the source tree (templates/ of the SDK) and from an install
# (<prefix>/share/chorus/sdk/templates/), on an install prefix, or on a build folder that it
# installs first into <scratch>/prefix. For each template: configures it with
# -DCMAKE_PREFIX_PATH=<prefix> into <scratch>/<kind> (spdlog hidden from CMake: a plugin
# author's find_package(chorus) must not need it; warnings are errors), builds it, checks that the
# plugin exports exactly chorus_plugin_get, and runs <prefix>/bin/chorus-conformance --require on
# it. Also runs the core's ring algorithm over each transport template, and builds the
# cross-device ops template again declaring a higher score than the core's
# reduction_to_one_device (-DTEMPLATE_SCORE=90) to check that AUTO chooses it with no variable set.
# The kit runs its short sweep (CHORUS_CONFORMANCE_SWEEP=short, unless set): this test checks that
# a vendor's build from the templates works; the kit's full sweep runs on the in-tree plugins.
set -euo pipefail
export CHORUS_CONFORMANCE_SWEEP=${CHORUS_CONFORMANCE_SWEEP:-short}

if [[ $# -ne 2 ]]; then
  echo "usage: $0 <chorus install prefix | chorus build dir> <scratch dir>" >&2
  exit 2
fi
chorus_dir=$(cd "$1" && pwd)
mkdir -p "$2"
scratch=$(cd "$2" && pwd)
templates_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
if [[ -f $chorus_dir/CMakeCache.txt ]]; then
  build_dir=$chorus_dir  # a build folder: installed into the scratch folder first
  prefix=$scratch/prefix
else
  build_dir=""
  prefix=$chorus_dir
fi
conformance=$prefix/bin/chorus-conformance

# <folder>:<plugin name> of every template.
templates=(cross_device_ops:template collective:template_collective algorithm:template_algorithm
           transport:template_transport socket_transport:template_socket)

current="install"  # the template (or step) under way, for the failure message
fail() {
  echo "test_out_of_tree: FAILED: $current: $*" >&2
  exit 1
}
step() { echo "test_out_of_tree: $current: $*"; }
# run_logged <log> <what> <command>...: the command's output goes to <log>, printed on a failure.
run_logged() {
  local log=$1 what=$2
  shift 2
  "$@" >"$log" 2>&1 || { cat "$log" >&2; fail "$what failed (its log above, in $log)"; }
}
# The kit's summary lines of <log>.
summary() { grep -h "tests from .* ran\|PASSED" "$1" | tail -2 | sed "s/^/test_out_of_tree: $current:   /"; }
configure() {  # configure <source> <build> <log> [cmake arguments]...
  local source=$1 build=$2 log=$3
  shift 3
  run_logged "$log" "configuring $source" cmake -S "$source" -B "$build" \
    -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_DISABLE_FIND_PACKAGE_spdlog=TRUE -DCMAKE_COMPILE_WARNING_AS_ERROR=ON "$@"
}

rm -rf "$scratch/build_scored"
for entry in "${templates[@]}"; do rm -rf "${scratch:?}/${entry%%:*}"; done

if [[ -n $build_dir ]]; then
  rm -rf "$prefix"
  step "installing $build_dir into $prefix"
  run_logged "$scratch/install.log" "cmake --install $build_dir" \
    cmake --install "$build_dir" --prefix "$prefix"
fi
[[ -x $conformance ]] || fail "the install has no $conformance"
[[ -x $prefix/bin/chorus-launch ]] || fail "the install has no $prefix/bin/chorus-launch"

for entry in "${templates[@]}"; do
  kind=${entry%%:*}
  name=${entry#*:}
  current="template $kind"
  started=$SECONDS
  source_dir=$templates_dir/$kind
  build=$scratch/$kind
  step "configuring $source_dir against $prefix"
  configure "$source_dir" "$build" "$scratch/$kind.configure.log"
  step "building"
  run_logged "$scratch/$kind.build.log" "building" cmake --build "$build" -j2
  plugin=$build/libchorus-$name.so
  [[ -f $plugin ]] || fail "the build made no $plugin"

  step "checking the exports of $plugin"
  exports=$(nm -D --defined-only "$plugin" | awk '{print $NF}' | sort)
  [[ $exports == "chorus_plugin_get" ]] ||
    fail "$plugin must export exactly chorus_plugin_get; it exports: $(echo $exports)"

  step "running $conformance --plugin $plugin --require"
  run_logged "$scratch/$kind.conformance.log" "chorus-conformance --plugin $plugin --require" \
    "$conformance" --plugin "$plugin" --require --gtest_brief=1
  summary "$scratch/$kind.conformance.log"

  if [[ $kind == *transport ]]; then
    # The core's ring algorithm over the template transport, as threads and as processes.
    step "running the core's algorithms over it: $conformance --builtin --transport $plugin"
    run_logged "$scratch/$kind.ring.log" "chorus-conformance --builtin --transport $plugin" \
      "$conformance" --builtin --require --transport "$plugin" \
      --gtest_filter='Algorithm.*:RanksAsProcesses.*' --gtest_brief=1
    summary "$scratch/$kind.ring.log"
  fi
  step "passed in $((SECONDS - started)) s"
done

# The cross-device ops template declaring 90 for its operations (the reference scores 5): AUTO
# must take it for the cpu devices' cross-device ops, with no CHORUS_* variable set.
current="template cross_device_ops, scored 90"
scored_build=$scratch/build_scored
step "building it with -DTEMPLATE_SCORE=90 into $scored_build"
configure "$templates_dir/cross_device_ops" "$scored_build" "$scratch/scored.configure.log" \
  -DCMAKE_CXX_FLAGS=-DTEMPLATE_SCORE=90
run_logged "$scratch/scored.build.log" "building" cmake --build "$scored_build" -j2
info=$(env -u CHORUS_CROSS_DEVICE_OPS -u CHORUS_PLUGINS -u CHORUS_COMMUNICATION \
  CHORUS_PLUGIN_PATH="$scored_build" CHORUS_LOG_LEVEL=off "$prefix/bin/chorus-info" 2>&1) ||
  { echo "$info" >&2; fail "chorus-info with the scored template failed (its output above)"; }
expected="cross-device ops: template_reduce  (AUTO: template_reduce scores 90"
grep -qF -- "$expected" <<<"$info" ||
  { echo "$info" >&2; fail "AUTO did not choose the template declaring 90: no '$expected'"; }
step "AUTO chose it: $(grep -F -- "$expected" <<<"$info" | sed 's/^ *//')"
current="all templates"
step "passed"
