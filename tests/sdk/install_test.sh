#!/usr/bin/env bash
# install_test.sh <build dir> <source dir> <cmake> <ninja> — the SDK end-to-end check (see
# CMakeLists.txt). Every step prints what it checks; the first failure ends the test.
set -euo pipefail
build="$1" src="$2" cmake="$3" ninja="$4"
work="$(mktemp -d "${TMPDIR:-/tmp}/lt-sdk-test.XXXXXX")"
trap 'rm -rf "$work"' EXIT
step() { echo "== $*"; }
gen=(-G Ninja "-DCMAKE_MAKE_PROGRAM=$ninja" -DCMAKE_BUILD_TYPE=Release)
# No inherited plugin path or device: the package must find its own plugins.
unset LT_PLUGIN_PATH LT_DEVICE LT_CONFIG

step "install to a temporary prefix, then move it (the package must be relocatable)"
"$cmake" --install "$build" --prefix "$work/staged" >/dev/null
mv "$work/staged" "$work/prefix"
p="$work/prefix"
libdir=lib
[ -d "$p/lib" ] || libdir="$(cd "$p" && ls -d lib*/ | head -1)"
for f in include/lazytensor/lt.h include/lazytensor/lt_plugin.h include/lazytensor/lazytensor.hpp \
  "$libdir/cmake/LazyTensor/LazyTensorConfig.cmake" \
  "$libdir/cmake/LazyTensor/LazyTensorConfigVersion.cmake" \
  "$libdir/cmake/LazyTensor/LazyTensorPlugin.cmake" "$libdir/pkgconfig/lazytensor.pc" \
  "$libdir/pkgconfig/lazytensor-plugin.pc" share/lazytensor/examples/external_plugin/toy_plugin.cpp \
  "$libdir/lazytensor/plugins/liblt_plugin_cpu_eager.so" bin/lt-info bin/lt-conformance \
  bin/lt-run share/lazytensor/digits.csv.gz; do
  [ -e "$p/$f" ] || { echo "missing from the package: $f"; exit 1; }
done
soname="$(objdump -p "$p/$libdir/liblazytensor.so" | awk '/SONAME/ {print $2}')"
echo "SONAME $soname"
[[ "$soname" == liblazytensor.so.[0-9]* ]] || { echo "unversioned SONAME"; exit 1; }
if grep -rIl -- "$build" "$p" >/dev/null; then
  echo "the package mentions the build directory:"; grep -rIl -- "$build" "$p"; exit 1
fi

step "lt-info from the moved prefix finds cpu_eager in <prefix>/$libdir/lazytensor/plugins"
"$p/bin/lt-info" --json >"$work/info.json"
# (the core reports the path as it was loaded: <prefix>/bin/../lib/... through the rpath)
grep -q "\"path\": \"$p/[a-z./]*lazytensor/plugins/liblt_plugin_cpu_eager.so\"" "$work/info.json" \
  || { cat "$work/info.json"; echo "cpu_eager not loaded from the moved prefix"; exit 1; }

step "the installed lt-run trains from the moved prefix on the data set it installed"
"$p/bin/lt-run" --device cpu_eager --epochs 1 >"$work/lt_run.log" 2>&1 || { cat "$work/lt_run.log"; exit 1; }
head -n 1 "$work/lt_run.log"
grep -q "| $p/share/lazytensor/digits.csv.gz: train" "$work/lt_run.log" ||
  { echo "lt-run did not read the prefix's data set"; exit 1; }
grep -q "^test accuracy" "$work/lt_run.log" || { cat "$work/lt_run.log"; exit 1; }

step "the installed example plugin (share/lazytensor/examples) builds against the package alone"
"$cmake" -S "$p/share/lazytensor/examples/external_plugin" -B "$work/toy" "${gen[@]}" \
  "-DCMAKE_PREFIX_PATH=$p" >"$work/toy.log" 2>&1 || { cat "$work/toy.log"; exit 1; }
"$cmake" --build "$work/toy" >>"$work/toy.log" 2>&1 || { cat "$work/toy.log"; exit 1; }
[ -f "$work/toy/liblt_plugin_toy.so" ] || { echo "plugin not in its own build dir"; exit 1; }
[ ! -e "$p/$libdir/lazytensor/plugins/liblt_plugin_toy.so" ] || { echo "wrote into the package"; exit 1; }

