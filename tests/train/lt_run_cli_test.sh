#!/usr/bin/env bash
# lt_run_cli_test.sh LT_RUN — lt-run's command line: bad values are refused with a message
# saying what is wrong (not CLI11's "not in range 0 to <300 digits>"), and --help shows the
# defaults.
set -euo pipefail
lt_run="$1"
expect_error() {  # expect_error MESSAGE ARGS...: lt-run ARGS fails and prints MESSAGE
  local want="$1"; shift
  local out
  if out="$("$lt_run" "$@" 2>&1)"; then echo "FAIL: lt-run $* succeeded"; exit 1; fi
  [[ "$out" == *"$want"* ]] || { echo "FAIL: lt-run $*: expected '$want' in:"; echo "$out"; exit 1; }
  [[ "$out" != *"179769313486"* ]] || { echo "FAIL: lt-run $* prints a 300-digit range"; exit 1; }
}
expect_error "--epochs: must be at least 1, got 0" --epochs 0
expect_error "--batch: 'abc' is not a whole number" --batch abc
expect_error "--batch: '3.5' is not a whole number" --batch 3.5
expect_error "--lr: must be positive, got -1" --lr -1
expect_error "--lr: 'fast' is not a number" --lr fast
expect_error "--steps: must be at least 0, got -2" --model gpt --steps -2
expect_error "--temperature: must be positive, got 0" --model gpt --temperature 0
help="$("$lt_run" --help)"
for want in "--epochs INT:INT>=1=20" "--batch INT:INT>=1=32" "--hidden INT:INT>=1=128" \
            "--steps INT:INT>=0=1000" "--temperature FLOAT:NUM>0=0.8"; do
  [[ "$help" == *"$want"* ]] || { echo "FAIL: --help lacks '$want':"; echo "$help"; exit 1; }
done
echo "OK: bad values are named and explained; --help shows defaults"
