#!/usr/bin/env bash
# Configures and builds LazyTensor into $LT_BUILD_DIR (default: build/) with Ninja, after
# making sure the Debian dependencies are installed. Extra arguments go to CMake.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${LT_BUILD_DIR:-$root/build}"
bash "$root/tools/install-deps.sh"
jobs="${LT_JOBS:-$(nproc)}"
cmake -G Ninja -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
cmake --build "$build" -j "$jobs"
