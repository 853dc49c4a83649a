#!/usr/bin/env bash
# lt_run_gpt_test.sh LT_RUN DEVICE [quick]
# lt-run --model gpt end to end on DEVICE with a tiny model on the real corpus: it trains with
# no fallback and quiet stderr, validation loss falls, a sample is printed with its compile
# count. Unless "quick" (gpu_opencl: each new graph costs a PoCL compile): a run interrupted
# with --stop-after, saved and resumed with --load prints the same step line as the
# uninterrupted run, and a truncated checkpoint is refused with an error naming the file.
set -euo pipefail
lt_run="$1" device="$2" mode="${3:-full}"
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
args=(--model gpt --device "$device" --layers 1 --width 32 --heads 2 --context 16 --batch 8
      --eval-every 4 --eval-batches 2 --warmup 2)
run() {  # run NAME ARGS...: stdout to $dir/NAME.out; fails on a non-zero exit or stderr
  local name="$1"; shift
  env -u LT_LOG_LEVEL LT_FALLBACK=error "$lt_run" "${args[@]}" "$@" \
    >"$dir/$name.out" 2>"$dir/$name.err" || { echo "FAIL: lt-run $* exited $?"; cat "$dir/$name".*; exit 1; }
  cat "$dir/$name.out"
  [[ ! -s "$dir/$name.err" ]] || { echo "FAIL: stderr at the default log level:"; cat "$dir/$name.err"; exit 1; }
  grep -q 'fallbacks 0$' "$dir/$name.out" || { echo "FAIL: $name fell back"; exit 1; }
}
val() { sed -n "s/^step *$2 .*val loss \([0-9.]*\).*/\1/p" "$dir/$1.out"; }
step_line() { grep "^step *$2 " "$dir/$1.out" | sed 's/ [0-9]* tokens\/s$//'; }

# Sampling compiles a bounded number of graphs (docs/dynamic-shapes.md): the decoding step at
# its first cache length, then once dynamic in the length (cpu_eager, cpu_jit, gpu_opencl) or
# per power-of-two bucket of it (tpu_sim), and the refill from the window's second half; before
# dynamic shapes it compiled once per length (12 lengths here, 13 graphs).
steps=8 chars=40 most=5
[[ "$mode" == quick ]] && steps=4 chars=8 most=5  # the 7 feeds after the prompt: lengths 5..11
run straight --steps "$steps" --generate "$chars" --prompt "The "
grep -q -- "--- sample ($chars characters" "$dir/straight.out" || { echo "FAIL: no sample"; exit 1; }
compiles="$(sed -n 's/^--- generation compiled \([0-9]*\) graphs.*/\1/p' "$dir/straight.out")"
[[ -n "$compiles" && "$compiles" -le "$most" ]] ||
  { echo "FAIL: generation compiled '$compiles' graphs, expected at most $most"; exit 1; }
last="$(val straight "$steps")"
# Untrained, the loss is about ln(114) = 4.74 nats per character.
awk -v v="$last" 'BEGIN { exit !(v > 0 && v < 4.70) }' || { echo "FAIL: val loss $last did not fall"; exit 1; }
if [[ "$mode" == quick ]]; then echo "OK: $device gpt trains (val $last) and samples"; exit 0; fi
first="$(val straight 4)"
awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a) }' || { echo "FAIL: val $first -> $last"; exit 1; }

run part1 --steps 8 --stop-after 4 --save "$dir/ckpt.safetensors"
grep -q "saved $dir/ckpt.safetensors (step 4)" "$dir/part1.out" || { echo "FAIL: not saved"; exit 1; }
run part2 --steps 8 --load "$dir/ckpt.safetensors"
want="$(step_line straight 8)" got="$(step_line part2 8)"
[[ -n "$want" && "$want" == "$got" ]] || { echo "FAIL: resumed run differs:"; echo " straight: $want"; echo " resumed:  $got"; exit 1; }

head -c 1000 "$dir/ckpt.safetensors" >"$dir/truncated.safetensors"
if "$lt_run" "${args[@]}" --steps 8 --load "$dir/truncated.safetensors" >"$dir/bad.out" 2>&1; then
  echo "FAIL: a truncated checkpoint was accepted"; cat "$dir/bad.out"; exit 1
fi
grep -q "truncated.safetensors" "$dir/bad.out" || { echo "FAIL: the error does not name the file:"; cat "$dir/bad.out"; exit 1; }
echo "OK: $device gpt trains (val $first -> $last), samples, resumes exactly, refuses a bad file"
