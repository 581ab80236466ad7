#!/bin/sh
# The SAC example: python/examples/sac_pendulum.py, SAC with per's
# prioritized buffer on Gymnasium's Pendulum-v1 in PyTorch, in
# build-py/venv (tools/pyvenv.sh builds the package and installs torch
# and gymnasium from PyPI: torch's wheels with their CUDA libraries are
# several GB). Arguments go to the example (--help); --smoke checks the
# pipeline in about a minute.
set -e
cd "$(dirname "$0")/.."
sh tools/pyvenv.sh torch gymnasium
root=$(pwd)
cd build-py
OMP_NUM_THREADS=1 "$root/build-py/venv/bin/python" \
  "$root/python/examples/sac_pendulum.py" "$@"
