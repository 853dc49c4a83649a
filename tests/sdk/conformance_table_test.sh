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
# Collectives are run by the core (issue #28), not by a cpu_eager fallback.
grep -Eq '^all_reduce +core +- +collective: the core runs it' <<<"$table" ||
  fail "all_reduce is not shown as run by the core"
if grep -Eq '^(all_reduce|broadcast|all_gather) +fallback' <<<"$table"; then
  fail "a collective is shown as a cpu_eager fallback"
fi
echo "OK: $rows op rows; claimed ops have results, unclaimed ones run on cpu_eager"

# A failing run (add off by one, on purpose): each failure names the test, the check as
# <file name>:<line> (no path of the tree lt-conformance was built in) and a rerun command.
bad="$(LT_TEST_PARTIAL_WRONG_ADD=1 "$1" "$2" --gtest_filter='*BinaryOpsBroadcastLikeNumPy*' 2>&1)" &&
  { echo "$bad"; echo "FAIL: a wrong add passed"; exit 1; }
grep -Eq '^FAIL [A-Za-z0-9_/]+\.[A-Za-z0-9_/]+$' <<<"$bad" || { echo "$bad"; echo "FAIL: no 'FAIL <test>' line"; exit 1; }
grep -Eq '^    [A-Za-z0-9_]+\.cpp:[0-9]+: ' <<<"$bad" ||
  { echo "$bad"; echo "FAIL: no '<file>.cpp:<line>: <message>' line"; exit 1; }
grep -Eq "^    rerun it alone: lt-conformance [^ ]*$(basename "$2") --gtest_filter=[A-Za-z/]*Elementwise.BinaryOpsBroadcastLikeNumPy" <<<"$bad" ||
  { echo "$bad"; echo "FAIL: no rerun command"; exit 1; }
if grep -qE '(/tests/conformance/|Google Test trace)' <<<"$bad"; then
  echo "$bad"; echo "FAIL: a failure line names a build-tree source path"; exit 1
fi
grep -Eq '^add +native +FAIL' <<<"$bad" || { echo "$bad"; echo "FAIL: add not marked FAIL"; exit 1; }
echo "OK: failure lines name test, file:line and a rerun command, no source path"
