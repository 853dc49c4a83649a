#!/usr/bin/env bash
# conformance_table_test.sh LT_CONFORMANCE PLUGIN
# lt-conformance's per-op table over a plugin that claims only a few ops (the test plugin
# "partial": add, mul, relu, matmul, ...): an op it claims gets a result of its own; an op it
# never claims runs on cpu_eager and gets "-", never FAIL; there is no undocumented "(other)"
# row; the run is CONFORMANT.
set -euo pipefail
out="$("$1" "$2" --gtest_brief=1 2>&1)" || { echo "$out"; echo "FAIL: lt-conformance failed"; exit 1; }
table="$(sed -n '/^op  *runs as/,/^tests:/p' <<<"$out")"
fail() { echo "$table"; echo "FAIL: $1"; exit 1; }
grep -Eq '^matmul +native +pass' <<<"$table" || fail "matmul (claimed) has no pass row"
grep -Eq '^relu +native +pass' <<<"$table" || fail "relu (claimed) has no pass row"
grep -Eq '^pow +fallback +- +not run here: cpu_eager runs it' <<<"$table" ||
  fail "pow (never claimed) is not reported as run by cpu_eager"
if grep -Eq '^[a-z_0-9]+ +fallback +FAIL' <<<"$table"; then fail "an unclaimed op is marked FAIL"; fi
if grep -q '(other)' <<<"$out"; then fail "an '(other)' row is printed"; fi
rows="$(grep -Ec '^[a-z_0-9]+ +(native|decomposed|fallback) ' <<<"$table")"
((rows >= 50)) || fail "only $rows op rows (one per op of the table expected)"
grep -q '^CONFORMANT$' <<<"$out" || fail "not CONFORMANT"
echo "OK: $rows op rows; claimed ops have results, unclaimed ones run on cpu_eager"
