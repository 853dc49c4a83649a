#!/usr/bin/env bash
# run_fuzzers.sh <build dir> [seconds per harness] [harness...]: runs the libFuzzer executables
# of a build configured with -DLT_FUZZ=ON (docs/reliability.md). Each starts from the committed
# seeds (tests/fuzz/corpus/<name>, never modified) plus what earlier runs found
# (<build dir>/fuzz/corpus/<name>); a crash, hang (-timeout), leak or memory blow-up
# (-rss_limit_mb) stops the run with the input saved under <build dir>/fuzz/artifacts/.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
build="$(cd "$1" && pwd)"
secs="${2:-60}"
shift $(($# < 2 ? $# : 2))
names=("$@")
((${#names[@]})) || names=(config checkpoint ops graph onnx optimizer)
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1}"
# Symbolised reports: the first llvm-symbolizer found.
if [ -z "${ASAN_SYMBOLIZER_PATH:-}" ]; then
  for s in llvm-symbolizer-15 llvm-symbolizer-19 llvm-symbolizer; do
    if command -v "$s" >/dev/null; then
      export ASAN_SYMBOLIZER_PATH="$(command -v "$s")"
      break
    fi
  done
fi
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
status=0
for name in "${names[@]}"; do
  exe="$build/bin/lt_fuzz_$name"
  [ -x "$exe" ] || { echo "run_fuzzers: $exe is not built (cmake -DLT_FUZZ=ON, clang)"; exit 1; }
  work="$build/fuzz/corpus/$name"
  artifacts="$build/fuzz/artifacts/$name/"
  mkdir -p "$work" "$artifacts"
  dict=()
  [ -f "$here/$name.dict" ] && dict=("-dict=$here/$name.dict")
  echo "run_fuzzers: $name for ${secs}s"
  if ! "$exe" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=2048 \
      -print_final_stats=1 -artifact_prefix="$artifacts" "${dict[@]}" \
      "$work" "$here/corpus/$name" >"$build/fuzz/$name.log" 2>&1; then
    tail -n 60 "$build/fuzz/$name.log"
    echo "run_fuzzers: $name FAILED; input saved in $artifacts (replay: $exe <file>)"
    status=1
  else
    grep -E "^stat::(number_of_executed_units|peak_rss_mb)" "$build/fuzz/$name.log" || true
  fi
done
exit $status
