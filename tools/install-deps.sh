#!/usr/bin/env bash
# Installs the Debian packages LazyTensor builds, tests and runs with; idempotent and quick
# when everything is already present. Run as root (or with sudo available).
set -euo pipefail

PKGS=(
  # toolchain
  build-essential cmake ninja-build pkg-config git clang-format
  # core: plugin loading, logging, config parsing, JSON metrics, CLI parsing
  libboost-dev libboost-filesystem-dev libspdlog-dev libfmt-dev
  libtomlplusplus-dev nlohmann-json3-dev libcli11-dev
  # host kernels (cpu_eager, tpu_sim, cpu_jit): BLAS, parallel loops, vector math
  libopenblas-dev libtbb-dev libsleef-dev
  # host kernels: convolution forward and both gradients (oneDNN; benchmarks/conv measured it
  # against im2col + GEMM)
  libdnnl-dev
  # cpu_jit: LLVM ORC
  llvm-19-dev libzstd-dev zlib1g-dev libxml2-dev libedit-dev libffi-dev
  # gpu_opencl: ICD loader, headers and PoCL (OpenCL on the CPU); Khronos' C++ bindings
  # (CL/opencl.hpp) for the plugin's handles and info queries
  ocl-icd-opencl-dev opencl-headers pocl-opencl-icd opencl-clhpp-headers
  # tests and benchmarks
  libgtest-dev libgmock-dev libbenchmark-dev valgrind
  # tests/interop: a second library's view of DLPack-exported memory (Eigen::Map)
  libeigen3-dev
  # onnx (LazyTensor::onnx): the ONNX project's generated protobuf classes (onnx_proto) and the
  # protobuf runtime that parses model files, instead of a hand-written reader
  libonnx-dev libprotobuf-dev
  # tests/onnx: the ONNX project's backend test suite (models, inputs, expected outputs)
  libonnx-testdata
  # fuzzing (tests/fuzz, CI's fuzz lane): clang 15 brings libFuzzer and its sanitizer runtimes
  # (libclang-common-15-dev); clang 14 cannot compile _Float16 on x86-64
  clang-15
  # distributed training (issue #16): OpenMPI, found by CMake's FindMPI
  libopenmpi-dev openmpi-bin
  # interoperability: DLPack tensors, Graphviz rendering of graph dumps (lt-graph)
  libdlpack-dev libgraphviz-dev
  # data: English text (fortune files) the GPT of lt-run --model gpt trains on
  fortunes
  # data: Fashion-MNIST (60,000 + 10,000 28x28 images), lt-run --data fashion-mnist
  dataset-fashion-mnist
)

missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if ((${#missing[@]})); then
  echo "install-deps: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
