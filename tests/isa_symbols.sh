#!/usr/bin/env bash
# Every symbol an instruction-set level's kernel objects define for the linker lives in that
# level's own namespaces (lf::isa::L, lf::vm::L, lf::attn_block::L). A weak or global symbol
# outside them (an out-of-line copy of a library template or of a shared inline function,
# compiled with the level's flags) could be the copy the linker keeps for the baseline code, and
# the program would then die with SIGILL on a CPU without that level (docs/design.md,
# "Instruction-set levels"). Symbols the sanitizers' instrumentation adds (make sanitize) are
# not code of the level and are let through.
# Usage: tests/isa_symbols.sh LEVEL OBJECT... [-- LEVEL OBJECT...]
set -euo pipefail
status=0
level=""
check() {
  local lvl=$1 obj=$2 bad
  bad=$(nm -C --defined-only "$obj" | awk '$2 ~ /^[A-Z]$|^[uvVwW]$/' | cut -d' ' -f3- |
        grep -v -E "^(lf::(isa|vm|attn_block)::${lvl}::|DW\.ref\.__gxx_personality_v0$|_*(odr_)?(asan|ubsan|sancov|tsan)[._])" || true)
  if [[ -n "$bad" ]]; then
    echo "isa_symbols: $obj ($lvl) defines symbols outside its level's namespaces:" >&2
    echo "$bad" | sed 's/^/  /' >&2
    status=1
  fi
}
for a in "$@"; do
  if [[ "$a" == -- ]]; then level=""; continue; fi
  if [[ -z "$level" ]]; then level=$a; continue; fi
  check "$level" "$a"
  n=$((${n:-0} + 1))
done
((status == 0)) && echo "isa_symbols: ${n:-0} objects, every exported symbol in its level's namespaces"
exit $status
