#!/usr/bin/env bash
# Runs every libFuzzer harness of tests/fuzz for SECONDS each (0: until stopped), starting
# from the seed corpus in the repository (tests/fuzz/corpus/NAME, read only) plus the corpus
# grown by earlier runs in BUILD/fuzz/corpus/NAME, with the harness's dictionary and inputs
# up to 1 MiB. Crashes are saved in BUILD/fuzz/artifacts/ and make the script fail; the
# executions of each harness are printed at the end.
# Usage: tests/fuzz/run.sh BUILD SECONDS [NAME...]
set -euo pipefail
build=${1:?usage: run.sh BUILD SECONDS [NAME...]}
seconds=${2:?usage: run.sh BUILD SECONDS [NAME...]}
shift 2
src=$(cd "$(dirname "$0")" && pwd)
names=("$@")
((${#names[@]})) || names=(safetensors config classify_data corpus model_folder tokenizer serve_request)
mkdir -p "$build/fuzz/artifacts"
status=0
summary=()
for name in "${names[@]}"; do
  bin="$build/tests/fuzz/fuzz_$name"
  work="$build/fuzz/corpus/$name"
  mkdir -p "$work"
  args=(-max_len=1048576 -rss_limit_mb=4096 -timeout=60 -print_final_stats=1
        "-artifact_prefix=$build/fuzz/artifacts/$name-" "-dict=$src/$name.dict")
  ((seconds > 0)) && args+=("-max_total_time=$seconds")
  log="$build/fuzz/$name.log"
  echo "fuzz: $name for ${seconds}s (log: $log)"
  # ASan's leak check is off: oneDNN and the OpenMP runtime keep allocations until exit.
  if ! ASAN_OPTIONS=detect_leaks=0:halt_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
      "$bin" "${args[@]}" "$work" "$src/corpus/$name" >"$log" 2>&1; then
    status=1
    echo "fuzz: $name FAILED:" >&2
    grep -E "ERROR|runtime error|SUMMARY|Test unit written" "$log" | head -n 20 >&2 || tail -n 30 "$log" >&2
  fi
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
  summary+=("$name: ${execs:-?} executions")
done
printf 'fuzz: %s\n' "${summary[@]}"
exit $status
