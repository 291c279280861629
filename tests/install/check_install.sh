#!/usr/bin/env bash
# What a trainer gets from `cmake --install`: builds tests/install/user_program against the
# install with only find_package(chorus) and <chorus/chorus.h> (spdlog hidden from CMake, since
# the installed headers must not need it) and runs it on four cpu replicas. Also checks that the
# SDK (guide, CHANGELOG, templates) is installed under share/chorus/sdk.
#   check_install.sh <chorus build dir> <scratch dir> [compiler flags, e.g. -fsanitize=address]
#                    [C++ compiler: a sanitizer build's, whose runtime the program must link]
set -euo pipefail
[[ $# -ge 2 && $# -le 4 ]] ||
  { echo "usage: $0 <chorus build dir> <scratch dir> [compiler flags] [C++ compiler]" >&2; exit 2; }
build_dir=$(cd "$1" && pwd)
scratch=$2
flags=${3:-}
compiler_args=()
[[ -n ${4:-} ]] && compiler_args=(-DCMAKE_CXX_COMPILER="$4")
program_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")/user_program" && pwd)
fail() { echo "check_install: FAILED: $*" >&2; exit 1; }
rm -rf "$scratch/prefix" "$scratch/build" "$scratch/cache"
mkdir -p "$scratch"
cmake --install "$build_dir" --prefix "$scratch/prefix" >"$scratch/install.log" 2>&1 ||
  { cat "$scratch/install.log" >&2; fail "cmake --install"; }
grep -rq "spdlog" "$scratch/prefix/include/chorus" && fail "an installed header includes spdlog"
# The SDK beside the headers: the guide, the ABI's CHANGELOG, the templates (check_sdk_docs.sh
# checks what they say).
sdk=$scratch/prefix/share/chorus/sdk
for file in README.md CHANGELOG.md templates/test_out_of_tree.sh \
  templates/socket_transport/template_socket.cc include/chorus/plugin.h; do
  [[ -f $sdk/$file ]] || fail "the install has no $sdk/$file (the SDK: sdk/CMakeLists.txt)"
done
cmake -S "$program_dir" -B "$scratch/build" -DCMAKE_PREFIX_PATH="$scratch/prefix" \
  -DCMAKE_DISABLE_FIND_PACKAGE_spdlog=TRUE -DCMAKE_CXX_FLAGS="$flags" "${compiler_args[@]}" \
  -DCMAKE_EXE_LINKER_FLAGS="$flags" >"$scratch/configure.log" 2>&1 ||
  { cat "$scratch/configure.log" >&2; fail "configuring the user program"; }
cmake --build "$scratch/build" -j2 >"$scratch/build.log" 2>&1 ||
  { cat "$scratch/build.log" >&2; fail "building the user program with <chorus/chorus.h>"; }
output=$(env -u CHORUS_CROSS_DEVICE_OPS -u CHORUS_PLUGIN_PATH CHORUS_CPU_DEVICES=4 \
  "$scratch/build/chorus_user_program" 2>&1) || { echo "$output" >&2; fail "the program failed"; }
echo "$output"
grep -qF "4 replicas, cross-device ops reduction_to_one_device, sum right" <<<"$output" ||
  fail "unexpected output"
# The installed libchorus tries a new plugin file with the installed chorus-plugin-vet, beside it.
vet=$(find "$scratch/prefix" -path '*/chorus/chorus-plugin-vet' -type f | head -1)
[[ -x $vet ]] || fail "chorus-plugin-vet is not installed beside libchorus (<libdir>/chorus/)"
plugin=$(find "$build_dir" -name 'libchorus-shm.so' -path '*/plugins/*' | head -1)
if [[ -n $plugin ]]; then
  output=$(env -u CHORUS_PLUGIN_PATH CHORUS_CACHE_DIR="$scratch/cache" CHORUS_PLUGINS="$plugin" \
    CHORUS_LOG_LEVEL=debug CHORUS_CPU_DEVICES=4 "$scratch/build/chorus_user_program" 2>&1) ||
    { echo "$output" >&2; fail "the program failed with a plugin to try"; }
  grep -qF "plugin vetting: trying $plugin in a separate process" <<<"$output" ||
    { echo "$output" >&2; fail "the installed libchorus did not try the plugin file first"; }
fi
# The PyTorch backend, when it was built (CHORUS_TORCH_PYTHON names its interpreter): installed
# under the prefix, and importable from there with the installed libchorus.
if [[ -n ${CHORUS_TORCH_PYTHON:-} ]]; then
  module=$(find "$scratch/prefix" -path '*/chorus_torch/_C*.so' | head -1)
  [[ -n $module ]] || fail "chorus_torch was built but is not installed under the prefix"
  output=$(cd "$scratch" && env -u CHORUS_PLUGIN_PATH PYTHONPATH="$(dirname "$(dirname "$module")")" \
    "$CHORUS_TORCH_PYTHON" -c 'import chorus_torch, torch.distributed as d
print(chorus_torch.__file__, d.Backend.CHORUS)' 2>&1) ||
    { echo "$output" >&2; fail "the installed chorus_torch does not import"; }
  echo "$output"
  grep -qF "$scratch/prefix" <<<"$output" || { echo "$output" >&2; fail "imported another chorus_torch"; }
fi
echo "check_install: passed"
