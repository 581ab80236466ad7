#!/bin/sh
# Build the Python package from this checkout into build-py/venv
# (tools/pyvenv.sh) and run its tests with pytest (part of the README's
# test command, tools/test.sh).
#   sh tools/pytest.sh [PYTEST ARGS]
# PYTHON picks the interpreter (default python3).
set -e
cd "$(dirname "$0")/.."
# with per._cuda_host (per.cuda's tests, tests/test_cuda.py) and, where
# an MPI is installed, mpi4py (per.mpi, tools/pympi.sh)
PER_PY_CUDA_HOST=true
export PER_PY_CUDA_HOST
if command -v mpicc >/dev/null 2>&1; then
  sh tools/pyvenv.sh mpi4py
else
  sh tools/pyvenv.sh
fi
venv=$(pwd)/build-py/venv
# From outside the repository, so that `import per` is the installed
# package and not the python/per sources next to the tests.
root=$(pwd)
cd build-py
"$venv/bin/python" -c 'import per, sys; print("per", per.__version__, "from", per.__file__)'
# PER_PYTEST_RUN=0: the package is built and installed, its tests are not
# run (CI: it runs them once, against the wheel in its stage 'wheel', and
# those of per.cuda.host, which the wheel leaves out, in its stage 'torch')
if [ "${PER_PYTEST_RUN:-1}" = 0 ]; then
  echo "pytest: not run here (PER_PYTEST_RUN=0)"
  exit 0
fi
# per._cuda_host is built here (tools/pyvenv.sh): its tests must run
PER_NEED_CUDA_HOST=1 "$venv/bin/python" -m pytest -q -p no:cacheprovider \
  "$root/python/tests" "$@"
