#!/bin/sh
# tools/consumers.sh [workdir]: per as its users take it.
#
# Installs per with Meson into a temporary prefix, then builds and runs the
# small projects of tests/consumers/ against it, one line each:
#   pkg-config, C          #include "per.h" and #include <per/per.h>
#   C++11, g++ / clang++   -Wold-style-cast, -Wuseless-cast (g++),
#                          -Wreserved-macro-identifier (clang++), -Werror;
#                          the implementation in its own file
#   Meson subproject       dependency('per') (and 'per_cuda') with per at
#                          subprojects/per; only the double per_cuda is
#                          compiled, without per's warning flags, and
#                          nothing is installed
#   CMake find_package     per::per (and per::per_cuda) from the prefix
#   CMake FetchContent     per::per (and per::per_cuda, with -DPER_CUDA=ON)
#                          from this tree
#   per_cuda, pkg-config   a C program linked with the installed libraries
#                          (double and float); a PER_REAL mismatch must
#                          fail to link
#   per_cuda, plain nvcc   nvcc -c per_cuda.cu, then cc main.c per_cuda.o
#   nvcc that fails        Meson's configure names the broken nvcc
# The per_cuda lines need an nvcc that Meson can use (else they are
# skipped). Their program stops at "no CUDA device" without a GPU, which
# is the expected outcome there; with one it samples a batch on the device
# and compares it with the CPU's.
#
# PER_GPU_ARCH (a gpu_arch value, e.g. sm_90,compute_75), when set, is the
# GPU code of the Meson builds (install and subproject); CMake's is
# CUDAARCHS's, when set. CI sets both: every nvcc compile of per_cuda.cu
# is one pass per arch.
#
# Installs what is missing with apt-get (tools/deps.sh, cmake). workdir
# (default: a fresh mktemp -d, removed afterwards) keeps the builds and a
# log per consumer. Prints "consumers: N ok, N failed, N skipped" last and
# exits 1 when any consumer failed.
set -e
cd "$(dirname "$0")/.."
root=$(pwd)

need=
command -v cmake >/dev/null 2>&1 || need=cmake
# shellcheck disable=SC2086 # no argument when nothing is missing
sh tools/deps.sh $need

