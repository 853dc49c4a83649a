#!/usr/bin/env bash
# Lists tracked C/C++ files that differ from the root .clang-format; fails if there are any.
set -uo pipefail
bad=0
while IFS= read -r f; do
  if ! "${CLANG_FORMAT:-clang-format}" --dry-run -Werror "$f" >/dev/null 2>&1; then
    echo "not clang-formatted: $f"
    bad=1
  fi
done < <(git ls-files '*.c' '*.h' '*.cpp' '*.hpp')
exit $bad
