#!/usr/bin/env bash
# The levels of docs/design.md ("Levels"): each level of src/ uses only the levels below it, in
# its includes and in its calls. Two checks:
#   includes - no file of a level includes a header of a level it may not use ("model/...");
#   symbols  - no object of a level calls a function that only a level it may not use defines
#              (a public header of include/linformer/ implemented in src/model, say).
# Usage: tests/check_levels.sh SRC_DIR OBJECT... (the library's objects; an object's level is the
# folder under src/ of its path, as CMake lays them out: .../src/<level>/<file>.cpp.o).
set -euo pipefail
src=$1
shift
declare -A objs=()
for o in "$@"; do
  lvl=${o##*/src/}
  lvl=${lvl%%/*}
  objs[$lvl]+=" $o"
done
# level: the levels it may use (the table of docs/design.md).
declare -A uses=(
  [core]=""
  [kernels]="core"
  [io]="core"
  [data]="core io"
  [layers]="core kernels"
  [model]="core kernels io data layers"
  [dist]="core kernels io data layers model"
)
levels=(core kernels io data layers model dist train analysis bench)
status=0
for lvl in "${!uses[@]}"; do
  allowed=" $lvl ${uses[$lvl]} "
  for other in "${levels[@]}"; do
    [[ "$allowed" == *" $other "* ]] && continue
    hits=$(grep -rn --include='*.h' --include='*.cpp' -E "^#include \"$other/" "$src/$lvl" || true)
    if [[ -n "$hits" ]]; then
      echo "check_levels: $lvl includes headers of $other (it uses only:${uses[$lvl]:- nothing}):" >&2
      echo "$hits" | sed 's/^/  /' >&2
      status=1
    fi
  done
done
# Symbols: what each level's objects need, against what every level's objects define.
# shellcheck disable=SC2086
defined() { nm -C --defined-only ${objs[$1]} | grep -E ' [TW] ' | sed 's/^[0-9a-f]* [TW] //' | sort -u; }
# shellcheck disable=SC2086
needed() { nm -C --undefined-only ${objs[$1]} | grep -E '^ +U ' | sed 's/^ *U //' | sort -u; }
n=0
for lvl in "${!uses[@]}"; do
  [[ -n "${objs[$lvl]:-}" ]] || continue
  n=$((n + 1))
  allowed=" $lvl ${uses[$lvl]} "
  for other in "${levels[@]}"; do
    [[ "$allowed" == *" $other "* || -z "${objs[$other]:-}" ]] && continue
    bad=$(comm -12 <(needed "$lvl") <(defined "$other") || true)
    if [[ -n "$bad" ]]; then
      echo "check_levels: $lvl calls functions defined in $other:" >&2
      echo "$bad" | sed 's/^/  /' >&2
      status=1
    fi
  done
done
((status == 0)) && echo "check_levels: $n levels, each including and calling only the levels below it"
exit $status
