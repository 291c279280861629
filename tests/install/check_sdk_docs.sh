#!/usr/bin/env bash
# What a plugin's author gets from `cmake --install` beside the headers: the SDK under
# <prefix>/share/chorus/sdk/ (sdk/README.md, section 1), and that it holds together:
#  - the guide, the CHANGELOG, every template of the sources (test_out_of_tree.sh executable) and
#    include/, a link to the prefix's headers, are installed;
#  - the guide states the ABI of the installed plugin.h (CHORUS_ABI_MAJOR.CHORUS_ABI_MINOR), and
#    the CHANGELOG's newest entry is that version;
#  - no shipped document (the guide, the CHANGELOG, every file of the templates) points at a path
#    the install lacks: its Markdown links and <!-- from: --> markers resolve from its folder; a
#    path of chorus's source tree (core/..., plugins/..., tools/..., sdk/...) anywhere in it, and a
#    path in backticks that names a file or a folder of the install (`chorus/plugin_sdk.hpp`,
#    `templates/...`, `lib/...`), resolve from its folder, the prefix, <prefix>/include or
#    <prefix>/share/chorus (where sdk/ is).
#   check_sdk_docs.sh <source root> <chorus build dir> <scratch dir>
set -euo pipefail
[[ $# -eq 3 ]] || { echo "usage: $0 <source root> <chorus build dir> <scratch dir>" >&2; exit 2; }
source_root=$(cd "$1" && pwd)
build_dir=$(cd "$2" && pwd)
scratch=$3
prefix=$scratch/prefix
sdk=$prefix/share/chorus/sdk
failures=0
fail() { echo "check_sdk_docs: $*" >&2; failures=$((failures + 1)); }

rm -rf "$prefix"
mkdir -p "$scratch"
cmake --install "$build_dir" --prefix "$prefix" >"$scratch/install.log" 2>&1 ||
  { cat "$scratch/install.log" >&2; echo "check_sdk_docs: FAILED: cmake --install" >&2; exit 1; }

# ---- What is installed ------------------------------------------------------------------------
for file in README.md CHANGELOG.md templates/test_out_of_tree.sh include/chorus/plugin.h; do
  [[ -f $sdk/$file ]] || fail "the install has no $sdk/$file"
done
[[ -x $sdk/templates/test_out_of_tree.sh ]] || fail "$sdk/templates/test_out_of_tree.sh is not executable"
source_files=$(cd "$source_root/sdk/templates" && find . -type f | sort)
installed_files=""
[[ -d $sdk/templates ]] && installed_files=$(cd "$sdk/templates" && find . -type f | sort)
[[ $source_files == "$installed_files" ]] ||
  fail "the installed templates differ from sdk/templates:" \
    "$(diff <(echo "$source_files") <(echo "$installed_files") | tr '\n' ' ')"

# ---- The ABI version --------------------------------------------------------------------------
header=$prefix/include/chorus/plugin.h
major=$(sed -n 's/^#define CHORUS_ABI_MAJOR \([0-9]*\)$/\1/p' "$header")
minor=$(sed -n 's/^#define CHORUS_ABI_MINOR \([0-9]*\)$/\1/p' "$header")
[[ -n $major && -n $minor ]] || fail "$header defines no CHORUS_ABI_MAJOR and CHORUS_ABI_MINOR"
abi=$major.$minor
stated=$(grep -oE "(The ABI is|This guide describes ABI) [0-9]+\.[0-9]+" "$sdk/README.md" |
  grep -oE "[0-9]+\.[0-9]+$" | sort -u || true)
[[ -n $stated ]] || fail "the guide does not state the ABI ('The ABI is $abi')"
for version in $stated; do
  [[ $version == "$abi" ]] || fail "the guide says the ABI is $version; plugin.h says $abi"
done
newest=$(grep -m1 -oE "^## [0-9]+\.[0-9]+" "$sdk/CHANGELOG.md" | cut -c4- || true)
[[ $newest == "$abi" ]] ||
  fail "the CHANGELOG's newest entry is '${newest:-none}'; plugin.h's ABI is $abi: add its entry"

# ---- Every path a shipped document points at --------------------------------------------------
# Whether <path> exists from <document's folder>, the prefix, <prefix>/include, <prefix>/share/chorus.
resolves() {
  local dir=$1 path=${2%%#*}
  local base
  for base in "$dir" "$prefix" "$prefix/include" "$prefix/share/chorus"; do
    [[ -e $base/$path ]] && return 0
  done
  return 1
}
# Folders of chorus's source tree: a path that starts with one names the sources, not the install.
source_folders="core|plugins|tools|tests|docs|examples|scripts|parameter_server|cmake|sdk"
# The first folders of an install, and the SDK's, whose paths in backticks are checked.
install_folders="bin|lib|include|share|templates|$source_folders"
documents=("$sdk/README.md" "$sdk/CHANGELOG.md")
while IFS= read -r file; do documents+=("$file"); done < <(find "$sdk/templates" -type f | sort)
for document in "${documents[@]}"; do
  dir=$(dirname "$document")
  name=${document#"$prefix"/}
  # Markdown links, without web addresses and anchors.
  while IFS= read -r target; do
    [[ -z $target || $target =~ ^[a-z]+: || $target == \#* ]] && continue
    [[ -e $dir/${target%%#*} ]] || fail "$name links to $target, which the install does not have"
  done < <(grep -oE '\]\([^) ]+\)' "$document" | sed -e 's/^](//' -e 's/)$//' || true)
  # The files the guide's code blocks come from.
  while IFS= read -r target; do
    [[ -e $dir/$target ]] || fail "$name's code block comes from $target, not in the install"
  done < <(sed -n 's/^<!-- from: \([^ ]*\) -->$/\1/p' "$document")
  # Paths of the source tree, anywhere; paths of the install in backticks.
  while IFS= read -r path; do
    path=${path%[.,;:]}
    resolves "$dir" "$path" || fail "$name points at $path, which the install does not have"
  done < <({
    grep -oE "(^|[^A-Za-z0-9_./~\$<>-])($source_folders)/[A-Za-z0-9_./+-]*" "$document" |
      sed -E 's/^[^a-z]//' || true
    # shellcheck disable=SC2016 # backticks, not a command
    grep -oE '`[A-Za-z0-9_.+-]+(/[A-Za-z0-9_.+-]+)*/?`' "$document" | tr -d '`' |
      grep -E "^(($install_folders)/|[^/]+/.*\.(h|hpp|cc|c|md|sh|txt|cmake|so)$)" || true
  } | sort -u)
done

if ((failures > 0)); then
  echo "check_sdk_docs: FAILED: $failures problem(s) above in $sdk" >&2
  exit 1
fi
echo "check_sdk_docs: $sdk has the guide, the CHANGELOG and ${#documents[@]} documents in all;" \
  "ABI $abi in plugin.h, the guide and the CHANGELOG; every path they name is installed"
