#!/usr/bin/env bash
# lt_run_fashion_test.sh LT_RUN DEVICE — the main job on Fashion-MNIST (Debian's
# dataset-fashion-mnist), briefly: the residual network on 2,000 training images for 2 epochs
# learns (test accuracy well above chance, the loss falls between epochs, a curve in the JSON);
# a missing set is an error naming the package. The full run is a README command.
set -euo pipefail
lt_run="$1" device="$2"
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $1"; cat "$dir"/*.out "$dir"/*.err 2>/dev/null || true; exit 1; }

env -u LT_LOG_LEVEL "$lt_run" --device "$device" --data fashion-mnist --model resnet \
  --train-rows 2000 --test-rows 1000 --epochs 2 --batch 64 --lr 0.003 \
  --loss-log "$dir/loss.txt" --metrics-json "$dir/m.json" >"$dir/run.out" 2>"$dir/run.err" ||
  fail "lt-run exited $?"
grep -qE '^ epoch +2/2 +loss [0-9.]+ +test accuracy [0-9.]+%' "$dir/run.out" ||
  fail "no per-epoch test accuracy line"
python3 - "$dir/m.json" "$dir/loss.txt" <<'EOF' || fail "the run did not learn"
import json, sys
m = json.load(open(sys.argv[1]))
loss = [float(line.split()[1]) for line in open(sys.argv[2])]
curve = m["curve"]
assert len(curve) == 2 and len(loss) == 2, (curve, loss)
assert loss[1] < loss[0], f"training loss did not fall: {loss}"
# Ten balanced classes: chance is 10%. Two epochs on 2,000 images reach about 70%.
assert m["test_accuracy"] > 0.5, f"test accuracy {m['test_accuracy']} (chance: 0.1)"
EOF

# A missing set: a clear error naming the file and the Debian package, no crash.
if env -u LT_LOG_LEVEL "$lt_run" --device "$device" --data "fashion-mnist:$dir/nowhere" \
  --model resnet >"$dir/missing.out" 2>"$dir/missing.err"; then
  fail "a missing data set was accepted"
fi
grep -q "dataset-fashion-mnist" "$dir/missing.err" || fail "the error does not name the package"
grep -q "$dir/nowhere/train-images-idx3-ubyte" "$dir/missing.err" || fail "the error names no file"
echo "ok: $(grep -E '^test accuracy' "$dir/run.out")"
