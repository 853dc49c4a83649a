#!/usr/bin/env bash
# check_plugin_sizes.sh — keeps the shared-lowering architecture honest: each in-tree plugin
# directory holds at most 1,600 lines of C/C++ (what a backend must say about its hardware;
# validation, attributes, decompositions and reference kernels live in core), and the
# example out-of-tree plugin written with the plugin kit stays at most 120 lines.
# 1,600 since dynamic shapes (plugin ABI 1.2): a code generator must itself say how its code
# runs every size (cpu_jit: ~70 lines, the per-size instance of a program and the check that no
# size changes its IR); what that needs in common (instantiate, fit_build, kit::PerValue) is in
# lazytensor/lower/dynamic.hpp and the kit.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
status=0
count() { find "$@" -type f \( -name '*.c' -o -name '*.cpp' -o -name '*.h' -o -name '*.hpp' \) \
  -exec cat {} + | wc -l; }
for dir in plugins/*/; do
  dir="${dir%/}" n="$(count "$dir")"
  if ((n > 1600)); then echo "FAIL: $dir has $n lines of C/C++ (limit 1600)"; status=1
  else echo "ok: $dir $n lines"; fi
done
n="$(count examples/external_plugin/toy_plugin.cpp)"
if ((n > 120)); then echo "FAIL: examples/external_plugin/toy_plugin.cpp has $n lines (limit 120)"; status=1
else echo "ok: examples/external_plugin/toy_plugin.cpp $n lines"; fi
exit $status
