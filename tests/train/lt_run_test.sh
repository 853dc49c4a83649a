#!/usr/bin/env bash
# lt_run_test.sh LT_RUN DATA DEVICE MODEL MIN_ACCURACY_PERCENT [policy] [extra lt-run args...]
# The main job end to end: lt-run trains MODEL on DEVICE ("default" = lt-run's own choice)
# with the given fallback policy ("error" when not given: any node leaving the backend fails
# the run; "default": the user's default, LT_FALLBACK unset), prints nothing on stderr at the default log level, reports zero fallbacks and
# reaches the accuracy every backend reached before the shared lowering (97.21% mlp,
# 97.77% cnn; the bound leaves room for a few rows of rounding).
set -euo pipefail
lt_run="$1" data="$2" device="$3" model="$4" min="$5" policy="${6:-error}"
shift $(($# < 6 ? $# : 6))
extra=("$@")  # e.g. --precision bf16
out="$(mktemp)" err="$(mktemp)"
trap 'rm -f "$out" "$err"' EXIT
args=(--data "$data" --model "$model" "${extra[@]}")
[[ "$device" == default ]] || args+=(--device "$device")
if [[ "$policy" == default ]]; then policy_env=(-u LT_FALLBACK); else policy_env=(LT_FALLBACK="$policy"); fi
env -u LT_LOG_LEVEL "${policy_env[@]}" "$lt_run" "${args[@]}" >"$out" 2>"$err" || {
  echo "lt-run ${args[*]} failed:"; cat "$out" "$err"; exit 1; }
cat "$out"
if [[ -s "$err" ]]; then
  echo "FAIL: lt-run wrote to stderr at the default log level:"; cat "$err"; exit 1
fi
for ((i = 0; i + 1 < ${#extra[@]}; ++i)); do  # the run says which precision it trained in
  if [[ "${extra[i]}" == --precision ]]; then
    grep -q "parameters, ${extra[i + 1]} |" "$out" ||
      { echo "FAIL: the header does not say precision ${extra[i + 1]}"; exit 1; }
  fi
done
grep -q 'fallbacks 0$' "$out" || { echo "FAIL: the run fell back"; exit 1; }
acc="$(sed -n 's/^test accuracy: \([0-9.]*\)%.*/\1/p' "$out")"
[[ -n "$acc" ]] || { echo "FAIL: no accuracy line"; exit 1; }
awk -v a="$acc" -v m="$min" 'BEGIN { exit !(a >= m) }' ||
  { echo "FAIL: accuracy $acc% is below $min%"; exit 1; }
echo "OK: $device $model ${extra[*]} $acc% (>= $min%), no fallback, quiet stderr"