step "the build file docs/writing-a-backend.md shows builds verbatim and its demo runs"
mkdir -p "$work/doc_toy"
awk '/^A whole build file for the example/ {f=1} f && /^```cmake/ {p=1; next} p && /^```/ {exit} p' \
  "$src/docs/writing-a-backend.md" >"$work/doc_toy/CMakeLists.txt"
grep -q lt_add_plugin "$work/doc_toy/CMakeLists.txt" || { echo "no listing found in the doc"; exit 1; }
cp "$src/examples/external_plugin/toy_plugin.cpp" "$src/examples/external_plugin/toy_demo.c" "$work/doc_toy/"
"$cmake" -S "$work/doc_toy" -B "$work/doc_toy/build" "${gen[@]}" "-DCMAKE_PREFIX_PATH=$p" \
  >"$work/doc_toy.log" 2>&1 && "$cmake" --build "$work/doc_toy/build" >>"$work/doc_toy.log" 2>&1 \
  || { cat "$work/doc_toy.log"; exit 1; }
LT_PLUGIN_PATH="$work/doc_toy/build" "$work/doc_toy/build/toy_demo" >/dev/null

step "the toy backend runs through the core (LT_PLUGIN_PATH = its build dir)"
LT_PLUGIN_PATH="$work/toy" "$work/toy/toy_demo"

step "lt-conformance passes on the toy plugin"
"$p/bin/lt-conformance" "$work/toy/liblt_plugin_toy.so" --gtest_brief=1 >"$work/conf.log" 2>&1 \
  || { cat "$work/conf.log"; exit 1; }
grep -E "^(add|neg|relu|exp) " "$work/conf.log"
tail -n 2 "$work/conf.log"

step "c_quickstart and cpp_quickstart build against the package and run"
"$cmake" -S "$src/tests/sdk/consumer" -B "$work/apps" "${gen[@]}" "-DCMAKE_PREFIX_PATH=$p" \
  "-DLT_SOURCE_DIR=$src" >"$work/apps.log" 2>&1 || { cat "$work/apps.log"; exit 1; }
"$cmake" --build "$work/apps" >>"$work/apps.log" 2>&1 || { cat "$work/apps.log"; exit 1; }
"$work/apps/c_quickstart/lt_c_quickstart" >/dev/null
"$work/apps/cpp_quickstart/lt_cpp_quickstart" >/dev/null

step "pkg-config alone: C (lazytensor) and C++ (lazytensor-cpp) build, and run without LD_LIBRARY_PATH"
export PKG_CONFIG_PATH="$p/$libdir/pkgconfig"
flags="$(pkg-config --cflags --libs lazytensor)"
echo "pkg-config lazytensor: $flags"
cc -o "$work/qs_pc" "$src/examples/c_quickstart/main.c" $flags
env -u LD_LIBRARY_PATH "$work/qs_pc" >/dev/null
cxxflags="$(pkg-config --cflags --libs lazytensor-cpp)"
echo "pkg-config lazytensor-cpp: $cxxflags"
c++ -o "$work/cpp_pc" "$src/examples/cpp_quickstart/main.cpp" $cxxflags
env -u LD_LIBRARY_PATH "$work/cpp_pc" >/dev/null
step "pkg-config lazytensor-plugin alone: the installed example plugin links with nothing left undefined and passes lt-conformance"
pflags="$(pkg-config --cflags --libs lazytensor-plugin)"
echo "pkg-config lazytensor-plugin: $pflags"
mkdir -p "$work/pc_toy"
c++ -shared -Wl,--no-undefined -o "$work/pc_toy/liblt_plugin_toy.so" \
  "$p/share/lazytensor/examples/external_plugin/toy_plugin.cpp" $pflags
"$p/bin/lt-conformance" "$work/pc_toy/liblt_plugin_toy.so" --gtest_brief=1 >"$work/pc_conf.log" 2>&1 \
  || { cat "$work/pc_conf.log"; exit 1; }
tail -n 1 "$work/pc_conf.log"
echo "sdk install test: ok"
