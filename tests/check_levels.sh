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
# shellcheck disable=SC2086
defined() { nm -C --defined-only ${objs[$1]} | grep -E ' [TW] ' | sed 's/^[0-9a-f]* [TW] //' | sort -u; }
# shellcheck disable=SC2086
needed() { nm -C --undefined-only ${objs[$1]} | grep -E '^ +U ' | sed 's/^ *U //' | sort -u; }
# What level $1 includes of level $2 (the sources), or calls of it (the objects: what it needs
# that $2 defines).
includes() { grep -rn --include='*.h' --include='*.cpp' -E "^#include \"$2/" "$src/$1" || true; }
calls() {
  [[ -n "${objs[$1]:-}" && -n "${objs[$2]:-}" ]] || return 0
  comm -12 <(needed "$1") <(defined "$2") || true
}
for lvl in "${!uses[@]}"; do
  allowed=" $lvl ${uses[$lvl]} "
  for other in "${levels[@]}"; do
    [[ "$allowed" == *" $other "* ]] && continue
    for what in includes calls; do
      bad=$($what "$lvl" "$other")
      [[ -z "$bad" ]] && continue
      echo "check_levels: $lvl $what $other (it uses only:${uses[$lvl]:- nothing}):" >&2
      echo "$bad" | sed 's/^/  /' >&2
      status=1
    done
  done
done
((status == 0)) && echo "check_levels: ${#uses[@]} levels, each including and calling only the levels below it"
exit $status
