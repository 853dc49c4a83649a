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
# The sanitizer lane's suppressions (tests/sanitize/lsan.supp): leaks inside libraries we link and
# do not build (libgomp's per-thread block of a oneTBB worker that ran a convolution, ...).
export LSAN_OPTIONS="${LSAN_OPTIONS:-suppressions=$here/../sanitize/lsan.supp:print_suppressions=0}"
# One harness: its log in <build dir>/fuzz/<name>.log; prints the tail and fails on a finding.
run_one() {
  local name="$1"
  local exe="$build/bin/lt_fuzz_$name"
  local work="$build/fuzz/corpus/$name"
  local artifacts="$build/fuzz/artifacts/$name/"
  mkdir -p "$work" "$artifacts"
  local dict=()
  [ -f "$here/$name.dict" ] && dict=("-dict=$here/$name.dict")
  if ! "$exe" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=2048 \
      -print_final_stats=1 -artifact_prefix="$artifacts" "${dict[@]}" \
      "$work" "$here/corpus/$name" >"$build/fuzz/$name.log" 2>&1; then
    tail -n 60 "$build/fuzz/$name.log"
    echo "run_fuzzers: $name FAILED; input saved in $artifacts (replay: $exe <file>)"
    return 1
  fi
  echo "run_fuzzers: $name done"
  grep -E "^stat::(number_of_executed_units|peak_rss_mb)" "$build/fuzz/$name.log" || true
}
for name in "${names[@]}"; do
  [ -x "$build/bin/lt_fuzz_$name" ] ||
    { echo "run_fuzzers: $build/bin/lt_fuzz_$name is not built (cmake -DLT_FUZZ=ON, clang)"; exit 1; }
done
# The harnesses are independent single-threaded processes: LT_JOBS of them at a time (default:
# the machine's cores), each still fuzzing for the full `secs`.
jobs_max="${LT_JOBS:-$(nproc)}"
status=0
running=0
for name in "${names[@]}"; do
  if ((running >= jobs_max)); then
    wait -n || status=1
    running=$((running - 1))
  fi
  echo "run_fuzzers: $name for ${secs}s"
  run_one "$name" &
  running=$((running + 1))
done
while ((running > 0)); do
  wait -n || status=1
  running=$((running - 1))
done
exit $status