if [ $# -ge 1 ] && [ -n "$1" ]; then
  mkdir -p "$1"
  work=$(cd "$1" && pwd)
else
  work=$(mktemp -d "${TMPDIR:-/tmp}/per-consumers.XXXXXX")
  trap 'rm -rf "$work"' EXIT
  trap 'exit 1' HUP INT PIPE TERM
fi
src=$root/tests/consumers/src
prefix=$work/prefix
mkdir -p "$work/log" "$work/bin"
CC=${CC:-cc}
strict_c="-std=c99 -Wall -Wextra -Wpedantic -Werror"
strict_cxx="-std=c++11 -Wall -Wextra -Wpedantic -Wold-style-cast -Werror"
cmake_gen=
command -v ninja >/dev/null 2>&1 && cmake_gen="-G Ninja"

ok=0 failed=0 skipped=0
# run NAME FUNCTION: runs FUNCTION under set -e, traced, with its output in
# a log; prints one line, and the log's end when it failed (the failing
# command last). A consumer that cannot run here calls skip REASON.
run() {
  log=$work/log/$2.log
  why=$work/log/$2.skip
  set +e
  ( set -ex; "$2" ) >"$log" 2>&1
  rc=$?
  set -e
  if [ $rc -eq 0 ]; then
    ok=$((ok + 1))
    printf '  %-26s ok\n' "$1"
  elif [ $rc -eq 77 ]; then
    skipped=$((skipped + 1))
    printf '  %-26s skipped (%s)\n' "$1" "$(cat "$why")"
  else
    failed=$((failed + 1))
    printf '  %-26s FAILED (exit status %s):\n' "$1" $rc
    tail -n 30 "$log" | sed 's/^/      /'
  fi
}

# The install every other consumer uses, configured as the README's install
# command: the libraries only (no examples, benchmarks or tests), both node
# types of per_cuda when nvcc works, and per-server where libzmq is.
install_per() {
  meson setup "$work/build" "$root" --prefix="$prefix" -Dprograms=false \
    ${PER_GPU_ARCH:+-Dgpu_arch=$PER_GPU_ARCH}
  meson compile -C "$work/build"
  meson install -C "$work/build" --no-rebuild
  if pkg-config --exists libzmq; then
    "$prefix/bin/per-server" --version
  fi
}
echo "consumers: installing per into $prefix"
run "meson install" install_per
if [ $failed -ne 0 ]; then
  echo "consumers: per did not install; nothing else was tried"
  exit 1
fi
pc=$(find "$prefix" -name per.pc)
PKG_CONFIG_PATH=$(dirname "$pc")${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
export PKG_CONFIG_PATH
cuda=
[ -f "$(dirname "$pc")/per_cuda.pc" ] && cuda=1
# The toolkit of the nvcc on PATH (which may be a wrapper elsewhere):
# --dryrun names the real one's directory without compiling anything.
cuda_root=
if [ -n "$cuda" ]; then
  here=$(cd "$work" && nvcc --dryrun -c probe.cu 2>&1 | sed -n 's/^#\$ _HERE_=//p')
  cuda_root=$(dirname "${here:-$(dirname "$(command -v nvcc)")}")
fi
skip() {
  echo "$*" >"$why"
  exit 77
}
need_cuda() {
  [ -n "$cuda" ] || skip "per_cuda not installed: no usable nvcc"
}

c_pkgconfig() {
  flags=$(pkg-config --cflags --libs per)
  for f in quoted angled; do
    # shellcheck disable=SC2086 # flags are words on purpose
    $CC $strict_c "$src/$f.c" -o "$work/bin/pc_$f" $flags
    "$work/bin/pc_$f"
  done
}

cxx() {
  command -v "$1" >/dev/null 2>&1 || skip "$1 not installed"
  flags=$(pkg-config --cflags --libs per)
  # shellcheck disable=SC2086 # flags are words on purpose
  "$1" $strict_cxx $2 "$src/impl.cpp" "$src/user.cpp" \
    -o "$work/bin/cxx_$1" $flags
  "$work/bin/cxx_$1"
}
cxx_gcc() { cxx g++ -Wuseless-cast; }
cxx_clang() {
  # -Wreserved-macro-identifier is clang 13's; older ones lack it.
  extra=
  if echo 'int main() { return 0; }' | clang++ -Wreserved-macro-identifier \
      -Werror -x c++ -fsyntax-only - >/dev/null 2>&1; then
    extra=-Wreserved-macro-identifier
  fi
  cxx clang++ "$extra"
}

meson_subproject() {
  d=$work/meson-consumer
  mkdir -p "$d/subprojects"
  cp "$root/tests/consumers/meson/meson.build" \
    "$root/tests/consumers/meson/meson_options.txt" "$src"/*.c "$src"/*.h "$d"
  ln -sfn "$root" "$d/subprojects/per"
  if [ -n "$cuda" ]; then feature=enabled; else feature=disabled; fi
  # The fallback even where a per is installed: this is the subproject test.
  meson setup "$d/build" "$d" --force-fallback-for=per,per_cuda \
    -Dcuda=$feature ${PER_GPU_ARCH:+-Dper:gpu_arch=$PER_GPU_ARCH}
  meson compile -C "$d/build"
  "$d/build/quoted"
  "$d/build/angled"
  if meson install -C "$d/build" --dry-run | grep Installing; then
    echo "the subproject installs files into the parent's prefix"
    exit 1
  fi
  [ -n "$cuda" ] || return 0
  "$d/build/cuda_main"
  sub=$d/build/subprojects/per
  test -f "$sub/libper_cuda.a"
  if [ -e "$sub/libper_cuda_float.a" ] ||
     ls "$sub"/libper_cuda_float.a.p/*.o >/dev/null 2>&1; then
    echo "the float per_cuda was compiled though nothing links it"
    exit 1
  fi
  if grep 'per_cuda\.cu' "$d/build/compile_commands.json" |
     grep -e '-Werror' -e 'all-warnings' -e '-Wall'; then
    echo "per's warning flags reach the parent's build of per_cuda.cu"
    exit 1
  fi
}

cmake_consumer() { # $1: cmake-find or cmake-fetch, then cmake arguments
  name=$1
  shift
  with_cuda=OFF
  [ -n "$cuda" ] && with_cuda=ON
  # shellcheck disable=SC2086 # cmake_gen is words on purpose
  cmake $cmake_gen -S "$root/tests/consumers/$name" -B "$work/$name" \
    -DCMAKE_C_FLAGS="$strict_c" -DWITH_CUDA=$with_cuda "$@"
  cmake --build "$work/$name" --parallel 2
  "$work/$name/quoted"
  "$work/$name/angled"
  [ -z "$cuda" ] || "$work/$name/cuda_main"
}
cmake_find() { cmake_consumer cmake-find -DCMAKE_PREFIX_PATH="$prefix"; }
# per's CUDA targets are off by default under a parent project: asked for
# where per_cuda is tested; otherwise the consumer sees the default off.
cmake_fetch() {
  per_cuda=
  [ -n "$cuda" ] && per_cuda=-DPER_CUDA=ON
  # shellcheck disable=SC2086 # no argument when per_cuda is not tested
  cmake_consumer cmake-fetch -DPER_SOURCE_DIR="$root" $per_cuda
}

cuda_pkgconfig() {
  need_cuda
  for lib in per_cuda per_cuda_float; do
    flags=$(pkg-config --cflags --libs $lib)
    # shellcheck disable=SC2086 # flags are words on purpose
    $CC $strict_c "$src/cuda_main.c" -o "$work/bin/$lib" $flags
    "$work/bin/$lib"
  done
  # The node type is in the linker names: float code, double library.
  cflags=$(pkg-config --cflags per_cuda_float)
  libs=$(pkg-config --libs per_cuda)
  # shellcheck disable=SC2086 # flags are words on purpose
  if $CC $strict_c $cflags "$src/cuda_main.c" -o "$work/bin/mismatch" $libs \
      >"$work/bin/mismatch.log" 2>&1; then
    echo "float code linked with the double per_cuda"
    exit 1
  fi
  cat "$work/bin/mismatch.log"
  grep -q 'per_cuda_[a-z_]*_float' "$work/bin/mismatch.log"
}

# The recipe without a build system: per_cuda.cu with the flags its bitwise
# contract needs, then the C compiler links the object with the CUDA
# runtime and libstdc++.
cuda_plain() {
  need_cuda
  o=$work/plain
  mkdir -p "$o"
  nvcc -O2 -fmad=false -ftz=false -prec-div=true -prec-sqrt=true \
    -c "$root/per_cuda.cu" -o "$o/per_cuda.o"
  libdir=$cuda_root/lib64
  [ -d "$libdir" ] || libdir=$cuda_root/lib
  # shellcheck disable=SC2086 # strict_c is words on purpose
  $CC $strict_c -I"$root" -isystem "$cuda_root/include" "$src/cuda_main.c" \
    "$o/per_cuda.o" -o "$o/main" -L"$libdir" -Wl,-rpath,"$libdir" \
    -lcudart -lstdc++ -lm
  "$o/main"
}

# An nvcc that exists but fails: configure must say which one, not that
# none was found.
nvcc_fails() {
  mkdir -p "$work/fake-nvcc"
  printf '#!/bin/sh\nexit 1\n' >"$work/fake-nvcc/nvcc"
  chmod +x "$work/fake-nvcc/nvcc"
  PATH=$work/fake-nvcc:$PATH meson setup "$work/fake-build" "$root" \
    -Dtests=false
  grep -F "nvcc was found at $work/fake-nvcc/nvcc" \
    "$work/fake-build/meson-logs/meson-log.txt"
}

run "pkg-config, C" c_pkgconfig
run "C++11 strict, g++" cxx_gcc
run "C++11 strict, clang++" cxx_clang
run "Meson subproject" meson_subproject
run "CMake find_package" cmake_find
run "CMake FetchContent" cmake_fetch
run "per_cuda, pkg-config" cuda_pkgconfig
run "per_cuda, plain nvcc" cuda_plain
run "nvcc that fails" nvcc_fails

echo "consumers: $ok ok, $failed failed, $skipped skipped"
[ $failed -eq 0 ]
