#!/usr/bin/env bash
# Every C++ and CMake block of a guide is taken from a file the build compiles: the line before
# the block names it (<!-- from: path -->, relative to the guide's folder as its links are, so
# that it resolves in an install too; or else to the repository root), and every line of the block
# but blank ones and "// ..." elisions stands, trimmed, in that file. So no guide shows code that
# does not build.
#   check_snippets.sh <repository root> <guide.md>...
set -euo pipefail
root=${1:?usage: check_snippets.sh <repository root> <guide.md>...}
shift
failures=0
fail() { echo "check_snippets: $*" >&2; failures=$((failures + 1)); }
trim() { sed -e 's/^[[:space:]]*//' -e 's/[[:space:]]*$//' <<<"$1"; }

for guide in "$@"; do
  guide_dir=$(dirname "$guide")
  source_file=""
  in_block=0
  block_start=0
  line_number=0
  while IFS= read -r line || [[ -n $line ]]; do
    line_number=$((line_number + 1))
    if ((in_block == 0)); then
      if [[ $line =~ ^\<!--\ from:\ ([^ ]+)\ --\>$ ]]; then
        source_file=${BASH_REMATCH[1]}
        # The path from the repository root, when it is written from the guide's folder.
        if [[ -f $guide_dir/$source_file ]]; then
          source_file=$(realpath --relative-to="$root" "$guide_dir/$source_file")
        fi
      elif [[ $line =~ ^\`\`\`(cpp|cmake|c)$ ]]; then
        in_block=1
        block_start=$line_number
        if [[ -z $source_file ]]; then
          fail "$guide:$line_number: a ${BASH_REMATCH[1]} block without <!-- from: FILE --> before it"
        elif [[ ! -f $root/$source_file ]]; then
          fail "$guide:$line_number: the block's source $source_file does not exist"
          source_file=""
        fi
      elif [[ -n $(trim "$line") ]]; then
        source_file=""  # a marker belongs to the block right after it
      fi
      continue
    fi
    if [[ $line == '```' ]]; then
      in_block=0
      source_file=""
      continue
    fi
    [[ -z $source_file ]] && continue
    code=$(trim "$line")
    [[ -z $code || $code == "// ..."* ]] && continue
    # grep reads the whole file (no -q): an early exit would fail the pipeline under pipefail.
    if ! sed -e 's/^[[:space:]]*//' -e 's/[[:space:]]*$//' "$root/$source_file" |
      grep -xF -- "$code" >/dev/null; then
      fail "$guide:$line_number (block at line $block_start): not in $source_file: $code"
    fi
  done <"$guide"
done
if ((failures > 0)); then
  echo "check_snippets: $failures line(s) of the guides are not code the build compiles;" \
    "copy them from the file named, or name the file they come from" >&2
  exit 1
fi
echo "check_snippets: every C++ and CMake line of $* stands in a file the build compiles"
