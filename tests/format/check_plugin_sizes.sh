#!/usr/bin/env bash
# check_plugin_sizes.sh — keeps the shared-lowering architecture honest: each in-tree plugin
# directory holds at most 1,500 lines of C/C++ (what a backend must say about its hardware;
# validation, attributes, decompositions and reference kernels live in core), and the
# example out-of-tree plugin written with the plugin kit stays at most 120 lines.
# 1,500 since the column-reduction schedule (LoopKernel::column_reduction), the vector row choice
# (lower::vector_rows) and the host-step executable (kit::StepsExecutable) moved out of the
# plugins (1,550 after the loops and operand accesses of a fused kernel moved into lower, 1,600
# since dynamic shapes, plugin ABI 1.2). What the code generators share lives in core: the kernel
# planner (lower/kernel_plan.hpp), the loop schedule of a fused kernel (lower/loop_kernel.hpp:
# rows, reduction phases, per-row nodes, output roles, stashes, and the coalesced loops with
# every operand's access as an offset and a stride per loop), how each op reads its operand
# (lower::operand_view), the dynamic-size mechanism (kit::PerValue around one build;
# lower/dynamic.hpp's instantiate, fit_build, template_source) and the persistent cache with its
# counters (kit::take_disk_cache, kit::disk_cache_stats). Issue #24 asks for 1,300 per plugin and
# this check at 1,500 or below (met): lower the limit when both compiling plugins get there by sharing
# more (both now render the schedule's accesses, gpu_opencl its windows, gather and epilogue
# reads too; left: the scalar formulas both emitters encode), never by packing lines.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
status=0
count() { find "$@" -type f \( -name '*.c' -o -name '*.cpp' -o -name '*.h' -o -name '*.hpp' \) \
  -exec cat {} + | wc -l; }
for dir in plugins/*/; do
  dir="${dir%/}" n="$(count "$dir")"
  if ((n > 1500)); then echo "FAIL: $dir has $n lines of C/C++ (limit 1500)"; status=1
  else echo "ok: $dir $n lines"; fi
done
n="$(count examples/external_plugin/toy_plugin.cpp)"
if ((n > 120)); then echo "FAIL: examples/external_plugin/toy_plugin.cpp has $n lines (limit 120)"; status=1
else echo "ok: examples/external_plugin/toy_plugin.cpp $n lines"; fi
exit $status
