#!/usr/bin/env bash
# lt_run_ux_test.sh LT_RUN DEVICE — lt-run as people expect (issue #28), output not a terminal:
# a visible compiling state, plain progress lines with percentage, elapsed time, rate and ETA,
# compile time apart from step time in the summaries; --load restores the run's settings stored
# in the checkpoint (an option given again overrides and says so); --load with --generate
# samples without training unless --steps is given.
set -euo pipefail
lt_run="$1" device="$2"
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $1"; [[ -n "${2:-}" ]] && cat "$dir/$2.out"; exit 1; }
run() {  # run NAME ARGS...: stdout (a file, not a terminal) to $dir/NAME.out
  local name="$1"; shift
  env -u LT_LOG_LEVEL "$lt_run" --device "$device" "$@" >"$dir/$name.out" 2>"$dir/$name.err" ||
    { echo "FAIL: lt-run $* exited $?"; cat "$dir/$name".*; exit 1; }
}
gpt=(--model gpt --layers 1 --width 32 --heads 2 --context 16 --eval-every 5 --eval-batches 1)

# The digits MLP: compiling line first, then plain progress lines (every 10%) and the summary.
run mlp --epochs 2
grep -q '^compiling the training step' "$dir/mlp.out" || fail "no compiling line" mlp
n="$(grep -cE '^progress +[0-9]+% [0-9]+/[0-9]+ \| [0-9]+:[0-9]{2} elapsed \| [0-9.]+ (steps/s|s/step) \| ETA [0-9]+:[0-9]{2}' "$dir/mlp.out" || true)"
((n >= 5)) || fail "only $n plain progress lines with percentage, elapsed, rate and ETA" mlp
grep -qE '^progress +100% ' "$dir/mlp.out" || fail "no 100% line" mlp
grep -qE '^test accuracy: .* = first step [0-9.]+ s \(compile [0-9.]+ s in all\) \+ [0-9]+ steps at [0-9.]+ ms/step$' \
  "$dir/mlp.out" || fail "the summary does not show compile time apart from step time" mlp

# A GPT run saved with non-default settings.
run first "${gpt[@]}" --batch 4 --steps 6 --warmup 2 --lr 0.002 --save "$dir/ck.safetensors"
grep -q '^compiling the training step' "$dir/first.out" || fail "gpt: no compiling line" first
grep -qE '^training: 6 steps, first step [0-9.]+ s \(compile [0-9.]+ s\), then [0-9.]+ ms/step' \
  "$dir/first.out" || fail "gpt: the summary does not show compile time apart" first

# Resumed without --batch: the checkpoint's batch 4, lr and warm-up, not the defaults.
run resumed "${gpt[@]}" --load "$dir/ck.safetensors" --steps 8
grep -qE "^restored from $dir/ck.safetensors: batch 4, lr 0.002, warmup 2, weight-decay 0.1," "$dir/resumed.out" ||
  fail "the run's settings were not restored" resumed
grep -q '| batch 4, steps 6..8$' "$dir/resumed.out" || fail "the resumed run does not use batch 4" resumed
grep -q '^training: 2 steps' "$dir/resumed.out" || fail "the resumed run did not train 2 steps" resumed

# Without --steps, a resumed run continues to the checkpoint's own --steps (6: nothing left).
run continued "${gpt[@]}" --load "$dir/ck.safetensors"
grep -q '| batch 4, steps 6..6$' "$dir/continued.out" || fail "the checkpoint's steps were not restored" continued

# An option given again overrides the checkpoint's value and says so.
run override "${gpt[@]}" --load "$dir/ck.safetensors" --steps 8 --batch 2
grep -q "^lt-run: --batch 2 overrides the checkpoint's 4$" "$dir/override.out" || fail "no override note" override
grep -q '| batch 2, steps 6..8$' "$dir/override.out" || fail "the override was not used" override

# --load + --generate samples without training (it used to train up to the default 1000 steps).
run sample "${gpt[@]}" --load "$dir/ck.safetensors" --generate 20 --prompt "The "
grep -q -- '--- sample (20 characters' "$dir/sample.out" || fail "no sample" sample
if grep -qE '^(training:|compiling the training step|progress )' "$dir/sample.out"; then
  fail "--load with --generate trained" sample
fi
# --profile writes a Chrome trace (its spans are checked in train_test's Profile.* test).
run prof --epochs 1 --profile "$dir/trace.json"
head -c 200 "$dir/trace.json" | grep -q '"traceEvents"' || fail "--profile wrote no trace" prof
grep -q '"name": "lt_sync"' "$dir/trace.json" || fail "--profile: no lt_sync span" prof
# Per-kernel spans from the plugin (ABI 1.3; cpu_jit and cpu_eager report them), and the table.
grep -q '"cat": "kernel"' "$dir/trace.json" || fail "--profile: no kernel spans" prof
grep -q "^profile: $dir/trace.json" "$dir/prof.out" || fail "--profile: no table" prof
grep -qE '^  kernel +[^ ].* +[0-9]+ +[0-9.]+ +[0-9.]+$' "$dir/prof.out" ||
  fail "--profile: the table lists no kernel" prof
echo "OK: progress, compile time, restored settings, override note, sampling without training, profile"
