#!/usr/bin/env bash
# persistent_cache_test.sh LT_RUN DATA DEVICE
# The persistent compile cache across processes (docs/compile-cache.md): a first lt-run fills
# LT_CACHE_DIR; a second process running the same program loads every compiled artifact
# (persistent_cache_misses 0) and trains to the same accuracy; corrupt entries are ignored,
# counted, and replaced, so the run after that hits again.
set -euo pipefail
lt_run="$1" data="$2" device="$3"
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
metric() {  # metric FILE NAME: a number of the metrics report
  sed -n "s/^ *\"$2\": \([0-9.e+-]*\),\{0,1\}$/\1/p" "$1" | head -n1
}
run() {  # run NAME: one training run, its accuracy line kept
  LT_CACHE_DIR="$dir/cache" LT_FALLBACK=error "$lt_run" --data "$data" --device "$device" \
    --epochs 2 --metrics-json "$dir/$1.json" >"$dir/$1.out" 2>"$dir/$1.err" ||
    { echo "lt-run ($1) failed:"; cat "$dir/$1.out" "$dir/$1.err"; exit 1; }
  grep '^test accuracy' "$dir/$1.out" | cut -d' ' -f3-4
}
first="$(run first)"
misses="$(metric "$dir/first.json" persistent_cache_misses)"
entries="$(find "$dir/cache/$device" -name '*.ltc' | wc -l)"
echo "first process: $first, persistent_cache_misses $misses, $entries entries"
awk -v m="$misses" 'BEGIN { exit !(m > 0) }' || { echo "FAIL: the first run missed nothing"; exit 1; }
((entries > 0)) || { echo "FAIL: nothing was stored in $dir/cache/$device"; exit 1; }

second="$(run second)"
hits="$(metric "$dir/second.json" persistent_cache_hits)"
misses="$(metric "$dir/second.json" persistent_cache_misses)"
echo "second process: $second, persistent_cache_hits $hits, persistent_cache_misses $misses"
[[ "$misses" == 0 || "$misses" == 0.0 ]] || { echo "FAIL: the second process compiled again"; exit 1; }
awk -v h="$hits" 'BEGIN { exit !(h > 0) }' || { echo "FAIL: no persistent cache hit"; exit 1; }
[[ "$second" == "$first" ]] || { echo "FAIL: accuracy $second differs from $first"; exit 1; }

# Every entry truncated to garbage: ignored (a warning names the file), rebuilt, replaced.
for f in "$dir/cache/$device"/*.ltc; do printf 'LTCACHE1 garbage' >"$f"; done
third="$(run third)"
[[ "$third" == "$first" ]] || { echo "FAIL: accuracy after corruption $third != $first"; exit 1; }
grep -q 'ignoring and removing' "$dir/third.err" ||
  { echo "FAIL: no warning about the corrupt entries"; cat "$dir/third.err"; exit 1; }
fourth="$(run fourth)"
misses="$(metric "$dir/fourth.json" persistent_cache_misses)"
[[ "$misses" == 0 || "$misses" == 0.0 ]] || { echo "FAIL: corrupt entries were not replaced"; exit 1; }
echo "OK: $device: a second process compiles nothing; corrupt entries are replaced"
