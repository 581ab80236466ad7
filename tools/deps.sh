#!/bin/sh
# Install what building per needs (a C compiler, a C++ compiler for the
# C++ compile check, meson, ninja, pkg-config) from Debian packages, but only
# what is missing; extras by name (clang, clang-format, mpi: Open MPI for
# per_mpi.h's tests, musl: musl-gcc for tools/determinism.sh, zmq: libzmq
# for per-server) or as Debian packages. Runs apt-get directly as root,
# through sudo otherwise.
need=""
command -v cc >/dev/null 2>&1 || need="$need gcc libc6-dev"
command -v c++ >/dev/null 2>&1 || need="$need g++"
command -v meson >/dev/null 2>&1 || need="$need meson"
command -v ninja >/dev/null 2>&1 || need="$need ninja-build"
command -v pkg-config >/dev/null 2>&1 || need="$need pkg-config"
for extra in "$@"; do
  case "$extra" in
    clang) command -v clang >/dev/null 2>&1 || need="$need clang" ;;
    clang-format) command -v clang-format >/dev/null 2>&1 || need="$need clang-format" ;;
    mpi) command -v mpicc >/dev/null 2>&1 || need="$need openmpi-bin libopenmpi-dev" ;;
    musl) command -v musl-gcc >/dev/null 2>&1 || need="$need musl-tools" ;;
    zmq) pkg-config --exists libzmq 2>/dev/null || need="$need libzmq3-dev" ;;
    *) need="$need $extra" ;;
  esac
done
[ -z "$need" ] && exit 0
if [ "$(id -u)" -eq 0 ]; then SUDO=""; else SUDO="sudo"; fi
echo "installing:$need"
$SUDO apt-get update -qq &&
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $need >/dev/null
