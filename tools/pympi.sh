#!/bin/sh
# per.mpi under mpirun (python/tests_mpi/check_mpi.py): the checks on 1,
# 2, 3 and 4 ranks (more ranks than cores allowed), then a checkpoint
# saved on 4 ranks loaded on 2, 3 and 4. Builds the package with mpi4py
# into build-py/venv first (tools/pyvenv.sh), unless --no-build (tools/
# test.sh, after tools/pytest.sh built it). Needs an MPI (sh tools/deps.sh
# mpi); mpi4py comes from PyPI and must load the same MPI library.
#   sh tools/pympi.sh [--no-build]
set -e
cd "$(dirname "$0")/.."
if [ "${1:-}" != "--no-build" ]; then
  sh tools/deps.sh mpi
  sh tools/pyvenv.sh mpi4py
fi
py=$(pwd)/build-py/venv/bin/python
check=$(pwd)/python/tests_mpi/check_mpi.py
# as root (CI) Open MPI must be told; no ptrace copies in containers
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
# from outside the repository: `import per` is the installed package
cd "$dir"
"$py" -c 'import per.mpi, mpi4py; print("per.mpi with mpi4py", mpi4py.__version__)'
for n in 1 2 3 4; do
  timeout 600 mpirun --oversubscribe -np $n "$py" "$check" | tail -n 1
done
mkdir "$dir/ckpt"
timeout 300 mpirun --oversubscribe -np 4 "$py" "$check" save "$dir/ckpt" | tail -n 1
for n in 2 3 4; do
  timeout 300 mpirun --oversubscribe -np $n "$py" "$check" load "$dir/ckpt" | tail -n 1
done
