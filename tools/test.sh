#!/bin/sh
# Build per and run its tests (the README's test command): the C suites
# through Meson, then the Python package's pytest suite (tools/pytest.sh)
# and, where an MPI is installed, per.mpi under mpirun (tools/pympi.sh).
#
#   sh tools/test.sh                 the quick tests (every suite but 'slow')
#   sh tools/test.sh --full          every test, as CI runs them
#   sh tools/test.sh [--full] ARGS   ARGS go to meson test (e.g. --suite cpu)
#
# The quick run builds only what its tests need: no nvcc, no benchmarks. The
# suite 'slow' holds the cases that take minutes on a 2-core machine (the
# determinism builds, the CUDA kernels on the host shim and through nvcc,
# the benchmarks' smoke runs, the examples that train); CI runs it in a
# stage of its own (.ci/run).
set -e
cd "$(dirname "$0")/.."
select="--no-suite slow"
if [ "${1:-}" = "--full" ]; then
  select=""
  shift
fi
sh tools/deps.sh
sh tools/setup.sh build -Dwerror=true -Dcxx=enabled >/dev/null
# shellcheck disable=SC2086 # no word when --full
meson test -C build --print-errorlogs $select "$@"
python3 tools/summary.py build
sh tools/pytest.sh
if command -v mpirun >/dev/null 2>&1 && command -v mpicc >/dev/null 2>&1; then
  sh tools/pympi.sh --no-build
else
  echo "per.mpi: no MPI here (sh tools/deps.sh mpi installs Open MPI): not run"
fi
