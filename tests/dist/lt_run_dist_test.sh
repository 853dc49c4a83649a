#!/usr/bin/env bash
# lt_run_dist_test.sh MPIEXEC LT_RUN MODE LT_RUN_ARGS...
# MODE same: lt-run (one process) and `mpirun -np 2 lt-run --distributed` with the same global
#   batch and seed write their per-epoch (gpt: per-evaluation train and validation) losses with
#   --loss-log; every loss must agree to 4 significant digits (relative difference below 5e-4),
#   rank 0 alone prints, and the printed line says the world size.
# MODE exit / error: rank 1 exits (status 3, no message) or fails with an lt::Error at step 3;
#   the job must end within 60 s with a non-zero status and a message naming rank 1.
# MODE batches B0 B1: rank 0 runs --batch B0 and rank 1 --batch B1; the job must end within
#   10 s, with no LT_DIST_TIMEOUT set, naming the setting and both ranks' values.
# MODE hang: rank 1 sleeps forever at step 3; with LT_DIST_TIMEOUT (set by the test) rank 0's
#   next collective gives up and rank 0 ends the job, saying which collective timed out.
set -euo pipefail
mpiexec="$1" lt_run="$2" mode="$3"
shift 3
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
mpirun=("$mpiexec" --allow-run-as-root --oversubscribe -np 2)
common=(--device cpu_eager "$@")

if [[ "$mode" == same ]]; then
  "$lt_run" "${common[@]}" --loss-log "$dir/one.log" >"$dir/one.out" 2>&1 ||
    { echo "FAIL: single-process run"; cat "$dir/one.out"; exit 1; }
  "${mpirun[@]}" "$lt_run" --distributed "${common[@]}" --loss-log "$dir/two.log" \
    >"$dir/two.out" 2>"$dir/two.err" ||
    { echo "FAIL: mpirun -np 2 run"; cat "$dir/two.out" "$dir/two.err"; exit 1; }
  cat "$dir/two.out"
  grep -q "^distributed: world size 2 " "$dir/two.out" || { echo "FAIL: no world size line"; exit 1; }
  [[ "$(grep -c '^lt-run: ' "$dir/two.out")" == 1 ]] || { echo "FAIL: more than rank 0 printed"; exit 1; }
  [[ -s "$dir/one.log" ]] || { echo "FAIL: no losses logged"; exit 1; }
  echo "losses: one process | two processes"
  paste "$dir/one.log" "$dir/two.log"
  # Same lines, same step/epoch numbers, every loss column within 5e-4 relative.
  paste -d' ' "$dir/one.log" "$dir/two.log" | awk '
    { n = NF / 2
      if ($1 != $(n + 1)) { print "FAIL: line " NR " step " $1 " vs " $(n + 1); bad = 1 }
      for (i = 2; i <= n; ++i) {
        a = $i; b = $(n + i); d = a - b; if (d < 0) d = -d; m = a < 0 ? -a : a
        if (d > 5e-4 * m) { print "FAIL: line " NR ": " a " vs " b " differ beyond 4 significant digits"; bad = 1 }
      } }
    END { if (NR == 0) bad = 1; exit bad }'
  [[ "$(wc -l <"$dir/one.log")" == "$(wc -l <"$dir/two.log")" ]] || { echo "FAIL: line counts differ"; exit 1; }
  echo "OK: 2 processes reproduce the single-process losses to 4 significant digits"
  exit 0
fi

if [[ "$mode" == batches ]]; then
  # Issue #29: ranks started with different --batch (MPMD). lt-run all-gathers its settings
  # before the first step, so even batches one row apart (33 and 32: shards that the graph
  # check cannot tell from an uneven split) end the job at once, naming both ranks' values.
  b0="$1" b1="$2"
  shift 2
  common=(--device cpu_eager "$@")
  start=$(date +%s%N)
  set +e
  env -u LT_DIST_TIMEOUT timeout 60 "$mpiexec" --allow-run-as-root --oversubscribe \
    -np 1 "$lt_run" --distributed "${common[@]}" --batch "$b0" : \
    -np 1 "$lt_run" --distributed "${common[@]}" --batch "$b1" >"$dir/out" 2>&1
  rc=$?
  set -e
  took_ms=$(( ($(date +%s%N) - start) / 1000000 ))
  tr '\r' '\n' <"$dir/out" | grep -v '^ *epoch\|^ *\[' || true
  [[ $rc != 124 ]] || { echo "FAIL: still running after 60 s (a hang)"; exit 1; }
  [[ $rc != 0 ]] || { echo "FAIL: exit status 0 although the ranks ran different batches"; exit 1; }
  (( took_ms < 10000 )) || { echo "FAIL: took ${took_ms} ms (bound: 10 s)"; exit 1; }
  grep -q "different settings: --batch: $b0 on rank 0, $b1 on rank 1" "$dir/out" ||
    { echo "FAIL: no error naming --batch and both ranks' values"; exit 1; }
  echo "OK: --batch $b0 on rank 0 and $b1 on rank 1 -> the job stopped in ${took_ms} ms with status $rc, naming both ranks"
  exit 0
fi

start=$(date +%s)
set +e
timeout 60 "${mpirun[@]}" "$lt_run" --distributed "${common[@]}" --inject-fault "1:3:$mode" \
  >"$dir/out" 2>&1
rc=$?
set -e
took=$(( $(date +%s) - start ))
tr '\r' '\n' <"$dir/out" | grep -v '^ *epoch\|^ *\[' || true
[[ $rc != 124 ]] || { echo "FAIL: still running after 60 s (a hang)"; exit 1; }
[[ $rc != 0 ]] || { echo "FAIL: exit status 0 although rank 1 failed"; exit 1; }
if [[ "$mode" == exit ]]; then
  # Open MPI names the process that died: "Process name: [[jobid,1],1]" (the last number is
  # the rank) with its exit code.
  grep -q 'Process name: \[\[[0-9]*,[0-9]*\],1\]' "$dir/out" && grep -q 'Exit code: *3' "$dir/out" ||
    { echo "FAIL: the message does not name rank 1 and its exit code"; exit 1; }
elif [[ "$mode" == hang ]]; then
  grep -q "lazytensor: rank 0 of 2 aborts the process group: lt-run: error: .* on rank 0 of 2 failed: .*not complete after ${LT_DIST_TIMEOUT:?} s (LT_DIST_TIMEOUT): another rank has not reached this collective" "$dir/out" ||
    { echo "FAIL: no timeout error from rank 0"; exit 1; }
  echo "OK: rank 1 hung -> rank 0 gave up after LT_DIST_TIMEOUT=$LT_DIST_TIMEOUT s; the job stopped in ${took} s with status $rc"
  exit 0
else
  grep -q 'lazytensor: rank 1 of 2 aborts the process group: lt-run: error: injected fault at step 3' "$dir/out" ||
    { echo "FAIL: no error naming rank 1"; exit 1; }
fi
echo "OK: rank 1 $mode -> the job stopped in ${took} s with status $rc, naming rank 1"
