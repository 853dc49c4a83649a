#!/usr/bin/env bash
# lt_run_gpt_memory_test.sh LT_RUN DEVICE — the GPT training step's memory (docs/memory.md) from
# lt-run --metrics-json, with and without --recompute: each step donates the training state
# (parameters and AdamW moments, all but the step counter), the resident peak stays within
# 1.3 x (state + the step's arena), recomputing the blocks at least halves the arena, and the
# losses are the same numbers.
set -euo pipefail
lt_run="$1" device="$2"
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
args=(--model gpt --device "$device" --layers 4 --width 64 --heads 2 --context 64 --batch 8
      --steps 3 --eval-every 0 --eval-batches 1 --dropout 0.1)
for mode in plain recompute; do
  extra=()
  [[ "$mode" == recompute ]] && extra=(--recompute)
  LT_FALLBACK=error "$lt_run" "${args[@]}" "${extra[@]}" --metrics-json "$dir/$mode.json" \
    >"$dir/$mode.out" 2>&1 || { echo "FAIL: lt-run ($mode) exited $?"; cat "$dir/$mode.out"; exit 1; }
  grep '^memory:' "$dir/$mode.out"
done
python3 - "$dir/plain.json" "$dir/recompute.json" <<'PY'
import json, sys
plain, re = (json.load(open(p)) for p in sys.argv[1:3])
bad = []
for name, run in (("plain", plain), ("recompute", re)):
    m = run["memory"]
    if m["donated_bytes_per_step"] < m["state_bytes"] - 64:
        bad.append(f"{name}: donated {m['donated_bytes_per_step']} of {m['state_bytes']} state bytes")
    if m["resident_peak_bytes"] > 1.3 * (m["state_bytes"] + m["arena_bytes"]):
        bad.append(f"{name}: resident {m['resident_peak_bytes']} over 1.3 x (state + arena)")
a, b = plain["memory"]["arena_bytes"], re["memory"]["arena_bytes"]
if not (0 < 2 * b <= a):
    bad.append(f"recompute arena {b} is not at most half of {a}")
if plain["losses"] != re["losses"]:
    bad.append(f"losses differ: {plain['losses']} vs {re['losses']}")
print("arena plain %d, recompute %d (%.2fx); losses %s" % (a, b, a / b if b else 0, plain["losses"]))
if bad:
    print("FAIL: " + "; ".join(bad))
    sys.exit(1)
PY
