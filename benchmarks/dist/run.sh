#!/usr/bin/env bash
# run.sh [BUILD_DIR] — bench_dist under `mpirun -np 1` and `-np 2` (JSON in $OUT_DIR, default
# /tmp), then the training-step scaling efficiency at a fixed global batch:
#   speedup = ms(1) / ms(2), efficiency = speedup / 2.
# The core count is printed beside it: with 2 processes on a 2-core machine each rank's
# threads (TBB, OpenBLAS) share the cores with the other rank's (--oversubscribe), so the
# figure measures the communication and duplication overhead, not a cluster.
set -euo pipefail
build="${1:-build}" out="${OUT_DIR:-/tmp}"
mpirun=(mpirun --allow-run-as-root --oversubscribe)
for n in 1 2; do
  "${mpirun[@]}" -np "$n" "$build/bin/bench_dist" --benchmark_format=json \
    --benchmark_out="$out/bench_dist_np$n.json" --benchmark_out_format=json >/dev/null
done
echo "cores on this machine: $(nproc)"
# The fastest of the repetitions of TrainStep/<model> (the machine is shared).
fastest() {
  awk -v m="\"TrainStep/$2/" '
    index($0, "\"name\": " m) { inside = 1 }
    inside && /"run_type": "aggregate"/ { inside = 0 }
    inside && /"ms_per_step"/ { gsub(/[^0-9.e+-]/, "", $2); if (best == "" || $2 + 0 < best) best = $2 + 0; inside = 0 }
    END { print best }' "$1"
}
for model in mlp gpt; do
  ms1=$(fastest "$out/bench_dist_np1.json" "$model")
  ms2=$(fastest "$out/bench_dist_np2.json" "$model")
  awk -v m="$model" -v a="$ms1" -v b="$ms2" 'BEGIN { printf "%s: %.3f ms/step on 1 process, %.3f ms/step on 2: speedup %.2f, scaling efficiency %.0f%%\n", m, a, b, a / b, 50 * a / b }'
done
