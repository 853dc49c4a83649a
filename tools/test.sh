#!/usr/bin/env bash
# The whole test suite: installs dependencies, builds everything (tests, benchmarks,
# examples included) and runs every test with CTest.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${LT_BUILD_DIR:-$root/build}"
bash "$root/tools/build.sh"
cd "$build"
# gpu_opencl runs a smoke subset of the conformance suite (see tests/conformance/CMakeLists.txt).
export LT_CONFORMANCE_DEVICES="${LT_CONFORMANCE_DEVICES:-cpu_eager,cpu_jit,tpu_sim}"
ctest --output-on-failure -j "${LT_JOBS:-$(nproc)}" --timeout 300
