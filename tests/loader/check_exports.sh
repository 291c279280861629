#!/usr/bin/env bash
# Fails unless every libchorus-*.so in the folder exports exactly one dynamic symbol,
# chorus_plugin_get.
set -euo pipefail
dir=${1:?usage: check_exports.sh PLUGIN_DIR}
shopt -s nullglob
plugins=("$dir"/libchorus-*.so)
if (( ${#plugins[@]} == 0 )); then
  echo "no plugins in $dir" >&2
  exit 1
fi
status=0
for plugin in "${plugins[@]}"; do
  symbols=$(nm -D --defined-only "$plugin" | awk '{print $NF}')
  if [[ "$symbols" != "chorus_plugin_get" ]]; then
    echo "FAIL $plugin exports: $(echo "$symbols" | tr '\n' ' ')" >&2
    status=1
  else
    echo "ok   $plugin exports only chorus_plugin_get"
  fi
done
exit $status
