#!/usr/bin/env bash
# Configures and builds one CMake preset: build-preset.sh <preset> [more cmake --build args].
# A build folder left by another generator (chorus used Makefiles before 1.1) is removed first:
# CMake refuses to switch a folder's generator, and everything in it is rebuilt either way.
set -euo pipefail
cd "$(dirname "$0")/.."
preset=$1
shift
build_dir=build/$preset
cache=$build_dir/CMakeCache.txt
if [[ -f $cache ]] && ! grep -qx "CMAKE_GENERATOR:INTERNAL=Ninja" "$cache"; then
  echo "build-preset: $build_dir was made by another generator; removing it for Ninja"
  rm -rf "$build_dir"
fi
cmake --preset "$preset"
cmake --build --preset "$preset" -j "$(nproc)" "$@"
