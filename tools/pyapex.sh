#!/bin/sh
# Ape-X DQN on CartPole-v1 from Python over MPI
# (python/examples/apex_cartpole.py): a learner and 3 actors on 4 ranks,
# more ranks than cores allowed. Installs Open MPI, builds the package
# with gymnasium and mpi4py into build-py/venv (tools/pyvenv.sh) and runs
# it; exit status 3 when it does not solve CartPole-v1. Arguments go to
# the example (--help).
set -e
cd "$(dirname "$0")/.."
sh tools/deps.sh mpi
sh tools/pyvenv.sh gymnasium mpi4py
root=$(pwd)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none
cd build-py
exec mpirun --oversubscribe -np 4 "$root/build-py/venv/bin/python" \
  "$root/python/examples/apex_cartpole.py" "$@"
