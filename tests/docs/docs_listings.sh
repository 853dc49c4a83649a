#!/usr/bin/env bash
# docs_listings.sh DOC SOURCE_DIR — every ```cpp listing in DOC is preceded by a line
# "<!-- listing: PATH -->" and is the file SOURCE_DIR/PATH verbatim; a listing without such a
# line, or one that differs from its file, fails (docs/training.md, issue #28).
set -euo pipefail
doc="$1" src="$2"
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
awk -v out="$dir" '
  /^<!-- listing: .* -->$/ { path = $3; next }
  /^```cpp$/ { if (path == "") { print "listing without a <!-- listing: PATH --> line at line " NR; bad = 1 }
               n++; file = out "/" n; print path > (out "/" n ".path"); inside = 1; next }
  inside && /^```$/ { inside = 0; path = ""; close(file); next }
  inside { print > file }
  END { exit bad }' "$doc"
count=0
for p in "$dir"/*.path; do
  [[ -e "$p" ]] || break
  listing="${p%.path}" path="$(cat "$p")"
  [[ -f "$src/$path" ]] || { echo "FAIL: $path (named by a listing) does not exist"; exit 1; }
  diff -u "$src/$path" "$listing" || { echo "FAIL: the listing of $path differs from the file"; exit 1; }
  count=$((count + 1))
done
((count >= 3)) || { echo "FAIL: only $count listings found"; exit 1; }
echo "OK: $count listings, each identical to its file"
