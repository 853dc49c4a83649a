#!/usr/bin/env bash
# The main job: installs dependencies, builds, and trains a classifier on the shipped digits
# data set on the default (fastest available) backend. Arguments go to lt-run.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${LT_BUILD_DIR:-$root/build}"
bash "$root/tools/build.sh"
exec "$build/bin/lt-run" --data "$root/examples/data/digits.csv.gz" "$@"
